import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startHooksServer, type HooksServer } from '../support/hooks-server.js'
import { exportTo, failingSink, hostilePeer, type HostilePeer } from './hostile-peer.js'
import { PERMANENT, meta } from './support.js'

// Issue 24 F4: the SSRF guard checks the remote's host, then git talks to it. A remote that
// answers 307 to a loopback address must not lead git there: redirects are not followed, and the
// sink says so. The server allows private sinks (the test's remote is on 127.0.0.1 too), so the
// guard itself cannot be what stops the redirect.

const LOOPBACK_TEXT = 'loopback-only-answer-7c1e'

describe('F4: a git remote that redirects to loopback', () => {
  let server: HooksServer
  let loopback: HostilePeer
  let remote: HostilePeer
  before(async () => {
    loopback = await hostilePeer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.end(`${LOOPBACK_TEXT}\n`)
    })
    remote = await hostilePeer((req, res) => {
      res.writeHead(307, { location: `${loopback.url}${req.url ?? '/'}` })
      res.end()
    })
    server = await startHooksServer({ KOLLECT_SECRET_TEAM_A__GIT_CREDS__TOKEN: 'redirect-test-token-93f1' })
  })
  after(async () => {
    await server?.close()
    await Promise.all([remote?.close(), loopback?.close()])
  })

  test('no request reaches the redirect target, and the sink says redirects are not followed', async () => {
    const sink = { ...meta('KollectSink', 'team-a', 'redirecting'), spec: { type: 'git', cluster: 'lab', secretRef: { name: 'git-creds' }, git: { url: `${remote.url}/org/repo.git` } } }
    await exportTo(server, 'team-a', 'redirect-inv', sink)
    const { message } = await failingSink(server, 'team-a', 'redirect-inv')
    assert.ok(remote.requests.length > 0, 'git asked the remote')
    assert.deepEqual(loopback.requests, [], 'nothing reached the loopback listener')
    assert.ok(!message?.includes(LOOPBACK_TEXT), message)
    assert.match(message ?? '', /^git sink team-a\/redirecting: git .* failed: .*the remote redirected; redirects are not followed/)
    assert.ok(message?.endsWith(PERMANENT), `a redirect is permanent until the url changes: ${message}`)
  })
})
