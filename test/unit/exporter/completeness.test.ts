import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { ResolvedSink, Snapshot } from '../../../api/types.js'
import { Exporter } from '../../../exporter/index.js'
import { createFileSink } from '../../../sinks/file/index.js'
import type { Sink } from '../../../sinks/sink.js'
import { FakeClock } from '../../support/clock.js'
import { bumpReplicas } from '../../support/items.js'
import { CLUSTER, composition, expected, FAST_BACKOFF, harness, INV, itemsOf, keysOf, LIMIT, report, T1, T2 } from './harness.js'

test('completeness gate: one of two targets reported → no write even after maxWait; the second report → both', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const comp = composition({ targets: [T1, T2], debounceMs: 2_000, maxWaitMs: 10_000 })
  const first = await exporter.applyInventory(comp)
  assert.equal(first.complete, false)
  assert.deepEqual(first.missingTargets, [T1, T2])

  const items1 = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, items1))
  for (let k = 0; k < 10; k++) {
    clock.advance(5_000)
    await exporter.reportTarget(report(T1, items1)) // keep T1 busy past maxWait
  }
  clock.advance(60_000)
  await exporter.idle()
  const sink = factory.sink('team-a/primary')
  assert.equal(sink.attempts.length, 0, 'an incomplete inventory is never exported')

  const waiting = exporter.inventoryState(INV)
  assert.ok(waiting)
  assert.equal(waiting.complete, false)
  assert.deepEqual(waiting.missingTargets, [T2], 'missingTargets names exactly the target that has not reported')
  assert.equal(waiting.itemCount, 0)
  assert.equal(waiting.checksum, '')
  assert.equal(waiting.sinks[0]?.state, 'Pending')
  assert.equal(waiting.sinks[0]?.message, 'waiting for targets to report')

  const items2 = itemsOf(T2, 2, 100)
  await exporter.reportTarget(report(T2, items2))
  clock.advance(1_999)
  await exporter.idle()
  assert.equal(sink.attempts.length, 0, 'the report of the last target is debounced like any other')
  clock.advance(1)
  await exporter.idle()

  assert.equal(sink.writes.length, 1)
  const written = sink.writes[0]!.snapshot
  assert.deepEqual(written, expected([...items1, ...items2]))
  assert.deepEqual(keysOf(written.items), keysOf([...items1, ...items2]), 'both targets\' items are in the write')

  const done = exporter.inventoryState(INV)
  assert.equal(done?.complete, true)
  assert.deepEqual(done?.missingTargets, [])
  assert.equal(done?.itemCount, 5)
  assert.equal(done?.sinks[0]?.state, 'Synced')
})

// ---- end to end with the real file sink ----

interface FileSinkSpy {
  createSink: (resolved: ResolvedSink | null) => Promise<Sink>
  writes: Snapshot[]
}

function fileSinks(dataDir: string): FileSinkSpy {
  const writes: Snapshot[] = []
  return {
    writes,
    createSink: async (resolved) => {
      assert.ok(resolved, 'the test inventory names its sink')
      const sink = createFileSink({ id: `${resolved.namespace}/${resolved.name}`, spec: resolved.spec, credentials: {}, dataDir })
      return {
        id: sink.id,
        write: (snapshot) => {
          writes.push(snapshot)
          return sink.write(snapshot)
        },
        remove: (inventory, cluster) => sink.remove(inventory, cluster),
        healthcheck: () => sink.healthcheck(),
        close: () => sink.close(),
      }
    },
  }
}

function documentItems(text: string): unknown[] {
  const doc = JSON.parse(text) as { items: unknown[]; checksum: string }
  return doc.items
}

test('restart: a new exporter on the same data dir deletes nothing until every target has reported again', LIMIT, async (t) => {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'kollect-exporter-'))
  t.after(() => rm(dataDir, { recursive: true, force: true }))
  const fileSink: ResolvedSink = { namespace: 'team-a', name: 'files', spec: { type: 'file', deletionPolicy: 'Retain' } }
  const comp = composition({ targets: [T1, T2], sinks: [fileSink], debounceMs: 1_000, maxWaitMs: 5_000 })
  const document = path.join(dataDir, CLUSTER, INV.namespace, `${INV.name}.json`)

  // Exporter A: 2 + 1 items.
  const a1 = itemsOf(T1, 2)
  const a2 = itemsOf(T2, 1, 100)
  const spyA = fileSinks(dataDir)
  const clockA = new FakeClock()
  const exporterA = new Exporter({ cluster: CLUSTER, createSink: spyA.createSink, clock: clockA, backoff: FAST_BACKOFF })
  t.after(() => exporterA.close())
  await exporterA.applyInventory(comp)
  await exporterA.reportTarget(report(T1, a1))
  await exporterA.reportTarget(report(T2, a2))
  clockA.advance(1_000)
  await exporterA.idle()
  assert.equal(spyA.writes.length, 1)
  const textA = await readFile(document, 'utf8')
  const snapshotA = expected([...a1, ...a2])
  assert.deepEqual(JSON.parse(textA), JSON.parse(JSON.stringify(snapshotA)), 'A wrote its 3 items')
  assert.equal(exporterA.inventoryState(INV)?.sinks[0]?.state, 'Synced')
  await exporterA.close()
  const mtimeA = (await stat(document)).mtimeMs

  // Exporter B, fresh memory, same data dir: only target 1 reports (with one item changed).
  const b1 = [bumpReplicas(a1[0]!, 9), a1[1]!]
  const b2 = [...itemsOf(T2, 1, 100), ...itemsOf(T2, 1, 101)]
  const spyB = fileSinks(dataDir)
  const clockB = new FakeClock()
  const exporterB = new Exporter({ cluster: CLUSTER, createSink: spyB.createSink, clock: clockB, backoff: FAST_BACKOFF })
  t.after(() => exporterB.close())
  const applied = await exporterB.applyInventory(comp)
  assert.equal(applied.complete, false)
  await exporterB.reportTarget(report(T1, b1))
  clockB.advance(60_000)
  await exporterB.idle()
  assert.equal(spyB.writes.length, 0, 'B writes nothing while target 2 has not reported')
  assert.equal(await readFile(document, 'utf8'), textA, 'the file still holds A\'s document: nothing deleted')
  assert.equal((await stat(document)).mtimeMs, mtimeA)
  assert.equal(documentItems(textA).length, 3)
  const stateB = exporterB.inventoryState(INV)
  assert.equal(stateB?.complete, false)
  assert.deepEqual(stateB?.missingTargets, [T2])

  await exporterB.reportTarget(report(T2, b2))
  clockB.advance(1_000)
  await exporterB.idle()
  assert.equal(spyB.writes.length, 1)
  const full = expected([...b1, ...b2])
  const textB = await readFile(document, 'utf8')
  assert.deepEqual(JSON.parse(textB), JSON.parse(JSON.stringify(full)), 'the file now equals the full set of both targets')
  assert.equal(documentItems(textB).length, 4)
  assert.equal(exporterB.inventoryState(INV)?.sinks[0]?.checksum, full.checksum)
  await exporterB.close()
})
