// Issue 16, finding 3, inside the exporter with real sinks: another writer edits the record, a
// resync with unchanged input writes nothing (the exporter's checksum shortcut), and only the
// scheduled drift check finds it, then repairs it or reports Drifted by the sink's policy.
import assert from 'node:assert/strict'
import { rename, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { after, before, test, type TestContext } from 'node:test'
import type { InventoryComposition, KollectSinkSpec, ObjectRef, ResolvedSink } from '../../api/types.js'
import { inventoryStatus } from '../../hooks/inventory-status.js'
import type { SyncRequest } from '../../hooks/request.js'
import { Exporter, type DriftEvent } from '../../exporter/index.js'
import { createGitSink } from '../../sinks/git/index.js'
import { createPostgresSink } from '../../sinks/postgres/index.js'
import { FakeClock } from '../support/clock.js'
import { cloneRemote, createBareRemote, git, tempDir } from '../support/git.js'
import { makeItems } from '../support/items.js'
import { startPostgres, type PgServer } from '../support/postgres.js'

const INV: ObjectRef = { namespace: 'team-a', name: 'deployments' }
const TARGET: ObjectRef = { namespace: 'team-a', name: 'deploys' }
const DOC = 'inventory/lab-west/team-a/deployments.json'
const INTERVAL_MS = 10 * 60_000
const ITEMS = makeItems(20).map((item) => ({ ...item, target: TARGET }))
const VICTIM = ITEMS[3] as (typeof ITEMS)[number]

let pg: PgServer
before(async () => { pg = await startPostgres() })
after(async () => { await pg?.destroy() })

/** An exporter on a fake clock with one real sink, after its first export and first drift check. */
async function exported(t: TestContext, spec: KollectSinkSpec, root: string) {
  const clock = new FakeClock()
  const checks: DriftEvent[] = []
  const exporter = new Exporter({
    cluster: 'lab-west',
    clock,
    backoff: { minMs: 1, maxMs: 5, factor: 2 },
    createSink: async (resolved) => {
      const opts = { id: 'team-a/record', spec: (resolved as ResolvedSink).spec, dataDir: path.join(root, 'data') }
      return spec.type === 'git' ? createGitSink({ ...opts, credentials: {} }) : createPostgresSink({ ...opts, credentials: { dsn: pg.dsn } })
    },
    observer: { onDrift: (e) => checks.push(e) },
  })
  t.after(() => exporter.close())
  const composition: InventoryComposition = {
    inventory: INV, generation: 1, targets: [TARGET], sinks: [{ namespace: 'team-a', name: 'record', spec }], debounceMs: 1_000, maxWaitMs: 10_000, suspend: false,
  }
  await exporter.applyInventory(composition)
  const resync = async () => {
    await exporter.reportTarget({ target: TARGET, generation: 1, checksum: '', items: ITEMS, failedKeys: [] })
    clock.advance(1_000)
    await exporter.idle()
  }
  await resync()
  assert.deepEqual(checks.map((c) => c.result), ['in-step'], 'the first export is checked at once')
  const tick = async () => {
    clock.advance(INTERVAL_MS)
    await exporter.idle()
  }
  return { clock, exporter, checks, composition, resync, tick }
}

async function gitRecord(t: TestContext, drift?: KollectSinkSpec['drift']) {
  const root = await tempDir(t)
  const remote = await createBareRemote(root)
  const run = await exported(t, { type: 'git', cluster: 'lab-west', git: { url: remote, branch: 'main' }, ...(drift ? { drift } : {}) }, root)
  const exportedDoc = await git(remote, 'show', `main:${DOC}`)
  // Another writer sets one item's replicas to 77 and pushes; the checksum line stays.
  const other = await cloneRemote(remote, path.join(root, 'other'))
  const doc = JSON.parse(exportedDoc) as { items: { uid: string; attributes: Record<string, unknown> }[] }
  const victim = doc.items.find((i) => i.uid === VICTIM.uid)
  assert.ok(victim)
  victim.attributes['replicas'] = 77
  await writeFile(path.join(other, DOC), JSON.stringify(doc, null, 2) + '\n')
  await git(other, '-c', 'user.name=Someone', '-c', 'user.email=someone@example.com', 'commit', '-q', '-am', 'hand edit')
  await git(other, 'push', '-q', 'origin', 'main')
  const handHead = (await git(remote, 'rev-parse', 'main')).trim()

  await run.resync()
  assert.equal((await git(remote, 'rev-parse', 'main')).trim(), handHead, 'the finding: a resync with unchanged input writes nothing')
  assert.equal(run.exporter.inventoryState(INV)?.sinks[0]?.state, 'Synced', 'the finding: status alone cannot tell')
  return { ...run, remote, exportedDoc, handHead }
}

test('git, drift Repair: the scheduled check puts the export back as one commit; status stays Synced', async (t) => {
  const { checks, remote, exportedDoc, handHead, exporter, tick } = await gitRecord(t)
  await tick()
  assert.deepEqual(checks.map((c) => [c.result, c.differences]), [['in-step', 0], ['repaired', 1]])
  assert.equal(await git(remote, 'show', `main:${DOC}`), exportedDoc, 'the record is the export again')
  assert.equal((await git(remote, 'log', '-1', '--format=%s', 'main')).trim(), 'kollect: repair drift in team-a/deployments (1 items)')
  assert.equal((await git(remote, 'rev-parse', 'main~1')).trim(), handHead, 'one commit on top of the hand edit')
  assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'Synced')
  const repairHead = (await git(remote, 'rev-parse', 'main')).trim()
  await tick()
  assert.deepEqual(checks.map((c) => c.result).slice(2), ['in-step'], 'the next check finds it in step')
  assert.equal((await git(remote, 'rev-parse', 'main')).trim(), repairHead, 'and commits nothing')
})

function conditionsOf(composition: InventoryComposition, state: ReturnType<Exporter['inventoryState']>) {
  assert.ok(state)
  const parent = { apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectInventory', metadata: { name: INV.name, namespace: INV.namespace, generation: 1 }, spec: {} }
  const status = inventoryStatus({ controller: {}, parent, children: {}, related: {} } as unknown as SyncRequest, { ok: true, composition, problems: [] }, state)
  return (status.conditions ?? []).filter((c) => c.type !== 'Ready').map((c) => [c.type, c.status, c.reason])
}

test('git: a drift check that cannot fetch is retried after the backoff; the sink is Unverified, never Synced, until one succeeds', async (t) => {
  const root = await tempDir(t)
  const remote = await createBareRemote(root)
  const { checks, clock, composition, exporter, tick } = await exported(t, { type: 'git', cluster: 'lab-west', git: { url: remote, branch: 'main' } }, root)
  await rename(remote, `${remote}.away`)
  await tick()
  assert.deepEqual(checks.map((c) => c.result), ['in-step', 'error'])
  const failing = exporter.inventoryState(INV)
  assert.equal(failing?.sinks[0]?.state, 'Unverified', 'a record that cannot be read is not Synced')
  assert.match(failing?.sinks[0]?.message ?? '', /^drift check failed, retrying with backoff: /)
  assert.deepEqual(conditionsOf(composition, failing), [['Degraded', 'True', 'SinkUnverified'], ['Synced', 'False', 'Unverified']])

  await rename(`${remote}.away`, remote)
  clock.advance(5) // the backoff's maximum, far below the 10-minute interval
  await exporter.idle()
  assert.deepEqual(checks.map((c) => c.result), ['in-step', 'error', 'in-step'])
  assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'Synced')
  assert.deepEqual(conditionsOf(composition, exporter.inventoryState(INV)), [['Degraded', 'False', 'AsExpected'], ['Synced', 'True', 'Exported']])
})

test('git, drift Report: the scheduled check leaves the edit and the inventory says Drifted with the item', async (t) => {
  const { checks, remote, handHead, exporter, composition, tick } = await gitRecord(t, { policy: 'Report', interval: '10m' })
  await tick()
  assert.deepEqual(checks.map((c) => [c.result, c.differences]), [['in-step', 0], ['drifted', 1]])
  assert.equal((await git(remote, 'rev-parse', 'main')).trim(), handHead, 'Report never writes')
  const state = exporter.inventoryState(INV)
  assert.equal(state?.sinks[0]?.state, 'Drifted')
  assert.match(state?.sinks[0]?.message ?? '', new RegExp(`^1 item differs from the last export \\(team-a/deploys/${VICTIM.uid}\\)`))
  assert.deepEqual(conditionsOf(composition, state), [['Degraded', 'True', 'SinkDrifted'], ['Synced', 'False', 'Drifted']])
})

test('postgres, drift Repair: a row edited by hand (content_hash untouched) is put back by the scheduled check', async (t) => {
  const root = await tempDir(t)
  const table = 'drift_items'
  const { checks, exporter, resync, tick } = await exported(t, { type: 'postgres', cluster: 'lab-west', postgres: { table } }, root)
  const row = `FROM ${table} WHERE uid = '${VICTIM.uid}'`
  const before = (await pg.query(`SELECT attributes::text AS a ${row}`))[0]?.['a'] as string
  await pg.query(`UPDATE ${table} SET attributes = jsonb_set(attributes, '{replicas}', '77') WHERE uid = $1`, [VICTIM.uid])

  await resync()
  assert.equal((await pg.query(`SELECT attributes->>'replicas' AS r ${row}`))[0]?.['r'], '77', 'the finding: a resync with unchanged input writes nothing')
  assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'Synced')

  await tick()
  assert.deepEqual(checks.map((c) => [c.result, c.differences]), [['in-step', 0], ['repaired', 1]])
  assert.equal((await pg.query(`SELECT attributes::text AS a ${row}`))[0]?.['a'], before, 'the row is the export again')
  assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'Synced')
})
