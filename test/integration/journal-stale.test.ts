// Issue 25, scenario 4, against every store of record: exporter B journals C3 while the store is
// unreachable for it and is killed; A takes over and writes C4; B restarts on its data directory
// with the Lease and must not write C3 over C4. In-process, as in split-brain.test.ts: two
// Exporter instances with their own data directories (journal, clone), one real store. The store
// is "down" for B alone: B's sink gets the live spec and credentials with the endpoint swapped
// for one nothing serves, so A and the readers keep the real server.
import assert from 'node:assert/strict'
import path from 'node:path'
import { after, before, describe, test, type TestContext } from 'node:test'
import type { InventoryComposition, Item, KollectSinkSpec, ObjectRef, ResolvedSink } from '../../api/types.js'
import { Exporter, PendingJournal } from '../../exporter/index.js'
import { createGitSink } from '../../sinks/git/index.js'
import { natsSettings } from '../../sinks/nats/config.js'
import type { SnapshotMarker } from '../../sinks/events.js'
import { subjectFor } from '../../sinks/nats/encode.js'
import { createNatsSink } from '../../sinks/nats/index.js'
import { NatsService } from '../../sinks/nats/service.js'
import type { SinkOptions } from '../../sinks/options.js'
import { createPostgresSink } from '../../sinks/postgres/index.js'
import { parsePointer, pointerKey, snapshotsDir } from '../../sinks/s3/encode.js'
import { createS3Sink } from '../../sinks/s3/index.js'
import type { Sink } from '../../sinks/sink.js'
import { FakeClock } from '../support/clock.js'
import { createBareRemote, gitLog, tempDir } from '../support/git.js'
import { makeItems, snapshotOf } from '../support/items.js'
import { startNats, type NatsServer } from '../support/nats.js'
import { freePort } from '../support/ports.js'
import { startPostgres, type PgServer } from '../support/postgres.js'
import { pollUntil } from '../support/process.js'
import { listKeys, readText, startS3, type S3Server } from '../support/s3.js'

const CLUSTER = 'lab-west'
const TARGET: ObjectRef = { namespace: 'team-a', name: 'deploys' }
const INVENTORY: ObjectRef = { namespace: 'team-a', name: 'shop' }
const DEBOUNCE_MS = 1_000
const OFF: KollectSinkSpec['drift'] = { policy: 'Off' }
const TABLE = 'stale_items'
const STREAM = 'STALE'
const SUBJECT = 'stale'

const items = (n: number): Item[] => makeItems(n).map((item) => ({ ...item, target: TARGET }))

/** What the store itself holds: every snapshot checksum it was given, oldest first, and the current one. */
interface Held { history: string[]; latest: string | undefined }

interface Store {
  spec: KollectSinkSpec
  /** The sink an exporter builds; `down`: the same sink aimed at an endpoint nothing serves. */
  sink(opts: Omit<SinkOptions, 'credentials'>, down: boolean): Sink
  read(): Promise<Held>
}

const ofHistory = (history: (string | null | undefined)[]): Held => {
  const known = history.filter((c): c is string => typeof c === 'string')
  return { history: known, latest: known.at(-1) }
}

describe('a restarted exporter never writes its stale journaled snapshot over the newer one another exporter wrote', () => {
  let pg: PgServer
  let nats: NatsServer
  let s3: S3Server
  let deadPort: number
  /** `url` with its port swapped for one nothing listens on. */
  const dead = (url: string): string => {
    const u = new URL(url)
    u.port = String(deadPort)
    return u.toString()
  }

  before(async () => {
    ;[pg, nats, s3, deadPort] = await Promise.all([startPostgres(), startNats(), startS3(), freePort()])
  })
  after(async () => {
    await Promise.all([pg?.destroy(), nats?.destroy(), s3?.destroy()])
  })

  const s3Store = (layout: 'document' | 'perResource'): Store => {
    const spec = (endpoint: string): KollectSinkSpec => ({
      type: 's3', cluster: CLUSTER, drift: OFF,
      s3: { bucket: s3.bucket, endpoint, pathStyle: true, prefix: `stale-${layout}/{cluster}/{namespace}/{name}`, layout },
    })
    const base = `stale-${layout}/${CLUSTER}/${INVENTORY.namespace}/${INVENTORY.name}`
    return {
      spec: spec(s3.endpoint),
      sink: (o, down) => createS3Sink({ ...o, spec: down ? spec(dead(s3.endpoint)) : o.spec, credentials: s3.credentials }),
      read: async () => {
        const pointer = parsePointer(await readText(s3, pointerKey(base)))
        // Snapshot documents are keyed <time>-<checksum>.json, so the listing is the export order.
        // perResource keeps no documents: its pointer names the last two checksums.
        const history = layout === 'document'
          ? (await listKeys(s3, snapshotsDir(base))).map((key) => /-([0-9a-f]+)\.json$/.exec(key)?.[1])
          : [pointer?.previousChecksum, pointer?.checksum]
        return { history: ofHistory(history).history, latest: pointer?.checksum }
      },
    }
  }

  const stores: Record<string, (t: TestContext, root: string) => Promise<Store>> = {
    git: async (_t, root) => {
      const remote = await createBareRemote(root)
      return {
        spec: { type: 'git', cluster: CLUSTER, git: { url: remote, branch: 'main' }, drift: OFF },
        sink: (o, down) => createGitSink({ ...o, spec: down ? { ...o.spec, git: { url: `${remote}.away`, branch: 'main' } } : o.spec, credentials: {} }),
        read: async () => ofHistory((await gitLog(remote, 'main')).map((c) => c.trailers['Kollect-Checksum']).reverse()),
      }
    },
    postgres: async () => ({
      spec: { type: 'postgres', cluster: CLUSTER, postgres: { table: TABLE }, drift: OFF },
      sink: (o, down) => createPostgresSink({ ...o, credentials: { dsn: down ? dead(pg.dsn) : pg.dsn } }),
      read: async () => ofHistory((await pg.query(
        `SELECT checksum FROM ${TABLE}_snapshots WHERE cluster = $1 AND inventory_namespace = $2 AND inventory_name = $3 ORDER BY id`,
        [CLUSTER, INVENTORY.namespace, INVENTORY.name],
      )).map((r) => r['checksum'] as string)),
    }),
    nats: async (t) => {
      const spec = (url: string): KollectSinkSpec => ({ type: 'nats', cluster: CLUSTER, nats: { url, stream: STREAM, subject: SUBJECT }, drift: OFF })
      const reader = new NatsService(natsSettings({ id: 'test/reader', spec: spec(nats.url), credentials: {}, dataDir: '/nonexistent' }))
      t.after(() => reader.close())
      return {
        spec: spec(nats.url),
        sink: (o, down) => createNatsSink({ ...o, spec: down ? spec(dead(nats.url)) : o.spec, credentials: {} }),
        read: async () => ofHistory((await reader.readPublished(subjectFor(SUBJECT, { cluster: CLUSTER, inventory: INVENTORY }, '*'), 0))
          .filter((m) => m.body.type === 'snapshot').map((m) => (m.body as SnapshotMarker).checksum)),
      }
    },
    's3 (document layout)': async () => s3Store('document'),
    's3 (perResource layout)': async () => s3Store('perResource'),
  }

  async function scenario(t: TestContext, make: (t: TestContext, root: string) => Promise<Store>): Promise<void> {
    const root = await tempDir(t)
    const store = await make(t, root)
    const composition: InventoryComposition = {
      inventory: INVENTORY, generation: 1, targets: [TARGET], debounceMs: DEBOUNCE_MS, maxWaitMs: 10 * DEBOUNCE_MS, suspend: false,
      sinks: [{ namespace: 'team-a', name: 'store', spec: store.spec }],
    }
    const logs: string[] = []
    const start = async (name: string, down = false) => {
      const dataDir = path.join(root, name)
      const clock = new FakeClock()
      const exp = new Exporter({
        cluster: CLUSTER,
        clock,
        backoff: { minMs: 1, maxMs: 5, factor: 2 },
        journal: new PendingJournal(path.join(dataDir, 'pending')),
        log: (_level, msg) => logs.push(`${name}: ${msg}`),
        createSink: async (resolved) => {
          const { spec, namespace, name: sinkName } = resolved as ResolvedSink
          return store.sink({ id: `${namespace}/${sinkName}`, spec, dataDir }, down)
        },
      })
      t.after(() => exp.close())
      const exportItems = async (list: Item[], generation: number) => {
        await exp.applyInventory(composition)
        await exp.reportTarget({ target: TARGET, generation, checksum: '', items: list, failedKeys: [] })
        clock.advance(DEBOUNCE_MS)
      }
      return { exp, exportItems, journal: new PendingJournal(path.join(dataDir, 'pending')) }
    }
    const c3 = snapshotOf(INVENTORY, items(3), CLUSTER)
    const c4 = snapshotOf(INVENTORY, items(4), CLUSTER)

    // B journals C3 while the store is unreachable for it, and is killed.
    const b = await start('b', true)
    await b.exportItems(items(3), 1)
    await pollUntil('B journaled C3', async () => (await b.journal.load()).entries[0]?.snapshot?.checksum === c3.checksum, { timeoutMs: 20_000 })
    await b.exp.close()

    // A takes over and writes C4.
    const a = await start('a')
    await a.exportItems(items(4), 2)
    await pollUntil('A wrote C4', async () => (await store.read().catch(() => undefined))?.latest === c4.checksum, { timeoutMs: 20_000 })
    await a.exp.close()
    const held = await store.read()
    assert.ok(!held.history.includes(c3.checksum), 'B wrote nothing while the store was down for it')

    // B restarts with its journal and is active; its target has not reported yet.
    const b2 = await start('b')
    assert.equal(await b2.exp.restorePending(), 1)
    await b2.exp.idle()
    assert.deepEqual(await store.read(), held, 'nothing is written before the target reports')

    // The target reports C4: nothing to write (the store holds it), and C3 never.
    await b2.exportItems(items(4), 2)
    await pollUntil('B confirmed the fresh export', async () => (await b2.journal.load()).entries[0]?.sinks.length === 0, { timeoutMs: 20_000 })
    const now = await store.read()
    assert.ok(!now.history.includes(c3.checksum), `C3 was never written: ${now.history.join(', ')}`)
    assert.equal(now.latest, c4.checksum, 'the store holds C4')
    assert.deepEqual(now, held, 'nothing new was written')
    assert.equal(b2.exp.inventoryState(INVENTORY)?.sinks[0]?.checksum, c4.checksum)
    assert.ok(logs.includes('b: dropped a pending export from the journal: the targets\' fresh reports supersede it'), logs.join('\n'))
  }

  for (const [name, make] of Object.entries(stores)) test(name, (t) => scenario(t, make))
})
