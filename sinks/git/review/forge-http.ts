import { reviewProjectProblem } from '../../../api/review-checks.js'
import { forgeMessage, forgeRequest, secretsOf, type ForgeRequest } from './http.js'
import {
  ReviewError, type MergeOutcome, type ReviewEndpoint, type ReviewProvider, type ReviewProviderName, type ReviewRequest, type ReviewText,
} from './provider.js'

// What the pull-request providers (Gitea, GitHub) share on top of the forge client in http.ts:
// paths, the pull request's JSON shape, and the provider itself, each forge only a dialect.

interface ForgeClient {
  /**
   * The parsed JSON body of a 2xx answer (undefined when empty). A status listed in `expect` is
   * returned as `{ status }` instead of thrown, for the statuses a caller gives a meaning.
   */
  request<T>(method: ForgeRequest['method'], path: string, opts?: { body?: unknown; expect?: readonly number[] }): Promise<ForgeAnswer<T>>
}

type ForgeAnswer<T> = { ok: true; status: number; data: T } | { ok: false; status: number; message: string }

/**
 * `/a/b/c` with every segment percent-encoded: branch and project names are data, not path. "."
 * and ".." survive encoding and a URL parser resolves them (their encoded forms too), so they
 * are refused.
 */
function apiPath(...segments: readonly string[]): string {
  return segments.map((s) => {
    if (s === '.' || s === '..') throw new ReviewError('invalid', `"${s}" cannot be a segment of a forge API path`)
    return '/' + encodeURIComponent(s)
  }).join('')
}

/** A branch under a wildcard route (`…/branches/*`, `…/git/refs/heads/*`): its `/` stay separators. */
export function branchPath(branch: string): string {
  return apiPath(...branch.split('/'))
}

/** owner and repository of an `owner/repo` project. */
function ownerRepo(provider: ReviewProviderName, project: string): [string, string] {
  const problem = reviewProjectProblem(provider, project)
  if (problem) throw new ReviewError('invalid', `${provider}: project ${problem}`)
  const [owner, repo] = project.split('/')
  return [owner!, repo!]
}

/** The shared forge client (http.ts) with a provider's headers, answering in ForgeAnswers. */
function forgeClient(endpoint: ReviewEndpoint, headers: Record<string, string>): ForgeClient {
  return {
    async request<T>(method: ForgeRequest['method'], path: string, opts: { body?: unknown; expect?: readonly number[] } = {}): Promise<ForgeAnswer<T>> {
      const { status, body } = await forgeRequest(endpoint, { method, path, body: opts.body, headers, handled: opts.expect })
      if (status >= 200 && status < 300) return { ok: true, status, data: body as T }
      return { ok: false, status, message: forgeMessage(body, secretsOf(endpoint)) }
    },
  }
}

/** The part of a pull request Gitea and GitHub both serve (GitHub's shape, which Gitea copies). */
interface PullJson {
  number: number
  html_url: string
  state: string
  merged?: boolean
  merged_at?: string | null
  head: { ref: string; sha: string; repo?: { full_name?: string } | null }
  base: { ref: string; repo?: { full_name?: string } | null }
}

function toReviewRequest(pr: PullJson): ReviewRequest {
  const merged = pr.merged === true || (pr.merged_at !== undefined && pr.merged_at !== null)
  return {
    id: String(pr.number),
    url: pr.html_url,
    state: merged ? 'merged' : pr.state === 'open' ? 'open' : 'closed',
    headSha: pr.head.sha,
    source: pr.head.ref,
    target: pr.base.ref,
  }
}

/** From `source` into `target` within the repository itself: a fork's branch of the same name is someone else's. */
function isOwnPull(pr: PullJson, source: string, target: string): boolean {
  const head = pr.head.repo?.full_name?.toLowerCase()
  const base = pr.base.repo?.full_name?.toLowerCase()
  return pr.head.ref === source && pr.base.ref === target && head !== undefined && head === base
}

/** Where the forges that serve GitHub's pull-request shape differ. */
export interface PullDialect {
  name: ReviewProviderName
  /** Authorization and any version headers. */
  headers: Record<string, string>
  /** Query string for page `page` (from 1) of the open pulls, narrowed as far as the forge can; filtered again here. */
  openQuery(owner: string, source: string, target: string, page: number): string
  /** The page size openQuery asks for: a shorter page is the last. */
  pageSize: number
  /** The merge call, relative to the pull's path, with the optimistic head check. */
  merge(sha: string): { method: ForgeRequest['method']; body: unknown }
  /** A branch's path relative to the repository's, for DELETE. */
  branchPath(branch: string): string
}

// A burst of requests never opens more than one per branch; this many open ones means the
// repository is not what the sink thinks it is.
const MAX_PAGES = 100

export function pullProvider(dialect: PullDialect, endpoint: ReviewEndpoint): ReviewProvider {
  const [owner, repo] = ownerRepo(dialect.name, endpoint.project)
  const http = forgeClient(endpoint, dialect.headers)
  const repoPath = apiPath('repos', owner, repo)
  const pullPath = (id: string): string => `${repoPath}/pulls${apiPath(id)}`
  const call = async <T>(method: ForgeRequest['method'], path: string, body?: unknown): Promise<T> => {
    const answer = await http.request<T>(method, path, { body })
    // Without `expect`, anything but 2xx has thrown.
    return (answer as { data: T }).data
  }
  const textBody = (text: ReviewText): { title: string; body: string } => ({ title: text.title, body: text.description })
  const get = async (id: string): Promise<ReviewRequest> => toReviewRequest(await call<PullJson>('GET', pullPath(id)))

  return {
    name: dialect.name,
    get,

    async findOpen(source: string, target: string): Promise<ReviewRequest | undefined> {
      for (let page = 1; page <= MAX_PAGES; page++) {
        const pulls = await call<PullJson[]>('GET', `${repoPath}/pulls?${dialect.openQuery(owner, source, target, page)}`)
        const own = pulls.find((pr) => pr.state === 'open' && isOwnPull(pr, source, target))
        if (own) return toReviewRequest(own)
        if (pulls.length < dialect.pageSize) return undefined
      }
      throw new ReviewError('invalid', `${dialect.name}: more than ${MAX_PAGES * dialect.pageSize} open pull requests in ${endpoint.project}`)
    },

    async open(source: string, target: string, text: ReviewText): Promise<ReviewRequest> {
      return toReviewRequest(await call<PullJson>('POST', `${repoPath}/pulls`, { head: source, base: target, ...textBody(text) }))
    },

    async update(id: string, text: ReviewText): Promise<ReviewRequest> {
      return toReviewRequest(await call<PullJson>('PATCH', pullPath(id), textBody(text)))
    },

    async merge(id: string, sha: string): Promise<MergeOutcome> {
      const { method, body } = dialect.merge(sha)
      const answer = await http.request(method, `${pullPath(id)}/merge`, { body, expect: [405, 409] })
      if (answer.ok) return 'merged'
      // 409 means a moved head on both forges, but also a merge conflict on Gitea; 405 an already
      // merged request, or Gitea still checking one after a push: the request's own state says
      // which. A head that is no longer `sha` is stale whatever the status. Nothing was merged by this call.
      const now = await get(id)
      if (now.state === 'merged') return now.headSha === sha ? 'merged' : 'stale'
      return now.headSha !== sha ? 'stale' : 'not-mergeable'
    },

    async close(id: string): Promise<void> {
      await call('PATCH', pullPath(id), { state: 'closed' })
    },

    async deleteBranch(branch: string): Promise<void> {
      const answer = await http.request('DELETE', repoPath + dialect.branchPath(branch), { expect: [404, 422] })
      // An absent branch answers 404 (Gitea) or 422 (GitHub), as an unknown repository answers
      // 404: only the repository's existence tells a done deletion from a wrong project.
      if (!answer.ok) await call('GET', repoPath)
    },
  }
}
