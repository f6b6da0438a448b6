import { errorCode, redact, type Secrets } from '../../errors.js'
import {
  ReviewError, type MergeOutcome, type ReviewEndpoint, type ReviewProvider, type ReviewProviderName, type ReviewRequest, type ReviewText,
} from './provider.js'

// The HTTP side shared by the pull-request providers (Gitea, GitHub): one JSON request with the
// SSRF guard, no redirects, a timeout, and the forge's answer classified into a ReviewError whose
// message never carries the token.

export interface ForgeClient {
  /**
   * The parsed JSON body of a 2xx answer (undefined when empty). A status listed in `expect` is
   * returned as `{ status }` instead of thrown, for the statuses a caller gives a meaning.
   */
  request<T>(method: string, path: string, opts?: { body?: unknown; expect?: readonly number[] }): Promise<ForgeAnswer<T>>
}

export type ForgeAnswer<T> = { ok: true; status: number; data: T } | { ok: false; status: number; message: string }

/** `/a/b/c` with every segment percent-encoded: branch and project names are data, not path. */
export function apiPath(...segments: readonly string[]): string {
  return segments.map((s) => '/' + encodeURIComponent(s)).join('')
}

/** A branch under a wildcard route (`…/branches/*`, `…/git/refs/heads/*`): its `/` stay separators. */
export function branchPath(branch: string): string {
  return apiPath(...branch.split('/'))
}

/** owner and repository of an `owner/repo` project. */
export function ownerRepo(provider: string, project: string): [string, string] {
  const parts = project.split('/')
  if (parts.length !== 2 || parts.some((p) => p.trim() === '')) {
    throw new ReviewError('invalid', `${provider}: project must be "owner/repository", not "${project}"`)
  }
  return [parts[0]!, parts[1]!]
}

const MAX_MESSAGE = 300

function kindOf(status: number): ReviewError['kind'] {
  if (status === 401) return 'auth'
  if (status === 403) return 'forbidden'
  if (status === 404) return 'not-found'
  if (status === 408 || status === 429 || status >= 500) return 'transient'
  return 'invalid'
}

/** The forge's own explanation (`message`, GitLab's `error`), or the start of a non-JSON body. */
function forgeMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: unknown }
    const message = body.message ?? body.error
    if (typeof message === 'string') return message
    if (message !== undefined) return JSON.stringify(message)
  } catch {
    // not JSON: an HTML error page or a proxy's text
  }
  return text.replace(/\s+/g, ' ').trim()
}

export function forgeClient(provider: string, endpoint: ReviewEndpoint, headers: Record<string, string>): ForgeClient {
  const base = endpoint.apiUrl.replace(/\/+$/, '')
  const secrets: Secrets = { values: [endpoint.token] }
  const clean = (text: string): string => redact(text, secrets).slice(0, MAX_MESSAGE)

  return {
    async request<T>(method: string, path: string, opts: { body?: unknown; expect?: readonly number[] } = {}): Promise<ForgeAnswer<T>> {
      const url = base + path
      const what = `${provider} ${method} ${path.split('?')[0]}`
      const refused = await endpoint.checkEndpoint(url)
      if (refused !== null) throw new ReviewError('invalid', `${what}: API URL refused: ${clean(refused)}`)
      let response: Response
      let text: string
      try {
        response = await fetch(url, {
          method,
          redirect: 'manual',
          signal: AbortSignal.timeout(endpoint.timeoutMs),
          headers: {
            ...headers,
            Accept: headers.Accept ?? 'application/json',
            ...(opts.body === undefined ? {} : { 'Content-Type': 'application/json' }),
          },
          ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
        })
        text = await response.text()
      } catch (err) {
        const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')
        const reason = timedOut ? `no answer within ${endpoint.timeoutMs} ms` : (errorCode(err) ?? (err instanceof Error ? err.message : String(err)))
        // Any failure to get an answer (refused, reset, DNS, timeout) may pass: worth another attempt.
        throw new ReviewError('transient', `${what}: ${clean(reason)}`)
      }
      const { status } = response
      if (status >= 200 && status < 300) {
        try {
          return { ok: true, status, data: (text.trim() === '' ? undefined : JSON.parse(text)) as T }
        } catch {
          throw new ReviewError('invalid', `${what}: HTTP ${status} with a body that is not JSON: check the API URL`, status)
        }
      }
      const message = clean(forgeMessage(text))
      if (opts.expect?.includes(status)) return { ok: false, status, message }
      if (status >= 300 && status < 400) {
        throw new ReviewError('invalid', `${what}: redirected (HTTP ${status}), which is not followed: check the API URL`, status)
      }
      throw new ReviewError(kindOf(status), `${what}: HTTP ${status}${message ? `: ${message}` : ''}`, status)
    },
  }
}

/** The part of a pull request Gitea and GitHub both serve (GitHub's shape, which Gitea copies). */
export interface PullJson {
  number: number
  html_url: string
  state: string
  merged?: boolean
  merged_at?: string | null
  head: { ref: string; sha: string; repo?: { full_name?: string } | null }
  base: { ref: string; repo?: { full_name?: string } | null }
}

export function toReviewRequest(pr: PullJson): ReviewRequest {
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
export function isOwnPull(pr: PullJson, source: string, target: string): boolean {
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
  merge(sha: string): { method: string; body: unknown }
  /** A branch's path relative to the repository's, for DELETE. */
  branchPath(branch: string): string
}

// A burst of requests never opens more than one per branch; this many open ones means the
// repository is not what the sink thinks it is.
const MAX_PAGES = 100

export function pullProvider(dialect: PullDialect, endpoint: ReviewEndpoint): ReviewProvider {
  const [owner, repo] = ownerRepo(dialect.name, endpoint.project)
  const http = forgeClient(dialect.name, endpoint, dialect.headers)
  const repoPath = apiPath('repos', owner, repo)
  const pullPath = (id: string): string => `${repoPath}/pulls${apiPath(id)}`
  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
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
      // 409 means a moved head on both forges, but also a merge conflict on Gitea, and 405 an
      // already merged request: the request's own state says which. Nothing was merged by this call.
      const now = await get(id)
      if (now.state === 'merged') return now.headSha === sha ? 'merged' : 'stale'
      return answer.status === 409 && now.headSha !== sha ? 'stale' : 'not-mergeable'
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
