import assert from 'node:assert/strict'
import { after, before, beforeEach, describe, test } from 'node:test'
import { checkEndpoint } from '../../server/guards/ssrf.js'
import { NO_SECRETS } from '../../sinks/errors.js'
import { createGitLabProvider } from '../../sinks/git/review/gitlab.js'
import { BODY_LIMIT, forgeMessage, kindOf } from '../../sinks/git/review/http.js'
import { ReviewError, type ReviewEndpoint, type ReviewProvider } from '../../sinks/git/review/provider.js'
import { startGitLabContract, type GitLabContract } from '../support/gitlab-contract.js'

// The GitLab review provider over HTTP, tested against the documented API, not a live GitLab: the
// recorded-contract server in test/support/gitlab-contract.ts. The seam is endpointFor(): point it
// at a real GitLab (apiUrl, token, project) to run the provider calls there instead.

const HEAD_1 = '1'.repeat(40)
const HEAD_2 = '2'.repeat(40)
const SOURCE = 'kollect/team-a/prod'
const TEXT = { title: 'kollect: team-a/prod on lab-west', description: '+1 ~0 -0' }

let gitlab: GitLabContract

/** The one place that says which forge the tests talk to, and as whom. */
function endpointFor(overrides: Partial<ReviewEndpoint> = {}): ReviewEndpoint {
  return {
    apiUrl: gitlab.apiUrl,
    project: gitlab.projectPath,
    token: gitlab.token,
    // Loopback is where the contract server lives: allow private endpoints, as an operator would.
    checkEndpoint: async (url) => checkEndpoint(url, true),
    timeoutMs: 5_000,
    ...overrides,
  }
}

async function rejectsWith(promise: Promise<unknown>, kind: ReviewError['kind'], message: RegExp): Promise<ReviewError> {
  let caught: unknown
  await promise.catch((err: unknown) => (caught = err))
  assert.ok(caught instanceof ReviewError, `a ReviewError, got ${String(caught)}`)
  assert.equal(caught.kind, kind, caught.message)
  assert.match(caught.message, message)
  return caught
}

describe('GitLab provider against the recorded contract', () => {
  let provider: ReviewProvider

  before(async () => {
    gitlab = await startGitLabContract()
  })
  after(async () => {
    await gitlab.close()
  })
  beforeEach(() => {
    gitlab.reset()
    gitlab.setBranch(SOURCE, HEAD_1)
    provider = createGitLabProvider(endpointFor())
  })

  test('open → find → update → merge with a stale sha → merge → the documented requests, in order', async () => {
    const opened = await provider.open(SOURCE, 'main', TEXT)
    assert.deepEqual(opened, {
      id: '1', url: 'https://gitlab.example/platform/inventory/-/merge_requests/1', state: 'open', headSha: HEAD_1, source: SOURCE, target: 'main',
    })
    assert.deepEqual(await provider.findOpen(SOURCE, 'main'), opened)
    assert.equal(await provider.findOpen('kollect/other', 'main'), undefined)

    gitlab.setBranch(SOURCE, HEAD_2) // a push of the next snapshot
    const updated = await provider.update('1', { title: TEXT.title, description: '+1 ~1 -0' })
    assert.equal(updated.headSha, HEAD_2)
    assert.equal(gitlab.mergeRequests.get(1)?.description, '+1 ~1 -0')

    assert.equal(await provider.merge('1', HEAD_1), 'stale', 'the head moved: GitLab answers 409 and merges nothing')
    assert.equal((await provider.get('1')).state, 'open')
    assert.equal(await provider.merge('1', HEAD_2), 'merged')
    assert.equal((await provider.get('1')).state, 'merged')
    assert.equal(await provider.merge('1', HEAD_2), 'not-mergeable', 'a merged MR answers 405')

    const project = '/api/v4/projects/platform%2Finventory'
    assert.deepEqual(gitlab.requests.map((r) => [r.method, r.path, r.query, r.body]), [
      ['POST', `${project}/merge_requests`, {}, { source_branch: SOURCE, target_branch: 'main', ...TEXT, remove_source_branch: false }],
      ['GET', `${project}/merge_requests`, { source_branch: SOURCE, target_branch: 'main', state: 'opened' }, undefined],
      ['GET', `${project}/merge_requests`, { source_branch: 'kollect/other', target_branch: 'main', state: 'opened' }, undefined],
      ['PUT', `${project}/merge_requests/1`, {}, { title: TEXT.title, description: '+1 ~1 -0' }],
      ['PUT', `${project}/merge_requests/1/merge`, {}, { sha: HEAD_1 }],
      ['GET', `${project}/merge_requests/1`, {}, undefined],
      ['PUT', `${project}/merge_requests/1/merge`, {}, { sha: HEAD_2 }],
      ['GET', `${project}/merge_requests/1`, {}, undefined],
      ['PUT', `${project}/merge_requests/1/merge`, {}, { sha: HEAD_2 }],
    ])
    for (const r of gitlab.requests) {
      assert.equal(r.headers['private-token'], gitlab.token)
      assert.equal(r.headers.authorization, undefined, 'GitLab auth is PRIVATE-TOKEN only')
      if (r.body !== undefined) assert.match(String(r.headers['content-type']), /^application\/json/)
    }
  })

  test('close, then the closed MR is not found as open; a numeric project id addresses the same project', async () => {
    const opened = await provider.open(SOURCE, 'main', TEXT)
    await provider.close(opened.id)
    assert.equal((await provider.get(opened.id)).state, 'closed')
    assert.equal(await provider.findOpen(SOURCE, 'main'), undefined)
    const byId = createGitLabProvider(endpointFor({ project: gitlab.projectId }))
    assert.equal((await byId.get(opened.id)).state, 'closed')
    assert.deepEqual(gitlab.requests[1]?.body, { state_event: 'close' })
    assert.equal(gitlab.requests.at(-1)?.path, '/api/v4/projects/42/merge_requests/1')
  })

  test('open when another replica already opened one returns that one instead of a second MR', async () => {
    const first = await provider.open(SOURCE, 'main', TEXT)
    assert.deepEqual(await provider.open(SOURCE, 'main', TEXT), first)
    assert.equal(gitlab.mergeRequests.size, 1)
  })

  test('deleteBranch deletes the branch, and an absent branch is not an error', async () => {
    await provider.deleteBranch(SOURCE)
    assert.equal(gitlab.branches.has(SOURCE), false)
    await provider.deleteBranch(SOURCE)
    assert.deepEqual(gitlab.requests.map((r) => [r.method, r.path]), [
      ['DELETE', '/api/v4/projects/platform%2Finventory/repository/branches/kollect%2Fteam-a%2Fprod'],
      ['DELETE', '/api/v4/projects/platform%2Finventory/repository/branches/kollect%2Fteam-a%2Fprod'],
    ])
  })

  test('deleteBranch on an unknown project is not-found, not a branch already gone; the token in a path is redacted', async () => {
    const nope = createGitLabProvider(endpointFor({ project: 'platform/nope' }))
    const err = await rejectsWith(nope.deleteBranch(gitlab.token), 'not-found', /^DELETE \/projects\/platform%2Fnope\/repository\/branches\/\*\*\*: answered 404: 404 Project Not Found$/)
    assert.ok(!err.message.includes(gitlab.token))
  })

  test('a request GitLab refuses as formed is invalid, with its message', async () => {
    await rejectsWith(provider.open(SOURCE, 'main', { title: '', description: '' }), 'invalid', /^POST \/projects\/platform%2Finventory\/merge_requests: answered 400: 400 Bad request - title is missing$/)
  })

  test('a wrong token is auth, and the message names the request but never the token', async () => {
    const wrong = 'glpat-wrong-token-do-not-echo'
    const err = await rejectsWith(createGitLabProvider(endpointFor({ token: wrong })).get('1'), 'auth', /^GET \/projects\/platform%2Finventory\/merge_requests\/1: answered 401: 401 Unauthorized$/)
    assert.equal(err.status, 401)
    assert.equal(err.retriable, false)
    assert.ok(!err.message.includes(wrong) && !err.message.includes(gitlab.token))
    assert.equal(gitlab.requests[0]?.headers['private-token'], wrong, 'the token was sent, only the message omits it')
  })

  test('an unknown project is not-found; an unknown MR too', async () => {
    await rejectsWith(createGitLabProvider(endpointFor({ project: 'platform/nope' })).findOpen(SOURCE, 'main'), 'not-found', /404 Project Not Found/)
    await rejectsWith(provider.get('99'), 'not-found', /merge_requests\/99: answered 404: 404 Not found/)
  })

  test('an id that is not an iid is refused before any request', async () => {
    await rejectsWith(provider.get('1/../../2'), 'invalid', /is not a GitLab iid/)
    assert.equal(gitlab.requests.length, 0)
  })

  test('a 3xx is not followed: invalid, naming the Location host', async () => {
    gitlab.redirectTo = 'https://attacker.example/steal'
    await rejectsWith(provider.get('1'), 'invalid', /answered 302, a redirect to host attacker\.example; redirects are not followed/)
    assert.equal(gitlab.requests.length, 1, 'one request, no follow-up')
  })

  test('the SSRF guard refuses a blocked apiUrl before any request', async () => {
    const guarded = createGitLabProvider(endpointFor({ checkEndpoint: async (url) => checkEndpoint(url, false) }))
    const err = await rejectsWith(guarded.open(SOURCE, 'main', TEXT), 'invalid', /host 127\.0\.0\.1 is a loopback address \(private sinks are disabled\)/)
    assert.equal(err.retriable, false)
    assert.equal(gitlab.requests.length, 0, 'the contract server saw nothing')
  })

  test('a slow forge times out as transient', async () => {
    gitlab.delayMs = 2_000
    const slow = createGitLabProvider(endpointFor({ timeoutMs: 200 }))
    const err = await rejectsWith(slow.get('1'), 'transient', /no answer within 200ms/)
    assert.equal(err.retriable, true)
  })

  test('an answer beyond the size limit is refused, not buffered', async () => {
    gitlab.oversizeBytes = BODY_LIMIT + 1024
    await rejectsWith(provider.get('1'), 'invalid', new RegExp(`answered with more than ${BODY_LIMIT} bytes`))
  })

  test('an unreachable forge is transient', async () => {
    const apiUrl = gitlab.apiUrl
    const closed = await startGitLabContract()
    const deadUrl = closed.apiUrl
    await closed.close()
    assert.notEqual(deadUrl, apiUrl)
    await rejectsWith(createGitLabProvider(endpointFor({ apiUrl: deadUrl })).get('1'), 'transient', /unreachable \(ECONNREFUSED\)/)
  })
})

describe('forge answers, classified', () => {
  test('statuses map to the ReviewError kinds', () => {
    const kinds = [400, 401, 403, 404, 405, 409, 422, 429, 500, 502, 503].map((s) => `${s} ${kindOf(s)}`)
    assert.deepEqual(kinds, [
      '400 invalid', '401 auth', '403 forbidden', '404 not-found', '405 invalid', '409 invalid', '422 invalid', '429 transient', '500 transient', '502 transient', '503 transient',
    ])
  })

  test("the forge's message is echoed on one line and cut to 200 characters", () => {
    assert.equal(forgeMessage({ message: 'x'.repeat(300) }, NO_SECRETS), `: ${'x'.repeat(200)}…`)
    assert.equal(forgeMessage({ message: ['Another open merge request', 'exists'] }, NO_SECRETS), ': ["Another open merge request","exists"]')
    assert.equal(forgeMessage({ error: 'insufficient_scope\n  needs api' }, NO_SECRETS), ': insufficient_scope needs api')
    assert.equal(forgeMessage('<html>', NO_SECRETS), '')
    assert.equal(forgeMessage({}, NO_SECRETS), '')
  })
})
