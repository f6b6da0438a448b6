import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { compareItems } from '../../api/canonical.js'
import type { KubeObject, TargetReport, TargetStatus } from '../../api/types.js'
import { keptAndPlain, post, startHooksServer, type HooksServer } from '../support/hooks-server.js'
import { pollUntil } from '../support/process.js'
import { TYPES, controllerFor, deployment, goJson, loadExampleCr, relatedMap, syncRequest, targetSyncRequest } from '../support/metacontroller.js'

// Issue 28: a resync extracts only the objects whose bytes changed since the target's last sync,
// and its answer and report are exactly those of extracting every object. Each sync goes to two
// hooks servers: one with kept records, one without (KOLLECT_OBJECT_CACHE_BYTES=0).

const SYNC = '/hooks/targets/sync'

interface Answer { status: TargetStatus }
interface Sent { answer: Answer; report: TargetReport | undefined }

/**
 * A hooks server that keeps the reports it sends the exporter, each as the whole report it stands
 * for: a report of changes (TargetReport.base) is applied here to the last one of its target.
 */
async function recording(env: Record<string, string>): Promise<HooksServer & { reports: TargetReport[]; changes: number }> {
  const server = await startHooksServer(env)
  const recorded = Object.assign(server, { reports: [] as TargetReport[], changes: 0 })
  const report = server.exporter.reportTarget.bind(server.exporter)
  server.exporter.reportTarget = async (r) => {
    let sent = JSON.parse(Buffer.from((r as { json: Uint8Array }).json).toString('utf8')) as TargetReport
    // The arrival stamp is each server's own.
    delete sent.sequence
    const result = await report(r)
    if (!result.accepted) return result
    if (sent.base !== undefined) {
      const last = recorded.reports.findLast((p) => p.target.name === sent.target.name)
      assert.equal(sent.base, last?.checksum, 'a report of changes applies to the last report')
      recorded.changes++
      sent = applied(last as TargetReport, sent)
    }
    recorded.reports.push(sent)
    return result
  }
  return recorded
}

function applied(last: TargetReport, changes: TargetReport): TargetReport {
  const key = (i: TargetReport['items'][number]) => `${i.target.namespace}/${i.target.name}/${i.uid}`
  const all = new Map(last.items.map((item, i) => [key(item), { item, hash: last.itemHashes?.[i], generation: last.itemGenerations?.[i] }]))
  for (const k of changes.removedKeys ?? []) assert.ok(all.delete(k), `removed ${k} was held`)
  changes.items.forEach((item, i) => all.set(key(item), { item, hash: changes.itemHashes?.[i], generation: changes.itemGenerations?.[i] }))
  const sorted = [...all.values()].sort((a, b) => compareItems(a.item, b.item))
  const { base: _base, removedKeys: _removed, ...rest } = changes
  return { ...rest, items: sorted.map((e) => e.item), itemHashes: sorted.map((e) => e.hash as string), itemGenerations: sorted.map((e) => e.generation ?? null) }
}

async function objectsCounted(server: HooksServer): Promise<{ reused: number; extracted: number }> {
  const values = (await server.metrics.syncObjects.get()).values
  const of = (result: string) => values.find((v) => v.labels.result === result)?.value ?? 0
  return { reused: of('reused'), extracted: of('extracted') }
}

type Recording = Awaited<ReturnType<typeof recording>>

async function send(server: Recording, body: string): Promise<Sent> {
  const before = server.reports.length
  const res = await post(server.url + SYNC, body)
  assert.equal(res.status, 200, res.text)
  return { answer: res.json() as Answer, report: server.reports.length > before ? server.reports.at(-1) : undefined }
}

const bump = (o: KubeObject, rv: string, replicas?: number) => {
  ;(o.metadata as { resourceVersion: string }).resourceVersion = rv
  if (replicas !== undefined) (o as { spec: { replicas: number } }).spec.replicas = replicas
}

/** A target of its own over two namespaces (their keys sort otherwise than their items), some objects failing. */
function largeTarget(name: string): { target: KubeObject; scopes: KubeObject[]; profile: KubeObject; objects: KubeObject[] } {
  const target = structuredClone(loadExampleCr('target-deployments.yaml')) as KubeObject & { spec: Record<string, unknown> }
  Object.assign(target.metadata as object, { name, uid: `uid-${name}` })
  target.spec['namespaces'] = ['team-a', 'team-a-canary']
  const scopes: KubeObject[] = [{
    apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectScope',
    metadata: { name: 'team-a', namespace: 'team-a', uid: 'uid-scope', generation: 1, resourceVersion: '1' },
    spec: { allowedNamespaces: ['team-a', 'team-a-canary'], deniedNamespaces: [] },
  }]
  const profile = structuredClone(loadExampleCr('profile-deployments.yaml')) as KubeObject & { spec: { attributes: Record<string, unknown>[] } }
  profile.spec.attributes.push({ name: 'odd', cel: "object.spec.replicas == 2 ? 1 / 0 : 1" })
  const objects = Array.from({ length: 2000 }, (_, i) => {
    const o = deployment(i, { managedFields: true, ...(i % 3 === 0 ? { namespace: 'team-a-canary' } : {}) })
    ;(o as { spec: { replicas: number } }).spec.replicas = 1 + (i % 7)
    return o
  })
  return { target, scopes, profile, objects }
}

describe('incremental target syncs', () => {
  const servers = keptAndPlain(recording)
  before(servers.start)
  after(servers.close)

  /** Sends the body to both servers; their answers and reports must be the same. Returns the objects the kept one reused and extracted. */
  async function both(body: Record<string, unknown>): Promise<{ sent: Sent; reused: number; extracted: number }> {
    const text = goJson(body)
    const start = await objectsCounted(servers.kept)
    const [a, b] = [await send(servers.kept, text), await send(servers.plain, text)]
    assert.deepEqual(a.answer, b.answer, 'the same answer with and without kept records')
    assert.deepEqual(a.report, b.report, 'the same report with and without kept records')
    const end = await objectsCounted(servers.kept)
    return { sent: a, reused: end.reused - start.reused, extracted: end.extracted - start.extracted }
  }

  test('a resync extracts only what changed, was added or is new, and answers as extracting everything', async () => {
    const objects = Array.from({ length: 8 }, (_, i) => deployment(i))
    const changesBefore = servers.kept.changes
    const first = await both(targetSyncRequest(objects))
    assert.deepEqual([first.reused, first.extracted], [0, 8])
    assert.equal(first.sent.answer.status.extractedCount, 8)

    const again = await both(targetSyncRequest(objects))
    assert.deepEqual([again.reused, again.extracted], [8, 0])
    assert.equal(again.sent.report?.checksum, first.sent.report?.checksum)

    bump(objects[3] as KubeObject, '900001', 9)
    const changed = await both(targetSyncRequest(objects))
    assert.deepEqual([changed.reused, changed.extracted], [7, 1])
    assert.equal(changed.sent.report?.items.find((i) => i.name === 'web-00003')?.attributes['replicas'], 9)
    assert.notEqual(changed.sent.report?.checksum, first.sent.report?.checksum)

    // One gone, one new (sorted into the middle of the map, as Go writes it).
    objects.splice(5, 1)
    objects.push(deployment(40, { name: 'web-00004b' }))
    const churn = await both(targetSyncRequest(objects))
    assert.deepEqual([churn.reused, churn.extracted], [7, 1])
    assert.deepEqual(churn.sent.report?.items.map((i) => i.name).includes('web-00005'), false)
    assert.equal(churn.sent.answer.status.extractedCount, 8)
    assert.equal(servers.kept.changes - changesBefore, 3, 'each resync sent the exporter only what changed')
  })

  test('an exporter that no longer holds the report the changes apply to gets the whole report', async () => {
    const target = structuredClone(loadExampleCr('target-deployments.yaml'))
    Object.assign(target.metadata as object, { name: 'forgotten', uid: 'uid-forgotten' })
    const objects = Array.from({ length: 4 }, (_, i) => deployment(i))
    await both(targetSyncRequest(objects, { target }))
    // As after an exporter restart: it holds nothing of the target.
    await servers.kept.exporter.removeTarget({ namespace: 'team-a', name: 'forgotten' })
    const changes = servers.kept.changes
    bump(objects[1] as KubeObject, '900200', 9)
    const resent = await both(targetSyncRequest(objects, { target }))
    assert.deepEqual([resent.reused, resent.extracted], [3, 1])
    assert.equal(servers.kept.changes, changes, 'the report of changes was refused (BaseMismatch)')
    const held = { target: { namespace: 'team-a', name: 'forgotten' }, uid: 'uid-forgotten', generation: 1, checksum: resent.sent.answer.status.checksum ?? '' }
    assert.equal(await servers.kept.exporter.holdsReport(held), true, 'the whole report followed')
  })

  test('an object whose resourceVersion stays but whose bytes change is extracted again', async () => {
    const target = structuredClone(loadExampleCr('target-deployments.yaml'))
    Object.assign(target.metadata as object, { name: 'liar', uid: 'uid-liar' })
    const objects = Array.from({ length: 4 }, (_, i) => deployment(i))
    await both(targetSyncRequest(objects, { target }))
    ;(objects[2] as { spec: { replicas: number } }).spec.replicas = 7
    const lied = await both(targetSyncRequest(objects, { target }))
    assert.deepEqual([lied.reused, lied.extracted], [3, 1])
    assert.equal(lied.sent.report?.items.find((i) => i.name === 'web-00002')?.attributes['replicas'], 7)
  })

  test('failed objects keep their failure, failed key and lastError across resyncs', async () => {
    const target = structuredClone(loadExampleCr('target-deployments.yaml')) as KubeObject & { spec: Record<string, unknown> }
    Object.assign(target.metadata as object, { name: 'failing', uid: 'uid-failing' })
    // A policy that errors on objects without the label: they fail, and their items stay held.
    target.spec['matchPolicy'] = "object.metadata.labels['shard'] == 'a'"
    const profile = structuredClone(loadExampleCr('profile-deployments.yaml')) as KubeObject & { spec: { attributes: Record<string, unknown>[] } }
    profile.spec.attributes.push({ name: 'broken', cel: 'object.spec.replicas / (object.spec.replicas - object.spec.replicas)' })
    const objects = Array.from({ length: 6 }, (_, i) => deployment(i))
    for (const o of objects.slice(0, 3)) (o.metadata as { labels: Record<string, string> }).labels['shard'] = 'a'
    const first = await both(targetSyncRequest(objects, { target, profile }))
    assert.equal(first.sent.answer.status.failedCount, 6, 'three policy errors, three extraction errors')
    assert.ok(first.sent.answer.status.lastError)
    assert.equal(first.sent.report?.failedKeys.length, 6, 'every failed object keeps its last item')
    bump(objects[4] as KubeObject, '900100')
    const again = await both(targetSyncRequest(objects, { target, profile }))
    assert.deepEqual([again.reused, again.extracted], [5, 1])
    assert.equal(again.sent.answer.status.lastError, first.sent.answer.status.lastError)
  })

  test('a change of profile, target spec, scopes or namespace labels extracts every object again', async () => {
    const objects = Array.from({ length: 5 }, (_, i) => deployment(i))
    const profile = loadExampleCr('profile-deployments.yaml')
    const target = structuredClone(loadExampleCr('target-deployments.yaml'))
    Object.assign(target.metadata as object, { name: 'invalidated', uid: 'uid-invalidated' })
    const body = (extra: Parameters<typeof targetSyncRequest>[1] = {}) =>
      targetSyncRequest(objects, { profile: structuredClone(profile), target: structuredClone(target), ...extra })
    await both(body())
    assert.deepEqual((await both(body())).extracted, 0)

    const trimmed = structuredClone(profile) as KubeObject & { spec: { attributes: unknown[] } }
    trimmed.spec.attributes = trimmed.spec.attributes.slice(0, 2)
    const byProfile = await both(body({ profile: trimmed }))
    assert.deepEqual([byProfile.reused, byProfile.extracted], [0, 5])
    assert.deepEqual(Object.keys(byProfile.sent.report?.items[0]?.attributes ?? {}).sort(), ['images', 'replicas'])

    const narrowed = structuredClone(target) as KubeObject & { spec: Record<string, unknown> }
    narrowed.spec['labelSelector'] = { matchLabels: { tier: 'backend' } }
    const bySpec = await both(body({ target: narrowed }))
    assert.deepEqual([bySpec.reused, bySpec.extracted], [0, 5])
    assert.equal(bySpec.sent.answer.status.extractedCount, 0)

    await both(body())
    const scope: KubeObject = {
      apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectScope',
      metadata: { name: 'team-a', namespace: 'team-a', uid: 'uid-scope', generation: 1, resourceVersion: '1' },
      spec: { allowedNamespaces: ['team-a'], deniedNamespaces: [] },
    }
    const byScope = await both(body({ scopes: [scope] }))
    assert.deepEqual([byScope.reused, byScope.extracted], [0, 5])

    // Namespace labels: Metacontroller applies the namespaceSelector, so a namespace that loses the
    // label takes its objects out of the related set: they leave the items, the rest are servers.kept.
    const bySelector = structuredClone(target) as KubeObject & { spec: Record<string, unknown> }
    bySelector.spec['namespaceSelector'] = { matchLabels: { stage: 'prod' } }
    const mixed = [...objects, deployment(9, { namespace: 'team-a-canary' })]
    const selected = (objs: KubeObject[]) => syncRequest(controllerFor('kollect-targets'), bySelector, relatedMap(
      [TYPES.scope, TYPES.profile, TYPES.deployment], { [TYPES.profile]: [profile], [TYPES.deployment]: objs },
    ))
    assert.equal((await both(selected(mixed))).extracted, 6)
    const unlabelled = await both(selected(objects))
    assert.deepEqual([unlabelled.reused, unlabelled.extracted], [5, 0])
    assert.equal(unlabelled.sent.report?.items.some((i) => i.namespace === 'team-a-canary'), false)
  })

  test('a target whose objects all change at every sync has its records kept once, not at every sync', async () => {
    const target = structuredClone(loadExampleCr('target-deployments.yaml'))
    Object.assign(target.metadata as object, { name: 'churning', uid: 'uid-churning' })
    const objects = Array.from({ length: 5 }, (_, i) => deployment(i))
    const all = (round: number) => objects.forEach((o, i) => bump(o, String(1_000_000 * round + i)))
    await both(targetSyncRequest(objects, { target }))
    all(1)
    // Every object changed (a rollout): the records of this sync are kept, as the last ones helped.
    assert.deepEqual((await both(targetSyncRequest(objects, { target }))).reused, 0)
    all(2)
    // Again: now the target's objects change between syncs, and the server reads no body to keep records.
    assert.deepEqual((await both(targetSyncRequest(objects, { target }))).reused, 0)
    const quiet = await both(targetSyncRequest(objects, { target }))
    assert.deepEqual([quiet.reused, quiet.extracted], [0, 5], 'the records kept are those of the sync before')
    // The objects came again as the last body had them: they settled, and these records are servers.kept.
    bump(objects[3] as KubeObject, '900300', 9)
    const settled = await both(targetSyncRequest(objects, { target }))
    assert.deepEqual([settled.reused, settled.extracted], [4, 1])
  })

  test('objects of several namespaces, whose keys sort otherwise than their items, are merged in item order', async () => {
    const target = structuredClone(loadExampleCr('target-deployments.yaml')) as KubeObject & { spec: Record<string, unknown> }
    Object.assign(target.metadata as object, { name: 'two-namespaces', uid: 'uid-two-namespaces' })
    target.spec['namespaces'] = ['team-a', 'team-a-canary']
    const scopes: KubeObject[] = [{
      apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectScope',
      metadata: { name: 'team-a', namespace: 'team-a', uid: 'uid-scope', generation: 1, resourceVersion: '1' },
      spec: { allowedNamespaces: ['team-a', 'team-a-canary'], deniedNamespaces: [] },
    }]
    // "team-a-canary/…" keys come before "team-a/…" ones; the items of team-a come first.
    const objects = Array.from({ length: 9 }, (_, i) => deployment(i, i % 3 === 0 ? { namespace: 'team-a-canary' } : {}))
    const first = await both(targetSyncRequest(objects, { target, scopes }))
    assert.deepEqual(first.sent.report?.items.map((i) => i.namespace), [...Array(6).fill('team-a'), ...Array(3).fill('team-a-canary')])
    bump(objects[0] as KubeObject, '900900', 5)
    bump(objects[4] as KubeObject, '900904', 6)
    const changed = await both(targetSyncRequest(objects, { target, scopes }))
    assert.deepEqual([changed.reused, changed.extracted], [7, 2])
  })

  /** Syncs the kept server answered from two children (joined), or from one after all (whole). */
  async function halved(): Promise<{ joined: number; whole: number }> {
    const values = (await servers.kept.metrics.halvedSyncs.get()).values
    const of = (result: string) => values.find((v) => v.labels.result === result)?.value ?? 0
    return { joined: of('joined'), whole: of('whole') }
  }

  test('a large first sync is halved between two children, and answers and reports as one child extracting everything', async () => {
    const { objects, ...rest } = largeTarget('halved')
    const body = targetSyncRequest(objects, rest)
    assert.ok(Buffer.byteLength(goJson(body)) >= 4 * 1024 * 1024, 'large enough to be halved')
    const start = await halved()
    const first = await both(body)
    assert.deepEqual(await halved(), { joined: start.joined + 1, whole: start.whole })
    const status = first.sent.answer.status
    // Objects 1, 8, 15, … have 2 replicas: their attribute fails.
    assert.deepEqual([status.extractedCount, status.failedCount], [2000 - 286, 286])
    assert.ok(status.lastError)
    // A resync with one object changed reads the records the halves gave.
    bump(objects[1234] as KubeObject, '901234', 3)
    const resync = await both(targetSyncRequest(objects, rest))
    assert.deepEqual([resync.reused, resync.extracted], [1999, 1])
  })

  test('a large body whose halves hold the same key (a duplicate in the map) gets the answer one child gives the whole body', async () => {
    const { objects, ...rest } = largeTarget('halved-duplicate')
    // The second half's last object under a key of the first half's: JSON.parse keeps the last one.
    const text = goJson(targetSyncRequest(objects, rest)).replace('"team-a/web-01999":', '"team-a/web-00001":')
    const start = await halved()
    const [a, b] = [await send(servers.kept, text), await send(servers.plain, text)]
    assert.deepEqual(a.answer, b.answer)
    assert.deepEqual(a.report, b.report)
    // web-00001 (failing) gave way to web-01999.
    assert.deepEqual([a.answer.status.extractedCount, a.answer.status.failedCount], [1999 - 285, 285])
    assert.deepEqual(await halved(), { joined: start.joined, whole: start.whole + 1 })
  })

  test('a halved sync of a target whose records are kept sends the exporter only what changed, though every object changed its bytes', async () => {
    const { objects, ...rest } = largeTarget('halved-again')
    const cacheBytes = async () => (await servers.kept.metrics.registry.getSingleMetric('kollect_object_cache_bytes')?.get())?.values[0]?.value ?? 0
    const before = await cacheBytes()
    await both(targetSyncRequest(objects, rest))
    // The first sync's records are kept once its answer has gone.
    await pollUntil('the first sync\'s records are kept', async () => (await cacheBytes()) > before, { timeoutMs: 10_000 })
    // A rollout: every object's status (and resourceVersion) moves; two replicas counts change, one object goes, one comes.
    objects.forEach((o, i) => bump(o, String(950_000 + i)))
    bump(objects[10] as KubeObject, '960010', 4)
    bump(objects[11] as KubeObject, '960011', 2)
    objects.splice(20, 1)
    objects.push(deployment(5000, { managedFields: true }))
    const [start, changesBefore] = [await halved(), servers.kept.changes]
    const again = await both(targetSyncRequest(objects, rest))
    assert.deepEqual(await halved(), { joined: start.joined + 1, whole: start.whole })
    assert.equal(servers.kept.changes, changesBefore + 1, 'a report of changes, which the exporter took')
    assert.deepEqual([again.reused, again.extracted], [0, 2000])
  })

  test('a sync in which every object changed its bytes, for one child, sends the exporter only what changed since the kept records\' report', async () => {
    const target = structuredClone(loadExampleCr('target-deployments.yaml'))
    Object.assign(target.metadata as object, { name: 'all-moved', uid: 'uid-all-moved' })
    const objects = Array.from({ length: 10 }, (_, i) => deployment(i))
    const cacheBytes = async () => (await servers.kept.metrics.registry.getSingleMetric('kollect_object_cache_bytes')?.get())?.values[0]?.value ?? 0
    const before = await cacheBytes()
    await both(targetSyncRequest(objects, { target }))
    await pollUntil('the first sync\'s records are kept', async () => (await cacheBytes()) > before, { timeoutMs: 10_000 })
    objects.forEach((o, i) => bump(o, String(970_000 + i)))
    bump(objects[3] as KubeObject, '980003', 6)
    objects.splice(7, 1)
    const changesBefore = servers.kept.changes
    const moved = await both(targetSyncRequest(objects, { target }))
    assert.deepEqual([moved.reused, moved.extracted], [0, 9])
    assert.equal(servers.kept.changes, changesBefore + 1, 'a report of changes, which the exporter took')
  })

  const skipped = async () => (await servers.kept.metrics.skippedBytes.get()).values[0]?.value ?? 0

  test('objects\' managedFields that no expression reads are left out of what the children parse, with the same answer and report', async () => {
    // A large body, halved between two children, and a small one, for one child.
    for (const [name, count] of [['skips-halved', 2000], ['skips-small', 12]] as const) {
      const { objects, ...rest } = largeTarget(name)
      const before = await skipped()
      const first = await both(targetSyncRequest(objects.slice(0, count), rest))
      assert.equal(first.sent.answer.status.matchedCount, count)
      const left = (await skipped()) - before
      // Each object's managedFields: its comma, key and list (realistic: about 600 bytes).
      assert.ok(left > count * 500 && left < count * 1000, `${name}: ${left} bytes left out`)
    }
  })

  test('a kind whose objects come after the profile in the body (StatefulSets) has them left out too', async () => {
    const { objects, target, profile, scopes } = largeTarget('stateful')
    const sets = objects.slice(0, 30).map((o) => ({ ...o, kind: 'StatefulSet' }))
    const forSets = structuredClone(target) as KubeObject & { spec: Record<string, unknown> }
    forSets.spec['resource'] = { group: 'apps', version: 'v1', kind: 'StatefulSet', plural: 'statefulsets' }
    const kind = 'StatefulSet.apps/v1'
    assert.ok(kind > TYPES.profile, 'the profile comes first in the body')
    const related = relatedMap([TYPES.scope, TYPES.profile, kind], { [TYPES.profile]: [profile], [TYPES.scope]: scopes, [kind]: sets })
    const before = await skipped()
    const sent = await both(syncRequest(controllerFor('kollect-targets'), forSets, related))
    assert.equal(sent.sent.answer.status.matchedCount, 30)
    assert.ok((await skipped()) - before > 30 * 500)
  })

  test('a target whose profile or matchPolicy reads managedFields has them parsed, however it reads them', async () => {
    const { objects, target, profile, scopes } = largeTarget('reads-managed-fields')
    const reading = structuredClone(profile) as KubeObject & { spec: { attributes: Record<string, unknown>[] } }
    reading.spec.attributes.push({ name: 'managers', jsonPath: '$.metadata.managedFields[*].manager' })
    const policed = structuredClone(target) as KubeObject & { spec: Record<string, unknown> }
    policed.spec['matchPolicy'] = "object.metadata.managedFields.exists(f, f.manager == 'argocd-controller')"
    const before = await skipped()
    const read = await both(targetSyncRequest(objects, { target, scopes, profile: reading }))
    assert.deepEqual(read.sent.report?.items[0]?.attributes['managers'], ['argocd-controller', 'kube-controller-manager'])
    const matched = await both(targetSyncRequest(objects.slice(0, 20), { target: policed, scopes, profile }))
    assert.equal(matched.sent.answer.status.matchedCount, 20)
    assert.equal(await skipped(), before, 'nothing left out')
  })

  test("one target's records never answer another's, in the same namespace or another", async () => {
    const objects = Array.from({ length: 3 }, (_, i) => deployment(i))
    const a = structuredClone(loadExampleCr('target-deployments.yaml'))
    Object.assign(a.metadata as object, { name: 'tenant-a', uid: 'uid-tenant-a' })
    await both(targetSyncRequest(objects, { target: a }))
    assert.equal((await both(targetSyncRequest(objects, { target: a }))).reused, 3)

    const b = structuredClone(a)
    Object.assign(b.metadata as object, { name: 'tenant-b', uid: 'uid-tenant-b' })
    const other = await both(targetSyncRequest(objects, { target: b }))
    assert.deepEqual([other.reused, other.extracted], [0, 3])
    assert.ok(other.sent.report?.items.every((i) => i.target.name === 'tenant-b'))

    // The same name and namespace with a new uid is a new target (deleted and created again).
    const recreated = structuredClone(a)
    Object.assign(recreated.metadata as object, { uid: 'uid-tenant-a-2' })
    assert.deepEqual((await both(targetSyncRequest(objects, { target: recreated }))).reused, 0)
  })
})

test('a target whose records pass its namespace share is not kept: its resyncs extract every object', async () => {
  // 64 KiB with a quarter per namespace: 16 KiB, less than 70 objects' records (70: more than
  // the objects read before a first sync goes to the child, all counted).
  const server = await recording({ KOLLECT_UNCHANGED_SYNCS: '0', KOLLECT_OBJECT_CACHE_BYTES: String(64 * 1024), KOLLECT_OBJECT_CACHE_NAMESPACE_SHARE: '0.25' })
  try {
    const small = targetSyncRequest([deployment(1)])
    const large = structuredClone(loadExampleCr('target-deployments.yaml'))
    Object.assign(large.metadata as object, { name: 'large', uid: 'uid-large' })
    const many = targetSyncRequest(Array.from({ length: 70 }, (_, i) => deployment(i)), { target: large })
    for (const body of [small, small, many, many]) await send(server, goJson(body))
    assert.deepEqual(await objectsCounted(server), { reused: 1, extracted: 141 })
    const held = Number((await server.metrics.registry.getSingleMetricAsString('kollect_object_cache_bytes')).match(/^kollect_object_cache_bytes (\d+)$/m)?.[1])
    assert.ok(held > 0 && held <= 16 * 1024, `the small target's records are kept, within the share: ${held}`)
  } finally {
    await server.close()
  }
})

test('KOLLECT_HALVE_SYNC_BYTES=0: a large first sync goes to one child whole, with the same answer', async () => {
  const { objects, ...rest } = largeTarget('never-halved')
  const server = await startHooksServer({ KOLLECT_HALVE_SYNC_BYTES: '0' })
  try {
    const res = await post(server.url + SYNC, goJson(targetSyncRequest(objects, rest)))
    assert.equal(res.status, 200, res.text.slice(0, 300))
    const status = (res.json() as Answer).status
    assert.deepEqual([status.extractedCount, status.failedCount], [2000 - 286, 286])
    assert.deepEqual((await server.metrics.halvedSyncs.get()).values.filter((v) => v.value > 0), [])
  } finally {
    await server.close()
  }
})
