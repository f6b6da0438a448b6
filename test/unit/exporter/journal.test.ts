// The pending-export journal: what a sink still owes survives a shutdown or a crash, and a new
// exporter resumes it before any target re-reports (issue 16, finding 5).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { PendingJournal } from '../../../exporter/pending-journal.js'
import { composition, eventually, expected, harness, INV, journalDir, itemsOf, LIMIT, report, resolvedSink, settle, T1 } from './harness.js'

/** The journal's own files; writeFileAtomic's temporaries start with a dot. */
const isJournal = (name: string): boolean => name.endsWith('.json') && !name.startsWith('.')

/** What `read` gives once `done` holds of it, or after 2 s, for the assertion to judge. */
async function readOnce<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 2_000
  let value = await read()
  while (!done(value) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 5))
    value = await read()
  }
  return value
}

const SINKS = [resolvedSink('healthy'), resolvedSink('down')]

test('journal: a sink that starts failing is journaled at once; a new exporter resumes it once its targets report the same items', LIMIT, async (t) => {
  const dir = await journalDir(t)
  const first = harness(t, { journal: new PendingJournal(dir) })
  await first.exporter.applyInventory(composition({ sinks: SINKS }))
  first.factory.sink('team-a/down').failNextWrites(Infinity)
  const items = itemsOf(T1, 4)
  await first.exporter.reportTarget(report(T1, items))
  first.clock.advance(2_000)
  await eventually(() => first.factory.sink('team-a/healthy').writes.length === 1, 'the healthy export')
  await eventually(() => first.factory.sink('team-a/down').attempts.length >= 2, 'the failing sink retrying')
  // Not closed: as after kill -9, only what the journal holds is on disk. Its writes are
  // asynchronous and fsynced, so wait for the one that follows the healthy sink's confirmation
  // rather than a fixed time (on a loaded CI machine 50 ms saw only the temporary file).
  const journaled = await readOnce(() => new PendingJournal(dir).load(), ({ entries }) => entries[0]?.sinks.length === 1)
  assert.deepEqual(journaled.entries.map((e) => e.sinks), [['team-a/down']], 'the journal lists the failing sink only')
  const files = await readdir(dir)
  assert.equal(files.filter(isJournal).length, 1, `one journal file for the inventory: ${files.join(', ')}`)

  const second = harness(t, { journal: new PendingJournal(dir) })
  assert.equal(await second.exporter.restorePending(), 1, 'one sink owes the export')
  const resumed = second.exporter.inventoryState(INV)
  assert.match(resumed?.sinks.find((s) => s.name === 'down')?.message ?? '', /^an export pending at the last shutdown waits for the targets to report/)
  // Another exporter may have written since: nothing goes out before the completeness gate.
  await settle()
  assert.equal(second.factory.created.flatMap((s) => s.attempts).length, 0, 'nothing is written before the targets report')
  await second.exporter.reportTarget(report(T1, items))
  second.clock.advance(2_000)
  await eventually(() => second.factory.all('team-a/down').some((s) => s.writes.length === 1), 'the owed export, once the target reported')
  assert.equal(second.factory.sink('team-a/down').writes[0]?.checksum, expected(items).checksum)
  assert.ok(second.logs.some((l) => l.msg === 'resuming a pending export from the journal'), 'the same snapshot is resumed, not dropped')
  await eventually(() => second.exporter.pendingCount() === 0, 'nothing pending')
  // Once every sink confirmed the entry owes nothing; it keeps what each sink confirmed, for status after a restart.
  const settledEntry = await readOnce(() => new PendingJournal(dir).load(), ({ entries }) => entries[0]?.sinks.length === 0)
  assert.deepEqual(settledEntry.entries.map((e) => [e.sinks, e.snapshot, Object.keys(e.confirmed ?? {}).sort()]), [[[], undefined, ['team-a/down', 'team-a/healthy']]])
  await first.exporter.close()
})

test('journal: savePending at shutdown keeps the newest snapshot a failing sink owes', LIMIT, async (t) => {
  const dir = await journalDir(t)
  const journal = new PendingJournal(dir)
  const { clock, factory, exporter } = harness(t, { journal })
  await exporter.applyInventory(composition())
  factory.sink('team-a/primary').failNextWrites(Infinity)
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(2_000)
  await eventually(() => factory.sink('team-a/primary').attempts.length >= 1, 'a failing attempt')
  const newer = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, newer))
  clock.advance(2_000)
  assert.deepEqual(await exporter.savePending(), { saved: 1, failed: 0 })
  await exporter.close()
  const { entries, problems } = await journal.load()
  assert.deepEqual(problems, [])
  assert.equal(entries.length, 1)
  assert.equal(entries[0]?.snapshot?.checksum, expected(newer).checksum)
  assert.deepEqual(entries[0]?.sinks, ['team-a/primary'])
})

test('journal: a torn or foreign file is reported and skipped; finalize removes the entry', LIMIT, async (t) => {
  const dir = await journalDir(t)
  const journal = new PendingJournal(dir)
  await writeFile(path.join(dir, 'torn.json'), '{"version":1,"composition":')
  const { clock, factory, exporter, logs } = harness(t, { journal })
  assert.equal(await exporter.restorePending(), 0)
  assert.match(String(logs.find((l) => l.msg === 'skipped an unreadable pending export')?.fields?.['problem']), /^torn\.json: /)

  const comp = composition({ sinks: [resolvedSink('primary', { deletionPolicy: 'Retain' })] })
  await exporter.applyInventory(comp)
  factory.sink('team-a/primary').failNextWrites(Infinity)
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(2_000)
  await eventually(() => factory.sink('team-a/primary').attempts.length >= 1, 'a failing attempt')
  const files = async () => (await readdir(dir)).filter((n) => n !== 'torn.json')
  const deadline = Date.now() + 2_000
  while ((await files()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
  assert.equal((await files()).length, 1)
  const done = await exporter.finalizeInventory(comp)
  assert.equal(done.finalized, true)
  assert.deepEqual(await files(), [], 'a finalized inventory owes nothing')
})

test('journal: close waits for the journal update a confirmation queued, so nothing writes in the data directory after it', LIMIT, async (t) => {
  const dir = await journalDir(t)
  const h = harness(t, { journal: new PendingJournal(dir) })
  await h.exporter.applyInventory(composition())
  const sink = h.factory.sink('team-a/primary')
  sink.failNextWrites(1)
  await h.exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  h.clock.advance(2_000)
  // The failure journals the export; the retry's confirmation updates the entry without being awaited.
  await eventually(() => sink.writes.length === 1, 'the retried write')
  await h.exporter.close()
  const { entries } = await new PendingJournal(dir).load()
  assert.deepEqual(entries.map((e) => e.sinks), [[]], 'the update ended before close returned: the entry owes nothing')
  assert.equal(entries[0]?.confirmed?.['team-a/primary']?.checksum, sink.lastWrite?.checksum)
})
