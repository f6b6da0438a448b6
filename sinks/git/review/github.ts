import { branchPath, pullProvider, type PullDialect } from './forge-http.js'
import type { ReviewEndpoint, ReviewProvider } from './provider.js'

// GitHub's REST API (https://api.github.com, or https://ghe.example/api/v3), version 2022-11-28.
// Tested against Gitea where Gitea serves the same calls; where it does not (the merge and the
// branch deletion), see test/integration/review-gitea.test.ts.

const PAGE_SIZE = 100

function githubDialect(token: string): PullDialect {
  return {
    name: 'github',
    headers: {
      Authorization: `Bearer ${token}`,
      Accept: 'application/vnd.github+json',
      'X-GitHub-Api-Version': '2022-11-28',
    },
    pageSize: PAGE_SIZE,
    openQuery: (owner, source, target, page) =>
      new URLSearchParams({ head: `${owner}:${source}`, base: target, state: 'open', per_page: String(PAGE_SIZE), page: String(page) }).toString(),
    // sha is the optimistic check: a moved head answers 409 and merges nothing.
    merge: (sha) => ({ method: 'PUT', body: { sha, merge_method: 'merge' } }),
    branchPath: (branch) => `/git/refs/heads${branchPath(branch)}`,
  }
}

export function githubProvider(endpoint: ReviewEndpoint): ReviewProvider {
  return pullProvider(githubDialect(endpoint.token), endpoint)
}
