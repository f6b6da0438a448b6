// The shutdown log tells the truth (issue 25): when the journal cannot be written (a full disk,
// here a journal directory that cannot exist), it must not say the pending exports "were saved"
// right after the save failed, but what failed and what is lost.
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import { pino } from 'pino'
import { PendingJournal } from '../../../exporter/pending-journal.js'
import { drainExporter } from '../../../server/exporter-wiring.js'
import { composition, eventually, harness, itemsOf, LIMIT, report, T1 } from '../exporter/harness.js'

test('shutdown: a journal that cannot be written is logged as lost, never as saved', LIMIT, async (t) => {
  const root = await mkdtemp(path.join(tmpdir(), 'kollect-shutdown-log-'))
  t.after(() => rm(root, { recursive: true, force: true }))
  // A directory under a regular file: every write fails (ENOTDIR), even for root, as a full disk would.
  await writeFile(path.join(root, 'not-a-dir'), '')
  const { clock, factory, exporter } = harness(t, { journal: new PendingJournal(path.join(root, 'not-a-dir', 'pending')) })
  await exporter.applyInventory(composition())
  factory.sink('team-a/primary').failNextWrites(Infinity)
  await exporter.reportTarget(report(T1, itemsOf(T1, 2)))
  clock.advance(2_000)
  await eventually(() => factory.sink('team-a/primary').attempts.length >= 1, 'a failing attempt')

  const lines: { level: number; msg: string; error?: string; inventories?: number }[] = []
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as (typeof lines)[number])
      done()
    },
  })
  await drainExporter(exporter, 50, pino({ level: 'info' }, sink))

  const msgs = lines.map((l) => l.msg)
  assert.ok(!msgs.some((m) => /were saved/.test(m)), `no claim of a save that failed: ${msgs.join(' | ')}`)
  const lost = lines.find((l) => /could not be saved/.test(l.msg))
  assert.ok(lost, `the failure is logged: ${msgs.join(' | ')}`)
  assert.equal(lost.level, 50, 'at error')
  assert.equal(lost.inventories, 1)
  assert.match(lost.error ?? '', /ENOTDIR/)
  assert.match(lost.msg, /lost.*resync/)
})
