// Issue 12: two exporter processes compete for a coordination.k8s.io/v1 Lease on a real API
// server and share one bare git remote. Both take every report (as the hooks would send them);
// only the holder commits. The holder is SIGKILLed right after a change: the standby takes the
// lease within the lease duration and the export history has every change exactly once.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import type { InventoryComposition, ObjectRef, Snapshot } from '../../api/types.js'
import { httpExporterClient } from '../../server/exporter-app.js'
import { createBareRemote, git, gitLog } from '../support/git.js'
import { get } from '../support/hooks-server.js'
import { TARGET, bumpReplicas, makeItems } from '../support/items.js'
import { startControlPlane, type ControlPlane } from '../support/kube-apiserver.js'
import { spawnEntry, type EntryProcess } from '../support/kollect-process.js'
import { pollUntil, waitForExit } from '../support/process.js'

const LEASE_MS = 4_000
const INV: ObjectRef = { namespace: 'team-a', name: 'deployments' }
const DOC = 'inventory/lab-west/team-a/deployments.json'
const ITEMS = makeItems(5)
const NONE = { mode: 'none', reason: 'test' } as const

let cp: ControlPlane
let root: string
let remote: string
const exporters: EntryProcess[] = []

before(async () => {
  cp = await startControlPlane()
  await cp.applyYaml('apiVersion: v1\nkind: Namespace\nmetadata: {name: kollect-system}\n')
  root = mkdtempSync(path.join(os.tmpdir(), 'kollect-leader-'))
  remote = await createBareRemote(root)
}, { timeout: 180_000 })

after(async () => {
  await Promise.all(exporters.map((e) => e.close()))
  await cp?.close()
  if (root) rmSync(root, { recursive: true, force: true })
})

function startExporter(identity: string): Promise<EntryProcess> {
  return spawnEntry('main-exporter', {
    KUBECONFIG: cp.kubeconfigPath,
    KOLLECT_HOOK_AUTH: 'none',
    KOLLECT_ALLOW_PRIVATE_SINKS: 'true',
    KOLLECT_LEADER_ELECTION: 'true',
    KOLLECT_LEASE_NAMESPACE: 'kollect-system',
    KOLLECT_LEASE_IDENTITY: identity,
    KOLLECT_LEASE_DURATION_MS: String(LEASE_MS),
    KOLLECT_LEASE_RENEW_DEADLINE_MS: '3000',
    KOLLECT_LEASE_RETRY_PERIOD_MS: '500',
  })
}

const base = (e: EntryProcess) => `http://127.0.0.1:${e.exporterPort}`
const isReady = async (e: EntryProcess) => !e.proc.hasExited() && (await get(`${base(e)}/readyz`).catch(() => null))?.status === 200

/** Replicas of the first item in every commit that touched the export, oldest first. */
async function exportedHistory(): Promise<number[]> {
  // No branch yet: nothing exported.
  const commits = (await gitLog(remote, 'main').catch(() => [])).reverse()
  const values: number[] = []
  for (const c of commits) {
    const doc = await git(remote, 'show', `${c.sha}:${DOC}`).catch(() => null)
    if (doc === null) continue
    values.push((JSON.parse(doc) as Snapshot).items.find((i) => i.uid === ITEMS[0]?.uid)?.attributes['replicas'] as number)
  }
  return values
}

test('only the lease holder exports; after SIGKILL the standby takes over and no change is lost or committed twice', { timeout: 180_000 }, async () => {
  exporters.push(await startExporter('exporter-a'), await startExporter('exporter-b'))
  for (const e of exporters) await pollUntil('exporter /healthz', async () => (await get(`${base(e)}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 20_000, proc: e.proc })
  const clients = exporters.map((e) => httpExporterClient(base(e), NONE))
  const composition: InventoryComposition = {
    inventory: INV, generation: 1, targets: [TARGET], debounceMs: 100, maxWaitMs: 1_000, suspend: false,
    sinks: [{ namespace: 'team-a', name: 'record', spec: { type: 'git', cluster: 'lab-west', git: { url: remote, branch: 'main' } } }],
  }
  let generation = 0
  // Every exporter alive gets every report and composition, as the hooks fan them out.
  const change = async (replicas: number) => {
    generation++
    const items = [bumpReplicas(ITEMS[0] as (typeof ITEMS)[number], replicas), ...ITEMS.slice(1)]
    await Promise.all(clients.map(async (c, i) => {
      if (exporters[i]?.proc.hasExited()) return
      await c.applyInventory(composition)
      assert.deepEqual(await c.reportTarget({ target: TARGET, generation, checksum: '', items, failedKeys: [] }), { accepted: true })
    }))
  }
  const landed = (replicas: number, writer: EntryProcess) => pollUntil(`replicas ${replicas} in the remote`, async () => (await exportedHistory()).at(-1) === replicas, { timeoutMs: 20_000, proc: writer.proc })

  await pollUntil('one exporter holds the lease', async () => (await Promise.all(exporters.map(isReady))).some(Boolean), { timeoutMs: 20_000 })
  const ready = await Promise.all(exporters.map(isReady))
  assert.equal(ready.filter(Boolean).length, 1, 'exactly one exporter is ready')
  const leader = exporters[ready.indexOf(true)] as EntryProcess
  const standby = exporters[ready.indexOf(false)] as EntryProcess
  const lease = await cp.request('GET', '/apis/coordination.k8s.io/v1/namespaces/kollect-system/leases/kollect-exporter')
  assert.equal(lease.status, 200, lease.body)
  assert.equal(lease.json<{ spec: { holderIdentity: string } }>().spec.holderIdentity, leader === exporters[0] ? 'exporter-a' : 'exporter-b')

  for (const replicas of [11, 12, 13]) {
    await change(replicas)
    await landed(replicas, leader)
  }
  assert.equal(await isReady(standby), false, 'the standby stays not ready while the holder renews')

  // A change, then the holder dies at once: it may or may not have pushed it.
  await change(14)
  leader.proc.signalGroup('SIGKILL')
  const killedAt = Date.now()
  await waitForExit(leader.proc, 5_000)
  await pollUntil('the standby takes the lease', () => isReady(standby), { timeoutMs: 3 * LEASE_MS, proc: standby.proc })
  const takeoverMs = Date.now() - killedAt
  assert.ok(takeoverMs <= LEASE_MS + 2_000, `the standby took over ${takeoverMs} ms after the kill; the lease lasts ${LEASE_MS} ms`)
  // The state came in while standing by: the export resumes without any new report.
  await landed(14, standby)
  const resumedMs = Date.now() - killedAt
  for (const replicas of [15, 16]) {
    await change(replicas)
    await landed(replicas, standby)
  }
  console.log(`takeover ${takeoverMs} ms, export of the pending change ${resumedMs} ms after the kill (lease ${LEASE_MS} ms)`)
  assert.deepEqual(await exportedHistory(), [11, 12, 13, 14, 15, 16], 'every change committed once, in order, by whichever exporter held the lease')
})
