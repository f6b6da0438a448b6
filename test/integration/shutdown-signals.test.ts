// Shutdown keeps what it owes (issue 25, goal 5): a terminal's Ctrl-C reaches node twice (from
// the terminal and again from npm), and a second signal must not cut the drain short. A real
// `npm start` process holds an export in a 30 s debounce; the first signal flushes it to a Git
// remote whose pre-receive hook holds the push, so the drain is provably in progress when the
// second signal arrives. Only after the process logged that signal is the push let through.
import assert from 'node:assert/strict'
import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import type { KubeObject } from '../../api/types.js'
import { cleanups, type Later } from '../support/cleanups.js'
import { createBareRemote, git, tempDir } from '../support/git.js'
import { startKollectProcess, type KollectProcess } from '../support/kollect-process.js'
import { pollUntil } from '../support/process.js'
import { ROUTES, goodTargetSync, inventorySync, meta, send } from '../security/support.js'

/** A bare remote whose pushes wait, once `armed` exists, until `release` exists; `started` says one is waiting. */
async function heldRemote(t: Later): Promise<{ remote: string; arm(): void; started(): boolean; release(): void }> {
  const root = await tempDir(t, 'kollect-shutdown-')
  const remote = await createBareRemote(root)
  const file = (name: string) => path.join(root, name)
  const hook = path.join(remote, 'hooks', 'pre-receive')
  writeFileSync(hook, [
    '#!/bin/sh',
    `[ -f '${file('armed')}' ] || exit 0`,
    `touch '${file('started')}'`,
    `while [ ! -f '${file('release')}' ]; do sleep 0.05; done`,
    '',
  ].join('\n'))
  chmodSync(hook, 0o755)
  const release = () => writeFileSync(file('release'), '')
  // A process killed mid-drain leaves its push waiting: let it end.
  t.after(release)
  return { remote, arm: () => writeFileSync(file('armed'), ''), started: () => existsSync(file('started')), release }
}

/** A `npm start` process with an export to the held remote waiting in a 30 s debounce. */
async function debounced(t: Later, graceMs: number): Promise<{ held: Awaited<ReturnType<typeof heldRemote>>; k: KollectProcess; pid: number }> {
  const held = await heldRemote(t)
  const k = await startKollectProcess({ KOLLECT_LOG_LEVEL: 'info', KOLLECT_SHUTDOWN_GRACE_MS: String(graceMs) })
  t.after(() => k.close())
  await resync(k.url, held.remote, '30s')
  held.arm()
  return { held, k, pid: k.proc.child.pid as number }
}

/** What Metacontroller sends a (re)started process: the target's report and the inventory, exported to `remote`. */
async function resync(url: string, remote: string, debounce: string): Promise<void> {
  const sink: KubeObject = { ...meta('KollectSink', 'team-a', 'repo'), spec: { type: 'git', cluster: 'lab', git: { url: remote } } }
  const target = await send(url, ROUTES.targetSync, { body: JSON.stringify(goodTargetSync()) })
  assert.equal(target.status, 200, target.text)
  const inventory = await send(url, ROUTES.inventorySync, {
    body: JSON.stringify(inventorySync({ spec: { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name: 'repo' }], debounce, maxWait: '60s' }, sinks: [sink] })),
  })
  assert.equal(inventory.status, 200, inventory.text)
}

async function drainsThrough(test: TestContext, first: NodeJS.Signals, second: NodeJS.Signals): Promise<void> {
  const { held, k, pid } = await debounced(cleanups(test), 60_000)

  // The node process alone, not its group: git's own processes must not see the signal.
  process.kill(pid, first)
  await pollUntil('the flushed export reaching the remote', async () => held.started(), { timeoutMs: 30_000, proc: k.proc })
  process.kill(pid, second)
  await pollUntil('the second signal handled', async () => k.proc.logTail(200).includes('shutdown already in progress'), { timeoutMs: 10_000, proc: k.proc })
  held.release()

  assert.equal(await k.proc.exited, 'exit 0', k.proc.logTail())
  const files = (await git(held.remote, 'ls-tree', '-r', '--name-only', 'main')).split('\n')
  assert.ok(files.some((f) => f.includes('prod-inventory')), `the export is on the remote: ${files.join(', ')}\n${k.proc.logTail()}`)
  assert.doesNotMatch(k.proc.logTail(200), /were saved/, 'written, not left to the journal')
}

describe('shutdown: any number of signals drains once', () => {
  test('a healthy sink still writing when the grace period ends: the export is journaled, and a restart resumes it', async (test) => {
    const t = cleanups(test)
    const { held, k, pid } = await debounced(t, 1_500)
    process.kill(pid, 'SIGINT')
    await pollUntil('the journal saved at the end of the grace period', async () => k.proc.logTail(200).includes('were saved'), { timeoutMs: 30_000, proc: k.proc })
    // The sinks close (the writers are stopped) right after that line; closing waits for the
    // push in flight, so let it end. A sink that never answers makes it exit 1 at grace + 8 s.
    held.release()
    assert.equal(await k.proc.exited, 'exit 0', k.proc.logTail())
    // The writer was stopped before the push ended: unconfirmed, the entry stays for the next start.
    const data = path.join(k.dataDir, 'data')
    const journal = () => readdirSync(path.join(data, 'pending')).filter((n) => n.endsWith('.json') && !n.startsWith('.'))
    const entries = journal()
    const owingOf = (name: string | undefined) => (JSON.parse(readFileSync(path.join(data, 'pending', name as string), 'utf8')) as { sinks: string[] }).sinks
    assert.equal(entries.length, 1, entries.join(', '))
    assert.deepEqual(owingOf(entries[0]), ['team-a/repo'])

    const next = await startKollectProcess({ KOLLECT_LOG_LEVEL: 'info', KOLLECT_DATA_DIR: data })
    t.after(() => next.close())
    // The entry waits for the completeness gate (issue 25, scenario 4): the targets' resync, here sent at once.
    await pollUntil('the entry read at start', async () => next.proc.logTail(200).includes('waits for its targets to report'), { timeoutMs: 30_000, proc: next.proc })
    assert.deepEqual(owingOf(entries[0]), ['team-a/repo'], 'nothing is confirmed before the target reports')
    await resync(next.url, held.remote, '1s')
    // Confirmed, the entry owes nothing and keeps the confirmation for status after a restart.
    await pollUntil('the resumed export confirmed', async () => owingOf(entries[0]).length === 0, { timeoutMs: 30_000, proc: next.proc })
    assert.match(next.proc.logTail(200), /resuming a pending export from the journal/)
    const files = (await git(held.remote, 'ls-tree', '-r', '--name-only', 'main')).split('\n')
    assert.ok(files.some((f) => f.includes('prod-inventory')), `the export is on the remote: ${files.join(', ')}`)
  })

  test('SIGINT twice (Ctrl-C under npm): the debounced export is written, exit 0', (t) => drainsThrough(t, 'SIGINT', 'SIGINT'))
  test('SIGTERM then SIGINT: the debounced export is written, exit 0', (t) => drainsThrough(t, 'SIGTERM', 'SIGINT'))
})
