// Issue 16, finding 3, end to end inside the exporter: another writer edits the Git record, a
// resync with unchanged input writes nothing (the exporter's checksum shortcut), and only the
// scheduled drift check finds it, then repairs it or reports Drifted by the sink's policy.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import type { InventoryComposition, KollectSinkSpec, ObjectRef, ResolvedSink } from '../../api/types.js'
import { inventoryStatus } from '../../hooks/inventory.js'
import type { SyncRequest } from '../../hooks/request.js'
import { Exporter, type DriftEvent } from '../../sinks/exporter.js'
import { createGitSink } from '../../sinks/git/index.js'
import { FakeClock } from '../support/clock.js'
import { cloneRemote, createBareRemote, git, tempDir } from '../support/git.js'
import { bumpReplicas, makeItems } from '../support/items.js'

const INV: ObjectRef = { namespace: 'team-a', name: 'deployments' }
const TARGET: ObjectRef = { namespace: 'team-a', name: 'deploys' }
const DOC = 'inventory/lab-west/team-a/deployments.json'
const INTERVAL_MS = 10 * 60_000

async function setup(t: TestContext, drift: KollectSinkSpec['drift']) {
  const root = await tempDir(t)
  const remote = await createBareRemote(root)
  const clock = new FakeClock()
  const checks: DriftEvent[] = []
  const exporter = new Exporter({
    cluster: 'lab-west',
    clock,
    backoff: { minMs: 1, maxMs: 5, factor: 2 },
    createSink: async (resolved) => createGitSink({ id: 'team-a/history', spec: (resolved as ResolvedSink).spec, credentials: {}, dataDir: path.join(root, 'data') }),
    observer: { onDrift: (e) => checks.push(e) },
  })
  t.after(() => exporter.close())
  const sink: ResolvedSink = { namespace: 'team-a', name: 'history', spec: { type: 'git', cluster: 'lab-west', git: { url: remote, branch: 'main' }, ...(drift ? { drift } : {}) } }
  const composition: InventoryComposition = { inventory: INV, generation: 1, targets: [TARGET], sinks: [sink], debounceMs: 1_000, maxWaitMs: 10_000, suspend: false }
  const items = makeItems(20).map((item) => ({ ...item, target: TARGET }))
  await exporter.applyInventory(composition)
  await exporter.reportTarget({ target: TARGET, generation: 1, checksum: '', items, failedKeys: [] })
  clock.advance(1_000)
  await exporter.idle()
  assert.deepEqual(checks.map((c) => c.result), ['in-step'], 'the first export is checked at once')
  const exported = await git(remote, 'show', `main:${DOC}`)

  // Another writer sets one item's replicas to 77 and pushes; the checksum line stays.
  const other = await cloneRemote(remote, path.join(root, 'other'))
  const { writeFile } = await import('node:fs/promises')
  const text = JSON.parse(exported) as { items: { uid: string; attributes: Record<string, unknown> }[] }
  const victim = text.items[3] as { uid: string; attributes: Record<string, unknown> }
  victim.attributes['replicas'] = 77
  await writeFile(path.join(other, DOC), JSON.stringify(text, null, 2) + '\n')
  await git(other, '-c', 'user.name=Someone', '-c', 'user.email=someone@example.com', 'commit', '-q', '-am', 'hand edit')
  await git(other, 'push', '-q', 'origin', 'main')
  const handHead = (await git(remote, 'rev-parse', 'main')).trim()

  // The resync reports the same items: nothing is written, and status alone cannot tell.
  await exporter.reportTarget({ target: TARGET, generation: 1, checksum: '', items, failedKeys: [] })
  clock.advance(1_000)
  await exporter.idle()
  assert.equal((await git(remote, 'rev-parse', 'main')).trim(), handHead, 'the finding: unchanged input writes nothing')
  assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'Synced')
  return { clock, exporter, checks, remote, exported, handHead, composition, victim }
}

test('drift Repair: the scheduled check puts the export back as one commit; status stays Synced', async (t) => {
  const { clock, exporter, checks, remote, exported, handHead } = await setup(t, undefined)
  clock.advance(INTERVAL_MS)
  await exporter.idle()
  assert.deepEqual(checks.map((c) => [c.result, c.differences]), [['in-step', 0], ['repaired', 1]])
  assert.equal(await git(remote, 'show', `main:${DOC}`), exported, 'the record is the export again')
  assert.match(await git(remote, 'log', '-1', '--format=%s', 'main'), /^kollect: repair drift in team-a\/deployments \(1 items\)$/)
  assert.equal((await git(remote, 'rev-parse', 'main~1')).trim(), handHead, 'one commit on top of the hand edit')
  assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'Synced')
  clock.advance(INTERVAL_MS)
  await exporter.idle()
  assert.deepEqual(checks.map((c) => c.result).slice(2), ['in-step'], 'the next check finds it in step and commits nothing')
  assert.match(await git(remote, 'log', '-1', '--format=%s', 'main'), /^kollect: repair drift/)
})

test('drift Report: the scheduled check leaves the edit and the inventory says Drifted with the item', async (t) => {
  const { clock, exporter, checks, remote, handHead, composition, victim } = await setup(t, { policy: 'Report', interval: '10m' })
  clock.advance(INTERVAL_MS)
  await exporter.idle()
  assert.deepEqual(checks.map((c) => [c.result, c.differences]), [['in-step', 0], ['drifted', 1]])
  assert.equal((await git(remote, 'rev-parse', 'main')).trim(), handHead, 'Report never writes')
  const state = exporter.inventoryState(INV)
  assert.ok(state)
  assert.equal(state.sinks[0]?.state, 'Drifted')
  assert.match(state.sinks[0]?.message ?? '', new RegExp(`^1 item differs from the last export \\(team-a/deploys/${victim.uid}\\)`))
  const parent = { apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectInventory', metadata: { name: INV.name, namespace: INV.namespace, generation: 1 }, spec: {} }
  const status = inventoryStatus({ controller: {}, parent, children: {}, related: {} } as unknown as SyncRequest, { ok: true, composition, problems: [] }, state)
  const conditions = status['conditions'] as { type: string; status: string; reason: string }[]
  assert.deepEqual(conditions.filter((c) => c.type !== 'Ready').map((c) => [c.type, c.status, c.reason]), [['Degraded', 'True', 'SinkDrifted'], ['Synced', 'False', 'Drifted']])
})
