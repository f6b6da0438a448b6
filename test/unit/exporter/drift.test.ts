// Drift detection as the exporter schedules it: once the first export since start is confirmed,
// then every interval, always between writes; Repair and Report as the sink's policy says.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { InventoryExportState, ResolvedSink, Snapshot } from '../../../api/types.js'
import { resyncAfterSeconds } from '../../../hooks/inventory.js'
import { SinkError, type DriftMode, type DriftResult, type Sink } from '../../../sinks/sink.js'
import { bumpReplicas } from '../../support/items.js'
import { composition, eventually, expected, FAST_BACKOFF, harness, INV, itemsOf, LIMIT, RecordingSink, report, resolvedSink, settle, T1 } from './harness.js'

/** A RecordingSink that keeps a record: verify() finds `drifted` differences until a repair. */
class RecordSink extends RecordingSink {
  readonly checks: { mode: DriftMode; checksum: string; during: number }[] = []
  drifted = 0
  writing = 0
  /** Checks fail (the record cannot be read) until set back to 0. */
  failChecks = 0

  override async write(snapshot: Snapshot) {
    this.writing++
    try {
      return await super.write(snapshot)
    } finally {
      this.writing--
    }
  }

  async verify(snapshot: Snapshot, mode: DriftMode): Promise<DriftResult> {
    this.checks.push({ mode, checksum: snapshot.checksum, during: this.writing })
    if (this.failChecks > 0) {
      this.failChecks--
      throw new SinkError('connection refused (test)', { retriable: true })
    }
    const differences = this.drifted
    if (mode === 'repair') this.drifted = 0
    return { differences, examples: differences > 0 ? ['team-a/t1/uid-0'] : [], repaired: mode === 'repair' && differences > 0 }
  }
}

function recordHarness(t: Parameters<typeof harness>[0], options: Parameters<typeof harness>[1] = {}) {
  const sinks: RecordSink[] = []
  const h = harness(t, {
    ...options,
    createSink: async (resolved: ResolvedSink | null): Promise<Sink> => {
      const sink = new RecordSink(resolved ? `${resolved.namespace}/${resolved.name}` : 'embedded/default', resolved, h.clock)
      sinks.push(sink)
      return sink
    },
  })
  return { ...h, sinks }
}

function sinkOf(state: InventoryExportState | null) {
  const s = state?.sinks[0]
  assert.ok(s, JSON.stringify(state))
  return s
}

test('drift: the first confirmed export since start is checked at once, then every interval', LIMIT, async (t) => {
  const { clock, exporter, sinks } = recordHarness(t)
  await exporter.applyInventory(composition({ sinks: [resolvedSink('db', { drift: { interval: '5m' } })] }))
  const items = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, items))
  clock.advance(2_000)
  const sink = sinks[0] as RecordSink
  await eventually(() => sink.checks.length === 1, 'the check after the first export')
  assert.deepEqual(sink.checks[0], { mode: 'repair', checksum: expected(items).checksum, during: 0 }, 'Repair is the default policy; the check never overlaps a write')

  clock.advance(5 * 60_000 - 1)
  await settle()
  assert.equal(sink.checks.length, 1, 'not before the interval')
  clock.advance(1)
  await eventually(() => sink.checks.length === 2, 'the check one interval later')
  assert.equal(sink.writes.length, 1, 'a check in step writes nothing')
  assert.equal(sinkOf(exporter.inventoryState(INV)).state, 'Synced')
})

test('drift: policy Report leaves the record, says Drifted with the keys, and asks for no quick resync', LIMIT, async (t) => {
  const { clock, exporter, sinks } = recordHarness(t)
  const comp = composition({ sinks: [resolvedSink('db', { drift: { policy: 'Report' } })] })
  await exporter.applyInventory(comp)
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(2_000)
  const sink = sinks[0] as RecordSink
  await eventually(() => sink.checks.length === 1, 'the first check')
  sink.drifted = 2
  clock.advance(10 * 60_000)
  await eventually(() => sink.checks.length === 2, 'the scheduled check')
  await settle()
  const state = exporter.inventoryState(INV)
  const s = sinkOf(state)
  assert.equal(sink.checks[1]?.mode, 'report')
  assert.equal(s.state, 'Drifted')
  assert.match(s.message, /^2 items differ from the last export \(team-a\/t1\/uid-0, …\), changed outside Kollect; drift policy Report leaves them \(checked every 10m\)/)
  assert.equal(resyncAfterSeconds(comp, state as InventoryExportState), undefined, 'Drifted changes only at the next check: no fast resync loop')
  assert.equal(sink.writes.length, 1, 'Report never writes')

  // A new export clears the drift only after a check of the new export says so.
  sink.drifted = 0
  const [first, ...rest] = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, [bumpReplicas(first!, 9), ...rest]))
  clock.advance(2_000)
  await eventually(() => sink.checks.length === 3, 'a check right after the export that followed drift')
  await settle()
  assert.equal(sinkOf(exporter.inventoryState(INV)).state, 'Synced')
})

test('drift: policy Repair repairs and stays Synced; policy Off never checks', LIMIT, async (t) => {
  const { clock, exporter, sinks } = recordHarness(t)
  await exporter.applyInventory(composition({ sinks: [resolvedSink('fixer'), resolvedSink('off', { drift: { policy: 'Off' } })] }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(2_000)
  const fixer = sinks.find((s) => s.id === 'team-a/fixer') as RecordSink
  const off = sinks.find((s) => s.id === 'team-a/off') as RecordSink
  await eventually(() => fixer.checks.length === 1 && off.writes.length === 1, 'both exports and the first check')
  fixer.drifted = 1
  clock.advance(10 * 60_000)
  await eventually(() => fixer.checks.length === 2, 'the scheduled check')
  await settle()
  assert.equal(fixer.drifted, 0, 'repaired')
  assert.equal(sinkOf(exporter.inventoryState(INV)).state, 'Synced')
  assert.equal(off.checks.length, 0)
})

test('drift: a sink that keeps no record (no verify) is never checked again', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  await exporter.applyInventory(composition())
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(2_000)
  await eventually(() => factory.sink('team-a/primary').writes.length === 1, 'the export')
  assert.equal(clock.pendingTimers(), 0, 'no drift timer is armed for a sink without verify')
})

test('drift: a check that fails is retried with backoff, not a whole interval later, and the sink is Unverified meanwhile', LIMIT, async (t) => {
  const { clock, exporter, sinks } = recordHarness(t)
  const comp = composition({ sinks: [resolvedSink('db')] })
  await exporter.applyInventory(comp)
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(2_000)
  const sink = sinks[0] as RecordSink
  await eventually(() => sink.checks.length === 1, 'the first check')
  sink.failChecks = 2
  clock.advance(10 * 60_000)
  await eventually(() => sink.checks.length === 2, 'the scheduled check, which fails')
  await settle()
  const failing = exporter.inventoryState(INV) as InventoryExportState
  const s = sinkOf(failing)
  assert.equal(s.state, 'Unverified', 'a sink whose record cannot be read is not Synced')
  assert.match(s.message, /^drift check failed, retrying with backoff: connection refused \(test\)$/)
  assert.ok(failing.nextChangeInMs !== undefined && failing.nextChangeInMs <= FAST_BACKOFF.maxMs, `the retry is the next change: ${failing.nextChangeInMs}`)
  assert.ok(resyncAfterSeconds(comp, failing) !== undefined, 'Metacontroller is asked back while the check is retried')

  clock.advance(FAST_BACKOFF.maxMs)
  await eventually(() => sink.checks.length === 3, 'a retry after the backoff, which fails again')
  await settle()
  assert.equal(sinkOf(exporter.inventoryState(INV)).state, 'Unverified')
  clock.advance(FAST_BACKOFF.maxMs)
  await eventually(() => sink.checks.length === 4, 'a retry after the backoff, which succeeds')
  await settle()
  const back = sinkOf(exporter.inventoryState(INV))
  assert.deepEqual([back.state, back.message], ['Synced', ''])
  assert.equal(sink.writes.length, 1, 'a check that fails writes nothing')

  clock.advance(10 * 60_000 - 1)
  await settle()
  assert.equal(sink.checks.length, 4, 'once in step, the next check is a whole interval away')
  clock.advance(1)
  await eventually(() => sink.checks.length === 5, 'the next scheduled check')
})

test('drift: a check that cannot reach the sink (its grant lookup fails) is retried, not dropped until the next write', LIMIT, async (t) => {
  let grantDown = false
  const { clock, exporter, sinks } = recordHarness(t, {
    checkGrant: async () => {
      if (grantDown) throw new SinkError('kube-apiserver unreachable (test)', { retriable: true })
    },
  })
  await exporter.applyInventory(composition({ sinks: [resolvedSink('db')] }))
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(2_000)
  const sink = sinks[0] as RecordSink
  await eventually(() => sink.checks.length === 1, 'the first check')
  grantDown = true
  clock.advance(10 * 60_000)
  await eventually(() => sinkOf(exporter.inventoryState(INV)).state === 'Unverified', 'the check that cannot get the sink')
  assert.match(sinkOf(exporter.inventoryState(INV)).message, /kube-apiserver unreachable \(test\)/)
  grantDown = false
  clock.advance(FAST_BACKOFF.maxMs)
  await eventually(() => sink.checks.length === 2, 'the retry after the backoff')
  await settle()
  assert.equal(sinkOf(exporter.inventoryState(INV)).state, 'Synced')
})
