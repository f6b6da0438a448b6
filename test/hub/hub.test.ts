import assert from 'node:assert/strict'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { jetstream, jetstreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import { compareItems, itemsChecksum } from '../../api/canonical.js'
import type { InventoryComposition, Item, ObjectRef, ResolvedSink } from '../../api/types.js'
import { Exporter } from '../../exporter/index.js'
import { parseHubConfig } from '../../hub/config.js'
import { Hub } from '../../hub/hub.js'
import { createHubMetrics, type HubMetrics } from '../../hub/metrics.js'
import { createNatsSink } from '../../sinks/nats/index.js'
import { createBareRemote, gitLog, showFile, tempDir } from '../support/git.js'
import { bumpReplicas, makeItems, TARGET } from '../support/items.js'
import { startNats, type NatsServer } from '../support/nats.js'
import { pollUntil } from '../support/process.js'
import { startPostgres, type PgServer } from '../support/postgres.js'

// Two spokes (real exporters with a NATS sink, labelled east and west) fan in to one hub with a
// Git and a PostgreSQL sink, through a real nats-server with JetStream.

const STREAM = 'FLEET'
const INV: ObjectRef = { namespace: 'team-a', name: 'fleet' }
const N = 40

interface Spoke {
  exporter: Exporter
  items: Item[]
  generation: number
}

describe('hub mode (real nats-server, git and PostgreSQL)', () => {
  let nats: NatsServer
  let pg: PgServer
  let remote: string
  let root: string
  const cleanups: (() => Promise<void>)[] = []
  const spokes = new Map<string, Spoke>()

  before(async () => {
    ;[nats, pg] = await Promise.all([startNats(), startPostgres()])
    cleanups.push(() => nats.destroy(), () => pg.destroy())
  })
  after(async () => {
    for (const c of cleanups.reverse()) await Promise.race([c().catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))])
  })

  function hubConfigText(): string {
    mkdirSync(path.join(root, 'pg-secret'), { recursive: true })
    writeFileSync(path.join(root, 'pg-secret', 'dsn'), pg.dsn)
    return JSON.stringify({
      nats: { url: nats.url, stream: STREAM },
      clusters: ['east', 'west'],
      dataDir: path.join(root, 'hub-data'),
      sinks: [
        { name: 'fleet-git', spec: { type: 'git', git: { url: remote, branch: 'main' } } },
        { name: 'fleet-db', spec: { type: 'postgres' }, secretDir: path.join(root, 'pg-secret') },
      ],
    })
  }

  async function startHub(): Promise<{ hub: Hub; metrics: HubMetrics }> {
    const metrics = createHubMetrics()
    const hub = new Hub({
      config: parseHubConfig(hubConfigText()), metrics,
      log: (level, msg, fields) => { if (process.env.HUB_DEBUG) console.error(level, msg, fields) },
      backoff: { minMs: 50, maxMs: 500, factor: 2 },
    })
    cleanups.push(() => hub.stop())
    await hub.start()
    return { hub, metrics }
  }

  function startSpoke(cluster: string): Spoke {
    const nats = { namespace: 'platform', name: 'events', spec: { type: 'nats', nats: { url: natsUrl(), stream: STREAM } } } satisfies ResolvedSink
    const exporter = new Exporter({
      cluster,
      createSink: async () => createNatsSink({ id: 'platform/events', spec: nats.spec, credentials: {}, dataDir: path.join(root, cluster) }),
    })
    cleanups.push(() => exporter.close())
    const composition: InventoryComposition = { inventory: INV, generation: 1, targets: [TARGET], sinks: [nats], debounceMs: 10, maxWaitMs: 100, suspend: false }
    void exporter.applyInventory(composition)
    const spoke = { exporter, items: makeItems(N, cluster === 'east' ? 0 : 1000), generation: 0 }
    spokes.set(cluster, spoke)
    return spoke
  }
  const natsUrl = (): string => nats.url

  /** Report the spoke's items and wait until its sink confirmed them. */
  async function report(spoke: Spoke): Promise<void> {
    spoke.generation++
    const items = spoke.items
    await spoke.exporter.reportTarget({ target: TARGET, generation: spoke.generation, checksum: itemsChecksum([...items].sort(compareItems)), items, failedKeys: [] })
    const want = itemsChecksum([...items].sort(compareItems))
    await pollUntil('spoke export', async () => spoke.exporter.inventoryState(INV)?.sinks.every((s) => s.checksum === want) ?? false, { timeoutMs: 20_000 })
  }

  /** The hub has acknowledged everything on the stream. */
  async function hubCaughtUp(): Promise<void> {
    const nc = await connect({ servers: nats.url })
    try {
      const jsm = await jetstreamManager(nc)
      await pollUntil('hub caught up', async () => {
        const info = await jsm.consumers.info(STREAM, 'kollect-hub')
        if (process.env.HUB_DEBUG) console.error(info.num_pending, info.num_ack_pending, info.ack_floor, info.delivered)
        return info.num_pending === 0 && info.num_ack_pending === 0
      }, { timeoutMs: 30_000 })
    } finally {
      await nc.close()
    }
  }

  // The sink's first commit on an empty remote carries no cluster: only exports count.
  const commits = async (): Promise<Awaited<ReturnType<typeof gitLog>>> => (await gitLog(remote, 'main')).filter((c) => c.trailers['Kollect-Cluster'])
  const snapshotRows = (cluster: string): Promise<{ checksum: string; changed: number }[]> =>
    pg.query('SELECT checksum, changed FROM "public"."kollect_items_snapshots" WHERE cluster = $1 ORDER BY id', [cluster])
  const itemRows = async (cluster: string): Promise<number> =>
    Number((await pg.query('SELECT count(*) AS n FROM "public"."kollect_items" WHERE cluster = $1', [cluster]))[0]?.n)
  const document = async (cluster: string): Promise<{ checksum: string; itemCount: number; spoke?: { lastMarkerAt: string } }> =>
    JSON.parse(await showFile(remote, 'main', `inventory/${cluster}/${INV.namespace}/${INV.name}.json`))
  const checksumOf = (cluster: string): string => itemsChecksum([...spokes.get(cluster)!.items].sort(compareItems))

  test('fans in first exports, one change, a restart, a catch-up, and refuses a forged cluster', { timeout: 240_000 }, async (t) => {
    root = await tempDir(t, 'kollect-hub-')
    remote = await createBareRemote(root)
    const east = startSpoke('east')
    const west = startSpoke('west')

    // First exports from both (the spokes' sinks create the stream the hub reads): one commit and one snapshot row each, all items.
    await Promise.all([report(east), report(west)])
    let { hub, metrics } = await startHub()
    await hubCaughtUp()
    assert.deepEqual((await commits()).map((c) => c.trailers['Kollect-Cluster']).sort(), ['east', 'west'])
    for (const cluster of ['east', 'west']) {
      assert.equal((await document(cluster)).checksum, checksumOf(cluster))
      assert.equal(await itemRows(cluster), N)
      assert.deepEqual((await snapshotRows(cluster)).map((r) => r.checksum), [checksumOf(cluster)])
    }
    // Staleness: a metric per cluster and the marker's time in the hub's export.
    const lastMarkerAt = (await document('east')).spoke?.lastMarkerAt
    assert.ok(lastMarkerAt && Date.now() - Date.parse(lastMarkerAt) < 60_000, `lastMarkerAt ${lastMarkerAt}`)
    const staleness = (await metrics.registry.getSingleMetric('kollect_hub_cluster_staleness_seconds')!.get()).values
    assert.deepEqual(staleness.map((v) => v.labels.cluster).sort(), ['east', 'west'])

    // A 1-item change on one spoke: exactly one commit, one snapshot row, that item.
    east.items = east.items.map((item, i) => (i === 7 ? bumpReplicas(item, 42) : item))
    await report(east)
    await hubCaughtUp()
    const afterChange = await commits()
    assert.equal(afterChange.length, 3)
    assert.equal(afterChange[0]!.trailers['Kollect-Cluster'], 'east')
    assert.deepEqual((await snapshotRows('east')).map((r) => r.changed), [0, 1])
    assert.equal((await snapshotRows('west')).length, 1)
    const changed = (await document('east') as unknown as { items: Item[] }).items.filter((i) => i.attributes.replicas === 42)
    assert.equal(changed.length, 1)

    // A hub restart resumes from its consumer position: nothing is written again.
    await hub.stop()
    ;({ hub, metrics } = await startHub())
    await hubCaughtUp()
    await new Promise((r) => setTimeout(r, 500))
    assert.equal((await commits()).length, 3)
    assert.equal((await snapshotRows('east')).length, 2)

    // The hub stopped while both spokes change, then started: it catches up, one commit each.
    await hub.stop()
    east.items = east.items.map((item, i) => (i === 3 ? bumpReplicas(item, 43) : item))
    west.items = west.items.slice(1)
    await Promise.all([report(east), report(west)])
    ;({ hub, metrics } = await startHub())
    await hubCaughtUp()
    const caughtUp = await commits()
    assert.equal(caughtUp.length, 5)
    for (const cluster of ['east', 'west']) assert.equal((await document(cluster)).checksum, checksumOf(cluster))
    assert.equal(await itemRows('west'), N - 1)
    assert.deepEqual((await snapshotRows('west')).map((r) => r.checksum), [itemsChecksum([...makeItems(N, 1000)].sort(compareItems)), checksumOf('west')])

    // A hub that lost what it held replays the whole stream: only the newest markers are exported, so nothing is written again.
    await hub.stop()
    rmSync(path.join(root, 'hub-data', 'hub', 'consumer'))
    ;({ hub, metrics } = await startHub())
    await hubCaughtUp()
    assert.equal((await commits()).length, 5)
    assert.equal((await snapshotRows('east')).length, 3)
    assert.equal((await snapshotRows('west')).length, 2)

    // A spoke publishing as the other cluster is refused: nothing reaches the sinks.
    const nc = await connect({ servers: nats.url })
    try {
      const js = jetstream(nc)
      const forged = bumpReplicas(east.items[0]!, 99)
      const body = { type: 'added', cluster: 'west', inventory: INV, key: 'k', checksum: 'x', previousChecksum: null, after: forged }
      await js.publish(`kollect.east.team-a.fleet.added`, JSON.stringify(body))
      await js.publish(`kollect.north.team-a.fleet.added`, JSON.stringify({ ...body, cluster: 'north' }))
    } finally {
      await nc.close()
    }
    await hubCaughtUp()
    assert.equal((await metrics.registry.getSingleMetric('kollect_hub_messages_refused_total')!.get()).values[0]?.value, 2)
    assert.equal((await commits()).length, 5)
  })
})
