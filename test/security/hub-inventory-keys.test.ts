import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { jetstreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import type { Item, ObjectRef } from '../../api/types.js'
import type { HubConfig } from '../../hub/config.js'
import { Hub } from '../../hub/hub.js'
import { createHubMetrics } from '../../hub/metrics.js'
import { createNatsSink } from '../../sinks/nats/index.js'
import { createBareRemote, gitLog } from '../support/git.js'
import { makeItems, snapshotOf } from '../support/items.js'
import { startNats } from '../support/nats.js'
import { pollUntil } from '../support/process.js'
import { cleanups, type Later } from '../support/cleanups.js'

// Issue 24, F13: the hub keyed each spoke inventory as `<cluster>/<namespace>/<name>`, and took
// cluster labels and names with "/" in them. A spoke `prod`, which NATS permissions let publish
// under `kollect.prod.>` only, published inventory `eu/team/fleet`: its key was that of cluster
// `prod/eu`'s inventory `team/fleet`, and the hub exported the spoke's items as `prod/eu`'s. Real
// nats-server, the spokes' real NATS sinks and the hub's own consumer and Git sink.

/** One export of a spoke, through its own NATS sink labelled `cluster`. */
async function spokeExports(t: Later, url: string, dir: string, cluster: string, inventory: ObjectRef, snapshots: Item[][]): Promise<void> {
  const sink = createNatsSink({ id: `${cluster}/events`, spec: { type: 'nats', cluster, nats: { url } }, credentials: {}, dataDir: mkdtempSync(path.join(dir, 'spoke-')) })
  t.after(() => sink.close())
  for (const items of snapshots) await sink.write(snapshotOf(inventory, items, cluster))
}

test('a spoke cannot write another cluster\'s inventory through a namespace with "/" in it', { timeout: 120_000 }, async (test) => {
  const t = cleanups(test)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-hub-keys-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const nats = await startNats()
  t.after(() => nats.destroy())
  const remote = await createBareRemote(dir)

  const legit = makeItems(3)
  const injected = makeItems(2, 500)
  const own = makeItems(4, 900)
  // prod/eu exports team/fleet. prod exports its own team-x/fleet, and "eu/team"/fleet: first
  // prod/eu's items (so the hub's held copy matches), then its own in their place.
  await spokeExports(t, nats.url, dir, 'prod/eu', { namespace: 'team', name: 'fleet' }, [legit])
  await spokeExports(t, nats.url, dir, 'prod', { namespace: 'team-x', name: 'fleet' }, [own])
  await spokeExports(t, nats.url, dir, 'prod', { namespace: 'eu/team', name: 'fleet' }, [legit, injected])

  // The hub as such a config once set it up: the config check now refuses "prod/eu" (the hub
  // config unit tests), so the consumption path is shown to hold on its own.
  const config: HubConfig = {
    nats: { url: nats.url, stream: 'KOLLECT', subject: 'kollect', durable: 'kollect-hub', ackWaitSeconds: 600 },
    clusters: ['prod', 'prod/eu'],
    dataDir: path.join(dir, 'hub-data'),
    sinks: [{ name: 'fleet-git', spec: { type: 'git', git: { url: remote, branch: 'main' } } }],
  }
  const metrics = createHubMetrics()
  const hub = new Hub({ config, metrics, log: () => undefined, backoff: { minMs: 50, maxMs: 500, factor: 2 } })
  t.after(() => hub.stop())
  await hub.start()

  const nc = await connect({ servers: nats.url })
  t.after(() => nc.close())
  const jsm = await jetstreamManager(nc)
  const last = (await jsm.streams.info('KOLLECT')).state.last_seq
  await pollUntil('the hub acknowledged the stream', async () => {
    const info = await jsm.consumers.info('KOLLECT', 'kollect-hub')
    return info.num_pending === 0 && info.num_ack_pending === 0 && info.ack_floor.stream_seq === last
  }, { timeoutMs: 60_000 })

  const exported = (await gitLog(remote, 'main')).filter((c) => c.trailers['Kollect-Cluster']).map((c) => [c.trailers['Kollect-Cluster'], c.trailers['Kollect-Checksum']])
  const checksum = (items: Item[], cluster: string, inventory: ObjectRef) => snapshotOf(inventory, items, cluster).checksum
  assert.ok(!exported.some(([, sum]) => sum === checksum(injected, 'prod/eu', { namespace: 'team', name: 'fleet' })), `prod's items exported as prod/eu's: ${JSON.stringify(exported)}`)
  assert.deepEqual(exported, [['prod', checksum(own, 'prod', { namespace: 'team-x', name: 'fleet' })]], 'only prod\'s own, well-named inventory reaches the hub\'s sink')
  const refused = (await metrics.registry.getSingleMetric('kollect_hub_messages_refused_total')!.get()).values[0]?.value ?? 0
  // prod/eu: 3 added and a marker; prod's eu/team: 3 added and a marker, then 3 removed, 2 added and a marker.
  assert.equal(refused, 4 + 4 + 6, 'every message naming "prod/eu" or "eu/team" is refused')
})
