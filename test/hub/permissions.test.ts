import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { jetstream } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import { createNatsSink } from '../../sinks/nats/index.js'
import { makeItems, snapshotOf } from '../support/items.js'
import { startNats } from '../support/nats.js'

// The nats-server permissions docs/operations.md#hub-mode gives a spoke: it exports under its own
// cluster's subjects and is refused under another's.
const CONF = `authorization {
  users = [
    { user: east, password: east-pass, permissions: {
        publish: { allow: ["kollect.east.>", "$JS.API.>", "$KV.KOLLECT_STATE.>"] }
        subscribe: { allow: ["_INBOX.>"] } } }
  ]
}
`

test('a spoke user bound to its prefix exports its own cluster and cannot publish as another', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-hub-perm-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(path.join(dir, 'nats.conf'), CONF)
  const nats = await startNats({ args: ['-c', path.join(dir, 'nats.conf')] })
  t.after(() => nats.destroy())
  const credentials = { username: 'east', password: 'east-pass' }
  const sink = createNatsSink({ id: 'platform/events', spec: { type: 'nats', cluster: 'east', nats: { url: nats.url } }, credentials, dataDir: dir })
  t.after(() => sink.close())
  const written = await sink.write(snapshotOf({ namespace: 'team-a', name: 'fleet' }, makeItems(3), 'east'))
  assert.deepEqual(written, { added: 3, changed: 0, removed: 0 })

  const nc = await connect({ servers: nats.url, user: 'east', pass: 'east-pass' })
  t.after(() => nc.close())
  const js = jetstream(nc, { timeout: 2_000 })
  await assert.rejects(js.publish('kollect.west.team-a.fleet.added', '{}'), /permissions violation/i)
  // The same user's own prefix is accepted, so the refusal is the permission, not the connection.
  assert.ok((await js.publish('kollect.east.team-a.fleet.added', '{}')).seq > 0)
})
