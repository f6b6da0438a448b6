import { readFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { ROOT } from './metacontroller.js'

// A recorded-contract GitLab: a real HTTP server on loopback that answers the documented merge
// request and branch requests (https://docs.gitlab.com/api/merge_requests/,
// https://docs.gitlab.com/api/branches/) with bodies shaped like the documentation's examples
// (test/fixtures/gitlab/), keeps merge requests in memory so a sequence behaves as GitLab
// documents, and records every request. Tested against the documented API, not a live GitLab.

const FIXTURES = path.join(ROOT, 'test/fixtures/gitlab')
const MR_EXAMPLE = (JSON.parse(readFileSync(path.join(FIXTURES, 'merge-request.json'), 'utf8')) as { example: Record<string, unknown> }).example
const ERRORS = JSON.parse(readFileSync(path.join(FIXTURES, 'errors.json'), 'utf8')) as Record<string, { message: unknown }>

interface RecordedRequest {
  method: string
  /** As sent, still URL-encoded (group%2Fproject stays one segment). */
  path: string
  query: Record<string, string>
  headers: http.IncomingHttpHeaders
  body: unknown
}

interface MergeRequest {
  iid: number
  title: string
  description: string
  state: 'opened' | 'closed' | 'merged' | 'locked'
  source_branch: string
  target_branch: string
  sha: string
  merge_commit_sha: string | null
}

export interface GitLabContract {
  /** API base, like https://gitlab.example/api/v4. */
  apiUrl: string
  token: string
  /** The project as its full path and as its numeric id; both address the same project. */
  projectPath: string
  projectId: string
  requests: RecordedRequest[]
  /** Stands in for a git push: the branch now points at sha. */
  setBranch(name: string, sha: string): void
  branches: Map<string, string>
  mergeRequests: Map<number, MergeRequest>
  /** Every answer redirects there (a 302), to test that the client does not follow. */
  redirectTo: string | undefined
  /** Every answer is delayed this long, to test the client's timeout. */
  delayMs: number
  /** Every answer is a JSON body this many bytes long, to test the client's size limit. */
  oversizeBytes: number
  /** Forget requests, merge requests and branches other than main; iids start at 1 again. */
  reset(): void
  close(): Promise<void>
}

function error(name: string, vars: Record<string, string> = {}): { message: unknown } {
  const fill = (text: string) => text.replace(/\{(\w+)\}/g, (_, key: string) => vars[key] ?? '')
  const message = (ERRORS[name] as { message: unknown }).message
  return { message: Array.isArray(message) ? message.map((m) => fill(String(m))) : fill(String(message)) }
}

export async function startGitLabContract(opts: { token?: string } = {}): Promise<GitLabContract> {
  const token = opts.token ?? 'glpat-contract-0123456789abcdef'
  const projectPath = 'platform/inventory'
  const projectId = '42'
  const requests: RecordedRequest[] = []
  const branches = new Map<string, string>([['main', '0'.repeat(40)]])
  const mergeRequests = new Map<number, MergeRequest>()
  let nextIid = 1

  const view = (mr: MergeRequest) => ({
    ...MR_EXAMPLE,
    id: 1000 + mr.iid,
    project_id: Number(projectId),
    ...mr,
    merged_at: mr.state === 'merged' ? '2026-01-01T00:00:00.000Z' : null,
    reference: `!${mr.iid}`,
    references: { short: `!${mr.iid}`, relative: `!${mr.iid}`, full: `${projectPath}!${mr.iid}` },
    web_url: `https://gitlab.example/${projectPath}/-/merge_requests/${mr.iid}`,
  })

  function answer(method: string, segments: string[], query: Record<string, string>, body: Record<string, unknown>): [number, unknown] {
    // segments: ['projects', id, ...rest]
    const [root, id, ...rest] = segments
    if (root !== 'projects' || (id !== projectId && id !== projectPath)) return [404, error('projectNotFound')]
    const route = `${method} ${rest.map((s, i) => (i === 1 && rest[0] === 'merge_requests' ? ':iid' : s)).join('/')}`
    if (method === 'DELETE' && rest[0] === 'repository' && rest[1] === 'branches' && rest.length === 3) {
      return branches.delete(rest[2] as string) ? [204, undefined] : [404, error('branchNotFound')]
    }
    const mr = rest[0] === 'merge_requests' && rest[1] !== undefined ? mergeRequests.get(Number(rest[1])) : undefined
    switch (route) {
      case 'GET merge_requests':
        return [200, [...mergeRequests.values()]
          .filter((m) => (!query.source_branch || m.source_branch === query.source_branch) &&
            (!query.target_branch || m.target_branch === query.target_branch) &&
            (!query.state || query.state === 'all' || m.state === query.state))
          .sort((a, b) => b.iid - a.iid) // GitLab's default order: created_at desc
          .map(view)]
      case 'POST merge_requests': {
        for (const field of ['source_branch', 'target_branch', 'title']) {
          if (typeof body[field] !== 'string' || body[field] === '') return [400, error('badRequest', { missing: field })]
        }
        const source = body.source_branch as string
        const clash = [...mergeRequests.values()].find((m) => m.state === 'opened' && m.source_branch === source && m.target_branch === body.target_branch)
        if (clash) return [409, error('alreadyExists', { iid: String(clash.iid) })]
        const created: MergeRequest = {
          iid: nextIid++, title: body.title as string, description: typeof body.description === 'string' ? body.description : '',
          state: 'opened', source_branch: source, target_branch: body.target_branch as string, sha: branches.get(source) ?? '', merge_commit_sha: null,
        }
        mergeRequests.set(created.iid, created)
        return [201, view(created)]
      }
      case 'GET merge_requests/:iid':
        return mr ? [200, view(mr)] : [404, error('mergeRequestNotFound')]
      case 'PUT merge_requests/:iid': {
        if (!mr) return [404, error('mergeRequestNotFound')]
        if (typeof body.title === 'string') mr.title = body.title
        if (typeof body.description === 'string') mr.description = body.description
        if (body.state_event === 'close' && mr.state === 'opened') mr.state = 'closed'
        if (body.state_event === 'reopen' && mr.state === 'closed') mr.state = 'opened'
        return [200, view(mr)]
      }
      case 'PUT merge_requests/:iid/merge': {
        if (!mr) return [404, error('mergeRequestNotFound')]
        if (mr.state !== 'opened') return [405, error('methodNotAllowed')]
        if (typeof body.sha === 'string' && body.sha !== mr.sha) return [409, error('shaMismatch', { head: mr.sha })]
        mr.state = 'merged'
        mr.merge_commit_sha = 'f'.repeat(40)
        branches.set(mr.target_branch, mr.merge_commit_sha)
        return [200, view(mr)]
      }
      default:
        return [404, { error: '404 Not Found' }]
    }
  }

  const contract: GitLabContract = {
    apiUrl: '',
    token,
    projectPath,
    projectId,
    requests,
    branches,
    mergeRequests,
    redirectTo: undefined,
    delayMs: 0,
    oversizeBytes: 0,
    reset() {
      requests.length = 0
      mergeRequests.clear()
      for (const name of branches.keys()) if (name !== 'main') branches.delete(name)
      nextIid = 1
      contract.redirectTo = undefined
      contract.delayMs = 0
      contract.oversizeBytes = 0
    },
    setBranch(name, sha) {
      branches.set(name, sha)
      // GitLab refreshes an open MR's head when its source branch is pushed.
      for (const mr of mergeRequests.values()) if (mr.state === 'opened' && mr.source_branch === name) mr.sha = sha
    },
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://contract')
      const raw = Buffer.concat(chunks).toString('utf8')
      let body: unknown
      try {
        body = raw === '' ? undefined : JSON.parse(raw)
      } catch {
        body = raw
      }
      requests.push({ method: req.method ?? '', path: url.pathname, query: Object.fromEntries(url.searchParams), headers: req.headers, body })
      const reply = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
        const send = () => {
          res.writeHead(status, { ...(payload === undefined ? {} : { 'content-type': 'application/json' }), ...headers })
          res.end(payload === undefined ? undefined : JSON.stringify(payload))
        }
        if (contract.delayMs > 0) setTimeout(send, contract.delayMs)
        else send()
      }
      if (contract.oversizeBytes > 0) return reply(200, { message: 'x'.repeat(contract.oversizeBytes) })
      if (contract.redirectTo) return reply(302, undefined, { location: contract.redirectTo })
      if (req.headers['private-token'] !== token) return reply(401, error('unauthorized'))
      const prefix = '/api/v4/'
      if (!url.pathname.startsWith(prefix)) return reply(404, { error: '404 Not Found' })
      // GitLab decodes each segment, so group%2Fproject is one segment holding "group/project".
      const segments = url.pathname.slice(prefix.length).split('/').map(decodeURIComponent)
      const [status, payload] = answer(req.method ?? '', segments, Object.fromEntries(url.searchParams), (body ?? {}) as Record<string, unknown>)
      reply(status, payload)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  contract.apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v4`
  return contract
}
