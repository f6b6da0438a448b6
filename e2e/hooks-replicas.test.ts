// Hooks are stateless: three hooks processes behind a round-robin proxy, feeding one exporter,
// export exactly what one hooks process does. The same Metacontroller-shaped sequence (several
// targets, resyncs, a hooks restart, a change, a removal) goes to both layouts, each with its
// own git remote. A report stamp from a per-process counter instead of the wall clock fails
// here: the restarted process's stamps would be older than the held ones, so dropped as stale.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import type { InventoryStatus } from '../api/types.js'
import { createBareRemote, git } from '../test/support/git.js'
import { startPod, type HookAnswer, type Pod } from '../test/support/kollect-process.js'
import { controllerFor, customizeRequest, goJson, loadExampleCr, syncRequest, targetSyncRequest } from '../test/support/metacontroller.js'
import { REPLICA_DOC, historySink, inventorySyncBody, replicaObjects, replicaTarget } from '../test/support/replica-fixtures.js'

const TOKEN = 'replicas-token-0123456789'
const DOC = REPLICA_DOC
// Four targets on three replicas: round robin lands each target's next sync on another replica.
const TARGETS = [0, 1, 2, 3]

let root: string
const layouts: { name: string; pod: Pod; remote: string }[] = []

const target = replicaTarget
const objects = replicaObjects
const sink = historySink
const inventorySync = (remote: string) => inventorySyncBody(remote, TARGETS)
const withoutExportTimes = (s: InventoryStatus) => ({ ...s, lastExportTime: null, sinks: s.sinks?.map((x) => ({ ...x, lastExportTime: null })) })
const synced = (s: InventoryStatus) => s.conditions?.find((c) => c.type === 'Synced')?.status === 'True'

/** One step of the sequence on one layout: the answers of every hook call, in order. */
type Step = (pod: Pod, remote: string) => Promise<HookAnswer[]>
const syncTargets = (specs: [number, { image?: string; drop?: boolean }][], times: number): Step => async (pod) => {
  const answers: HookAnswer[] = []
  // Each target synced `times` in a row, as resyncs do: round-robin lands them on different replicas.
  for (let n = 0; n < times; n++) for (const [i, opts] of specs) answers.push(await pod.hook('/hooks/targets/sync', goJson(targetSyncRequest(objects(i, opts), { target: target(i) }))))
  return answers
}
const steps: [string, Step, string][] = [
  ['sinks and customize', async (pod, remote) => [
    await pod.hook('/hooks/sinks/sync', goJson(syncRequest(controllerFor('kollect-sinks'), sink(remote), {}))),
    await pod.hook('/hooks/targets/customize', goJson(customizeRequest(controllerFor('kollect-targets'), target(0)))),
  ], ''],
  ['four targets, each synced three times', syncTargets([[0, {}], [1, {}], [2, {}], [3, {}]], 3), 'kollect: team-a/prod-inventory +16 ~0 -0 (16 items)'],
  // A rolling update: one hooks process is replaced by a fresh one, with nothing carried over.
  ['a hooks process restarts', async (pod) => {
    await pod.restartHooks(pod.hooksReplicas.length - 1)
    return []
  }, ''],
  ['one image changes', syncTargets([[0, {}], [1, { image: 'registry.example.com/payments/t1-web-0:9.9.9' }], [2, {}], [3, {}]], 2), 'kollect: team-a/prod-inventory +0 ~1 -0 (16 items)'],
  ['one Deployment goes away', syncTargets([[0, {}], [1, { image: 'registry.example.com/payments/t1-web-0:9.9.9' }], [2, { drop: true }], [3, {}]], 2),
    'kollect: team-a/prod-inventory +0 ~0 -1 (15 items)'],
]

before(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'kollect-replicas-'))
  for (const [name, replicas] of [['one hooks process', 1], ['three hooks replicas', 3]] as const) {
    const remote = await createBareRemote(path.join(root, name.replaceAll(' ', '-')))
    layouts.push({ name, remote, pod: await startPod(TOKEN, { KOLLECT_ALLOW_PRIVATE_SINKS: 'true' }, { hooksReplicas: replicas }) })
  }
})

after(async () => {
  for (const { pod } of layouts) await pod.close()
  if (root) rmSync(root, { recursive: true, force: true })
})

const exportCommits = async (remote: string) => (await git(remote, 'log', '--format=%s', 'main')).trim().split('\n').filter((s) => s.startsWith('kollect: team-a/'))

test('three hooks replicas behind round-robin give the same hook answers, statuses and exports as one', async () => {
  let checksums: (string | undefined)[] = [undefined, undefined]
  for (const [what, step, commit] of steps) {
    const answers: HookAnswer[][] = []
    for (const { pod, remote } of layouts) answers.push(await step(pod, remote))
    // Hook answers are deterministic: byte-identical requests, identical statuses, whichever replica answered.
    assert.deepEqual(answers[1], answers[0], `${what}: hook answers`)
    for (const a of answers[0] ?? []) assert.ok(!a.status?.conditions?.some((c) => c.type === 'Stale' && c.status === 'True'), `${what}: no report dropped as stale: ${JSON.stringify(a.status)}`)
    if (!commit) continue
    await pod(0).hook('/hooks/inventories/customize', goJson(customizeRequest(controllerFor('kollect-inventories'), loadExampleCr('inventory.yaml'))))
    const statuses: InventoryStatus[] = []
    for (const [i, { pod: p, remote }] of layouts.entries()) statuses.push(await p.waitSynced(inventorySync(remote), { changedFrom: checksums[i] }))
    assert.ok(statuses.every(synced))
    // lastExportTime is when each exporter wrote: an event of its own, so the one field that may differ.
    assert.deepEqual(statuses.map(withoutExportTimes)[1], withoutExportTimes(statuses[0] as InventoryStatus), `${what}: inventory statuses`)
    checksums = statuses.map((s) => s.checksum)
    const [one, three] = await Promise.all(layouts.map(async ({ remote }) => ({ commits: await exportCommits(remote), doc: await git(remote, 'show', `main:${DOC}`) })))
    assert.equal(one?.commits[0], commit, `${what}: one commit with the change`)
    assert.deepEqual(three?.commits, one?.commits, `${what}: the same commits`)
    assert.equal(three?.doc, one?.doc, `${what}: the same exported document`)
  }
  // The proxy did spread the hooks: every replica answered syncs.
  const counts = layouts[1]?.pod.proxy?.counts ?? []
  assert.equal(counts.length, 3)
  assert.ok(counts.every((n) => n >= 5), `requests per replica: ${counts.join(', ')}`)
})

function pod(i: number): Pod {
  return (layouts[i] as { pod: Pod }).pod
}
