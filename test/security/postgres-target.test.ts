import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { KubeObject } from '../../api/types.js'
import { startHooksServer, type HooksServer } from '../support/hooks-server.js'
import { controllerFor, deployment, syncRequest, targetSyncRequest } from '../support/metacontroller.js'
import { secretEnvName } from '../../server/cluster/credentials.js'
import { PERMANENT, ROUTES, conditionOf, inventorySync, meta, send, sleep } from './support.js'

// The PostgreSQL sink's SSRF guard must judge where node-postgres will actually connect, which
// its own connection-string parser decides: a `host` query parameter wins over the URL's host,
// a host starting with "/" (also percent-encoded, or from `socket:` and bare-path DSNs) is a
// unix socket directory, and no host at all means PGHOST or localhost. Real listeners on
// loopback TCP and on a unix socket prove that a refused DSN is never connected to.

const NO_PRIVATE = '(private sinks are disabled)'

class Listener {
  connections = 0
  readonly server: net.Server
  constructor() {
    // Accept and hang up at once: the driver fails fast instead of waiting for a handshake.
    this.server = net.createServer((socket) => {
      this.connections++
      socket.destroy()
    })
  }
  listen(where: number | string): Promise<void> {
    return new Promise((resolve) => this.server.listen(typeof where === 'number' ? { port: where, host: '127.0.0.1' } : { path: where }, resolve))
  }
  get port(): number {
    return (this.server.address() as net.AddressInfo).port
  }
  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()))
  }
}

let dir: string
const tcp = new Listener()
const unix = new Listener()
let strict: HooksServer
let open: HooksServer

// One Secret per DSN in team-a, read from its local-mode variable (secretEnvName).
let DSNS: [name: string, dsn: string, refusal: string][]

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-pgsock-'))
  await tcp.listen(0)
  // node-postgres connects to <host>/.s.PGSQL.<port> for a socket directory.
  await unix.listen(path.join(dir, '.s.PGSQL.5432'))
  const p = tcp.port
  DSNS = [
    ['host-param', `postgres://kollect:pw@public.example/inventory?host=127.0.0.1&port=${p}`, `host 127.0.0.1 is a loopback address ${NO_PRIVATE}`],
    ['host-param-name', `postgres://kollect:pw@public.example/inventory?host=localhost&port=${p}`, `host localhost is not allowed ${NO_PRIVATE}`],
    ['host-param-mapped', `postgres://kollect:pw@public.example/inventory?host=::ffff:127.0.0.1&port=${p}`, `host ::ffff:7f00:1 is a loopback address ${NO_PRIVATE}`],
    ['host-param-socket', `postgres://kollect:pw@x/inventory?host=${dir}`, `unix socket ${dir}: local paths are not allowed as sink endpoints`],
    ['no-url-host', `postgresql:///inventory?host=127.0.0.1&port=${p}`, `host 127.0.0.1 is a loopback address ${NO_PRIVATE}`],
    ['no-host-at-all', `postgresql:///inventory?port=${p}`, `host localhost is not allowed ${NO_PRIVATE}`],
    ['encoded-socket', `postgres://kollect:pw@${encodeURIComponent(dir)}/inventory`, `unix socket ${dir}: local paths are not allowed as sink endpoints`],
    ['socket-scheme', `socket:${dir}?db=inventory`, `unix socket ${dir}: local paths are not allowed as sink endpoints`],
    ['bare-path', `${dir} inventory`, `unix socket ${dir}: local paths are not allowed as sink endpoints`],
    ['ssl-file', 'postgres://kollect:pw@db.example.com/inventory?sslrootcert=/etc/hostname', `DSN parameter sslrootcert: local paths are not allowed as sink endpoints`],
    // A blank "dsn" key: the sink uses the next key, "url", and so must the guard.
    ['blank-key', '  ', `host 127.0.0.1 is a loopback address ${NO_PRIVATE}`],
  ]
  const env = Object.fromEntries(DSNS.map(([name, dsn]) => [secretEnvName('team-a', name, 'dsn'), dsn]))
  env[secretEnvName('team-a', 'blank-key', 'url')] = `postgres://kollect:pw@public.example/inventory?host=127.0.0.1&port=${p}`
  env[secretEnvName('team-a', 'open', 'dsn')] = `postgres://kollect:pw@public.example/inventory?host=127.0.0.1&port=${p}`
  strict = await startHooksServer({ KOLLECT_ALLOW_PRIVATE_SINKS: 'false', ...env })
  open = await startHooksServer({ KOLLECT_ALLOW_PRIVATE_SINKS: 'true', ...env })
})
after(async () => {
  await Promise.all([strict?.close(), open?.close()])
  await Promise.all([tcp.close(), unix.close()])
  rmSync(dir, { recursive: true, force: true })
})

const pgSink = (name: string): KubeObject => ({ ...meta('KollectSink', 'team-a', name), spec: { type: 'postgres', cluster: 'lab', secretRef: { name } } })
const sinkSync = (name: string) => JSON.stringify(syncRequest(controllerFor('kollect-sinks'), pgSink(name), {}))

describe('the PostgreSQL target is judged after the driver parses the DSN', () => {
  test('every DSN that leads to loopback, localhost or a unix socket is refused by the sink check, and nothing connects', async () => {
    const got: string[] = []
    for (const [name] of DSNS) {
      const res = await send(strict.url, ROUTES.sinkSync, { body: sinkSync(name) })
      assert.equal(res.status, 200, res.text)
      const reachable = conditionOf(res, 'Reachable')
      got.push(`${reachable?.status} ${reachable?.reason} ${reachable?.message}`)
    }
    assert.deepEqual(got, DSNS.map(([name, , refusal]) => `False Unreachable sink team-a/${name}: ${refusal}`))
    assert.ok(!got.some((m) => m.includes(':pw')), 'no credential in a message')
    await sleep(100)
    assert.deepEqual([tcp.connections, unix.connections], [0, 0], 'a refused DSN was connected to')
  })

  test('an inventory exporting to such a sink is Failing with the refusal, and nothing connects', async () => {
    assert.equal((await send(strict.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([deployment(1)])) })).status, 200)
    for (const name of ['host-param', 'host-param-socket']) {
      const body = inventorySync({ name: `inv-${name}`, spec: { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name }], debounce: '1ms', maxWait: '1ms' }, sinks: [pgSink(name)] })
      assert.equal((await send(strict.url, ROUTES.inventorySync, { body: JSON.stringify(body) })).status, 200)
      let sink
      for (let i = 0; i < 300 && sink?.state !== 'Failing'; i++) {
        strict.exporter.flush()
        await sleep(10)
        sink = strict.exporter.inventoryState({ namespace: 'team-a', name: `inv-${name}` })?.sinks.find((s) => s.name === name)
      }
      assert.equal(sink?.state, 'Failing')
      assert.equal(sink?.message, `sink team-a/${name}: ${DSNS.find(([n]) => n === name)?.[2]}${PERMANENT}`)
    }
    assert.deepEqual([tcp.connections, unix.connections], [0, 0])
  })

  test('with KOLLECT_ALLOW_PRIVATE_SINKS=true a DSN naming a certificate file is still refused: private addresses are not local files', async () => {
    const res = await send(open.url, ROUTES.sinkSync, { body: sinkSync('ssl-file') })
    assert.equal(res.status, 200, res.text)
    const reachable = conditionOf(res, 'Reachable')
    assert.equal(reachable?.status, 'False')
    assert.match(reachable?.message ?? '', /DSN parameter sslrootcert names a local file/)
  })

  test('with KOLLECT_ALLOW_PRIVATE_SINKS=true the same host parameter is allowed, and the listener sees the driver connect', async () => {
    const res = await send(open.url, ROUTES.sinkSync, { body: sinkSync('open') })
    assert.equal(conditionOf(res, 'Reachable')?.status, 'False', 'the listener is no PostgreSQL server')
    assert.doesNotMatch(conditionOf(res, 'Reachable')?.message ?? '', /private sinks are disabled/)
    assert.ok(tcp.connections >= 1, 'the driver connected to ?host=127.0.0.1, as the guard assumed it would')
  })
})
