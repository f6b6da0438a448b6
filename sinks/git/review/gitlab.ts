import { reviewProjectProblem } from '../../../api/review-checks.js'
import { forgeError, forgeMessage, forgeRequest, secretsOf, type ForgeRequest } from './http.js'
import { ReviewError, type MergeOutcome, type ReviewEndpoint, type ReviewProvider, type ReviewRequest, type ReviewText } from './provider.js'

// GitLab merge requests through the documented REST API v4 (https://docs.gitlab.com/api/merge_requests/,
// https://docs.gitlab.com/api/branches/). Tested against the documented API, not a live GitLab.

interface GitLabMergeRequest {
  iid: number
  web_url: string
  state: string
  sha: string | null
  source_branch: string
  target_branch: string
}

const STATES: Record<string, ReviewRequest['state']> = { opened: 'open', merged: 'merged', closed: 'closed', locked: 'closed' }

export function createGitLabProvider(endpoint: ReviewEndpoint): ReviewProvider {
  const problem = reviewProjectProblem('gitlab', endpoint.project)
  if (problem) throw new ReviewError('invalid', `gitlab: project ${problem}`)
  // A numeric id as is; a full path URL-encoded as one segment (group%2Fproject), as GitLab requires.
  const project = /^[0-9]+$/.test(endpoint.project) ? endpoint.project : encodeURIComponent(endpoint.project)
  const base = `/projects/${project}`

  const send = (req: ForgeRequest) => forgeRequest(endpoint, { ...req, headers: { 'PRIVATE-TOKEN': endpoint.token, ...req.headers } })
  const mrPath = (id: string) => `${base}/merge_requests/${iidOf(id)}`

  async function findOpen(source: string, target: string): Promise<ReviewRequest | undefined> {
    const path = `${base}/merge_requests`
    const res = await send({ method: 'GET', path, query: { source_branch: source, target_branch: target, state: 'opened' } })
    if (!Array.isArray(res.body)) throw malformed('GET', path)
    // At most one is opened by Kollect; should a person open another, the oldest stays the one.
    const found = res.body.map((mr) => toRequest(mr, 'GET', path)).sort((a, b) => Number(a.id) - Number(b.id))
    return found[0]
  }

  return {
    name: 'gitlab',
    findOpen,

    async get(id) {
      const path = mrPath(id)
      return toRequest((await send({ method: 'GET', path })).body, 'GET', path)
    },

    async open(source, target, text) {
      const path = `${base}/merge_requests`
      const res = await send({
        method: 'POST',
        path,
        body: { source_branch: source, target_branch: target, title: text.title, description: text.description, remove_source_branch: false },
        handled: [409],
      })
      if (res.status !== 409) return toRequest(res.body, 'POST', path)
      // "Another open merge request already exists for this source branch": another replica won the race.
      const existing = await findOpen(source, target)
      if (existing) return existing
      throw forgeError(endpoint, `POST ${path}`, 'invalid', `answered 409${forgeMessage(res.body, secretsOf(endpoint))}`, 409)
    },

    async update(id, text: ReviewText) {
      const path = mrPath(id)
      const res = await send({ method: 'PUT', path, body: { title: text.title, description: text.description } })
      return toRequest(res.body, 'PUT', path)
    },

    async merge(id, sha): Promise<MergeOutcome> {
      const path = `${mrPath(id)}/merge`
      // 409: "SHA does not match HEAD of source branch", nothing merged. 405/406/422: not mergeable
      // now (closed, draft, conflicts, a required pipeline that has not passed).
      const res = await send({ method: 'PUT', path, body: { sha }, handled: [405, 406, 409, 422] })
      if (res.status === 409) return 'stale'
      if (res.status !== 200 && res.status !== 201) return 'not-mergeable'
      return toRequest(res.body, 'PUT', path).state === 'merged' ? 'merged' : 'not-mergeable'
    },

    async close(id) {
      const path = mrPath(id)
      await send({ method: 'PUT', path, body: { state_event: 'close' } })
    },

    async deleteBranch(branch) {
      const path = `${base}/repository/branches/${encodeURIComponent(branch)}`
      const res = await send({ method: 'DELETE', path, handled: [404] })
      // Only an absent branch is done; an unknown project answers 404 too and must not pass as deleted.
      if (res.status === 404 && !/branch not found/i.test(forgeMessage(res.body, secretsOf(endpoint)))) {
        throw forgeError(endpoint, `DELETE ${path}`, 'not-found', `answered 404${forgeMessage(res.body, secretsOf(endpoint))}`, 404)
      }
    },
  }
}

/** The MR iid: digits only, so an id can never reach another path. */
function iidOf(id: string): string {
  if (!/^[0-9]+$/.test(id)) throw new ReviewError('invalid', `merge request id "${id.slice(0, 40)}" is not a GitLab iid`)
  return id
}

function malformed(method: string, path: string): ReviewError {
  return new ReviewError('transient', `${method} ${path}: the answer is not a GitLab merge request`)
}

function toRequest(body: unknown, method: string, path: string): ReviewRequest {
  const mr = body as Partial<GitLabMergeRequest> | null
  const state = typeof mr?.state === 'string' ? STATES[mr.state] : undefined
  if (
    !mr || typeof mr.iid !== 'number' || typeof mr.web_url !== 'string' || state === undefined ||
    typeof mr.source_branch !== 'string' || typeof mr.target_branch !== 'string'
  ) {
    throw malformed(method, path)
  }
  return {
    id: String(mr.iid),
    url: mr.web_url,
    state,
    // null once the source branch is gone (a merged MR whose branch was removed).
    headSha: typeof mr.sha === 'string' ? mr.sha : '',
    source: mr.source_branch,
    target: mr.target_branch,
  }
}
