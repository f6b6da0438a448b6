// The review mode's seam to a forge: what the git sink needs of a merge request (GitLab) or pull
// request (Gitea, GitHub), and nothing else, so a provider is small and a test can put a real forge
// or a recorded contract behind it. HTTP only: the sink pushes branches with git itself.

export type ReviewProviderName = 'gitlab' | 'gitea' | 'github'

export interface ReviewRequest {
  /** The forge's own handle: the PR number (Gitea, GitHub) or the MR iid (GitLab), as text. */
  id: string
  /** The page a reviewer opens; it goes into status. */
  url: string
  state: 'open' | 'merged' | 'closed'
  /** The commit the request's source branch points at, as the forge last saw it. */
  headSha: string
  source: string
  target: string
}

export interface ReviewText {
  title: string
  description: string
}

export type MergeOutcome =
  /** Merged into the target branch. */
  | 'merged'
  /** The head moved since `sha`: the forge refused, nothing was merged (Gitea 409, GitLab 409, GitHub 409). */
  | 'stale'
  /** Not mergeable now (conflicts, checks pending or failing, approvals missing): try again later. */
  | 'not-mergeable'

export interface ReviewProvider {
  readonly name: ReviewProviderName
  /** The open request from `source` into `target`, if there is one (at most one is ever opened). */
  findOpen(source: string, target: string): Promise<ReviewRequest | undefined>
  /** A request by id, whatever its state. */
  get(id: string): Promise<ReviewRequest>
  open(source: string, target: string, text: ReviewText): Promise<ReviewRequest>
  /** New title and description; the new commit arrives by pushing the source branch. */
  update(id: string, text: ReviewText): Promise<ReviewRequest>
  /** Merge only if the source head is still `sha`: the forge's optimistic check. */
  merge(id: string, sha: string): Promise<MergeOutcome>
  /** Close without merging. */
  close(id: string): Promise<void>
  /** Delete a branch of the repository; an absent branch is not an error. */
  deleteBranch(branch: string): Promise<void>
}

/**
 * What went wrong talking to the forge, classified for status: `auth` (401, a wrong or expired
 * token), `forbidden` (403, e.g. a protected branch or missing scope), `not-found` (404, an unknown
 * project or repository), `invalid` (400/422, the forge refused the request as formed),
 * `transient` (5xx, 429, network). The message never carries the token.
 */
export class ReviewError extends Error {
  constructor(
    readonly kind: 'auth' | 'forbidden' | 'not-found' | 'invalid' | 'transient',
    message: string,
    readonly status?: number,
  ) {
    super(message)
    this.name = 'ReviewError'
  }

  get retriable(): boolean {
    return this.kind === 'transient'
  }
}

/** Where a provider talks to and as whom: the sink's review settings, resolved. */
export interface ReviewEndpoint {
  /** API base, e.g. https://gitea.example/api/v1, https://api.github.com, https://gitlab.example/api/v4. */
  apiUrl: string
  /** owner/repo (Gitea, GitHub) or the project's id or full path (GitLab). */
  project: string
  token: string
  /** The SSRF guard, checked before every request (redirects are not followed). */
  checkEndpoint: (url: string) => Promise<string | null>
  /** Per-request timeout. */
  timeoutMs: number
}
