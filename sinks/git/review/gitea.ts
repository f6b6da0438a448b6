import { branchPath, pullProvider, type PullDialect } from './forge-http.js'
import type { ReviewEndpoint, ReviewProvider } from './provider.js'

// Gitea's API v1 (https://gitea.example/api/v1), tested against a real Gitea 1.26
// (test/integration/review-gitea.test.ts). Its pull requests have GitHub's JSON shape; the calls
// differ where this dialect says.

// Gitea's default MAX_RESPONSE_ITEMS: a larger limit is cut to it, which would end paging early.
const PAGE_SIZE = 50

function giteaDialect(token: string): PullDialect {
  return {
    name: 'gitea',
    headers: { Authorization: `token ${token}` },
    pageSize: PAGE_SIZE,
    // Gitea 1.26 lists by state only: the branch filter is the caller's.
    openQuery: (_owner, _source, _target, page) => new URLSearchParams({ state: 'open', limit: String(PAGE_SIZE), page: String(page) }).toString(),
    // head_commit_id is the optimistic check: a moved head answers 409 and merges nothing.
    merge: (sha) => ({ method: 'POST', body: { Do: 'merge', head_commit_id: sha, delete_branch_after_merge: false } }),
    branchPath: (branch) => `/branches${branchPath(branch)}`,
  }
}

export function giteaProvider(endpoint: ReviewEndpoint): ReviewProvider {
  return pullProvider(giteaDialect(endpoint.token), endpoint)
}
