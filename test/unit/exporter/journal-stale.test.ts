// A journal entry is resumed only through the completeness gate, and only when the targets'
// fresh reports build the same snapshot: a stale entry never overwrites what another exporter
// wrote meanwhile (issue 25, scenario 4).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { ResolvedSink, Snapshot } from '../../../api/types.js'
import { PendingJournal } from '../../../exporter/pending-journal.js'
import { createMetrics } from '../../../server/process/metrics.js'
import { SinkError, type Sink, type WriteResult } from '../../../sinks/sink.js'
import { composition, eventually, expected, harness, INV, journalDir, itemsOf, LIMIT, report, resolvedSink, settle, T1 } from './harness.js'

/** One store of record that several exporters write to, as git, PostgreSQL or NATS is. */
class SharedStore {
  down = false
  /** Checksums written, in order; the last is what the store holds. */
  readonly written: string[] = []
  get holds(): string | undefined {
    return this.written[this.written.length - 1]
  }

  readonly createSink = async (_resolved: ResolvedSink | null): Promise<Sink> => ({
    id: 'shared',
    write: async (snapshot: Snapshot): Promise<WriteResult> => {
      if (this.down) throw new SinkError('connection refused (test)', { retriable: true })
      this.written.push(snapshot.checksum)
      return { added: snapshot.itemCount, changed: 0, removed: 0 }
    },
    remove: async () => {},
    healthcheck: async () => {},
    close: async () => {},
  })
}

test('journal: a restarted exporter never writes its stale journaled snapshot over a newer one another exporter wrote', LIMIT, async (t) => {
  const store = new SharedStore()
  const dirB = await journalDir(t)
  const c3 = itemsOf(T1, 3)
  const c4 = itemsOf(T1, 4)
  const dropped: string[] = []

  // B journals C3 while the store is down, and is killed.
  const b = harness(t, { createSink: store.createSink, journal: new PendingJournal(dirB) })
  store.down = true
  await b.exporter.applyInventory(composition())
  await b.exporter.reportTarget(report(T1, c3))
  b.clock.advance(2_000)
  const deadline = Date.now() + 2_000
  while ((await new PendingJournal(dirB).load()).entries.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
  assert.equal((await new PendingJournal(dirB).load()).entries[0]?.snapshot?.checksum, expected(c3).checksum, 'B journaled C3')
  await b.exporter.close()

  // A takes over and exports C4.
  store.down = false
  const a = harness(t, { createSink: store.createSink })
  await a.exporter.applyInventory(composition())
  await a.exporter.reportTarget(report(T1, c4))
  a.clock.advance(2_000)
  await eventually(() => store.holds === expected(c4).checksum, 'A exported C4')
  await a.exporter.close()
  const before = store.written.length

  // B restarts on its data directory and is active before any target reported to it.
  const b2 = harness(t, { createSink: store.createSink, journal: new PendingJournal(dirB), observer: { onJournalDropped: (r) => dropped.push(r) } })
  assert.equal(await b2.exporter.restorePending(), 1, 'one sink owes the journaled export')
  await settle()
  b2.clock.advance(60_000)
  await settle()
  assert.equal(store.written.length, before, 'nothing is written before the targets report')
  assert.equal(store.holds, expected(c4).checksum)
  assert.match(b2.exporter.inventoryState(INV)?.sinks[0]?.message ?? '', /waits for the targets to report/)

  // The targets report (C4): that is written, and C3 never.
  await b2.exporter.applyInventory(composition())
  await b2.exporter.reportTarget(report(T1, c4))
  b2.clock.advance(2_000)
  await eventually(() => b2.exporter.pendingCount() === 0 && store.written.length > before, 'the fresh export')
  assert.deepEqual(store.written.slice(before), [expected(c4).checksum], 'only the fresh snapshot is written')
  assert.deepEqual(dropped, ['superseded'])
  assert.ok(b2.logs.some((l) => l.msg.startsWith('dropped a pending export from the journal') && l.fields?.['journaled'] === expected(c3).checksum), 'the drop is logged')
  const until = Date.now() + 2_000
  let entries = (await new PendingJournal(dirB).load()).entries
  while (entries[0]?.sinks.length !== 0 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 5))
    entries = (await new PendingJournal(dirB).load()).entries
  }
  assert.deepEqual(entries.map((e) => [e.sinks, e.snapshot?.checksum, e.confirmed?.['team-a/primary']?.checksum]), [[[], undefined, expected(c4).checksum]],
    'the entry owes nothing once the fresh export is confirmed')
})

test('journal: a dropped entry is counted by reason in the exporter metrics', async () => {
  const metrics = createMetrics('exporter')
  metrics.exporterObserver.onJournalDropped?.('superseded')
  assert.match(await metrics.registry.metrics(), /^kollect_journal_entries_dropped_total\{reason="superseded"\} 1$/m)
})

test('journal: after a restart, status shows the last export each sink confirmed until its targets report again', LIMIT, async (t) => {
  const dir = await journalDir(t)
  const items = itemsOf(T1, 3)
  const sinks = [resolvedSink('primary'), resolvedSink('second')]
  const first = harness(t, { journal: new PendingJournal(dir) })
  await first.exporter.applyInventory(composition({ sinks }))
  await first.exporter.reportTarget(report(T1, items))
  first.clock.advance(2_000)
  await eventually(() => first.exporter.pendingCount() === 0 && first.factory.created.every((s) => s.writes.length === 1), 'the export confirmed')
  const before = first.exporter.inventoryState(INV)
  await first.exporter.close()

  const second = harness(t, { journal: new PendingJournal(dir) })
  assert.equal(await second.exporter.restorePending(), 0, 'no sink owes anything')
  assert.equal(second.exporter.inventoryState(INV), null, 'a journal entry alone brings no inventory back: it may have been deleted meanwhile')
  const restored = await second.exporter.applyInventory(composition({ sinks }))
  assert.equal(restored.checksum, expected(items).checksum)
  assert.equal(restored.itemCount, 3)
  assert.equal(restored.lastExportTime, before?.lastExportTime)
  assert.deepEqual(restored.sinks.map((s) => [s.name, s.state, s.checksum, s.itemCount, s.lastExportTime, s.message]), before?.sinks.map((s) => [
    s.name, 'Pending', s.checksum, s.itemCount, s.lastExportTime, 'confirmed before the exporter restarted or took over; written again once every target has reported',
  ]))
  assert.deepEqual(second.exporter.inventoryState(INV), restored, 'status is deterministic')

  // The restored confirmation spares no write: another exporter may have written since.
  await second.exporter.reportTarget(report(T1, items))
  second.clock.advance(2_000)
  await eventually(() => second.exporter.pendingCount() === 0 && second.factory.created.length === 2 && second.factory.created.every((s) => s.writes.length === 1), 'every sink written again')
  assert.deepEqual(second.exporter.inventoryState(INV)?.sinks.map((s) => [s.state, s.message]), [['Synced', ''], ['Synced', '']])
})

test('journal: a standby that takes over shows the last export its journal recorded, for an inventory it already knew', LIMIT, async (t) => {
  const dir = await journalDir(t)
  const items = itemsOf(T1, 2)
  const first = harness(t, { journal: new PendingJournal(dir) })
  await first.exporter.applyInventory(composition())
  await first.exporter.reportTarget(report(T1, items))
  first.clock.advance(2_000)
  await eventually(() => first.factory.sink('team-a/primary').writes.length === 1 && first.exporter.pendingCount() === 0, 'the export confirmed')
  await first.exporter.close()

  const standby = harness(t, { journal: new PendingJournal(dir), standby: true })
  await standby.exporter.applyInventory(composition())
  assert.equal(standby.exporter.inventoryState(INV)?.checksum, '', 'a standby reads no journal')
  standby.exporter.setActive(true)
  await standby.exporter.restorePending()
  const state = standby.exporter.inventoryState(INV)
  assert.deepEqual([state?.checksum, state?.itemCount, state?.sinks[0]?.state, state?.sinks[0]?.checksum], [expected(items).checksum, 2, 'Pending', expected(items).checksum])
  assert.equal(standby.factory.created.flatMap((s) => s.attempts).length, 0, 'nothing written before the target reports')
})
