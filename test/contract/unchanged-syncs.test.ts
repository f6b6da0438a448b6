import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { KubeObject, TargetReport, TargetStatus } from '../../api/types.js'
import { post, startHooksServer, startHooksServerWith, type HooksServer } from '../support/hooks-server.js'
import { spawnEntry, type EntryProcess } from '../support/kollect-process.js'
import { TYPES, controllerFor, deployment, goJson, loadExampleCr, relatedMap, syncRequest, targetSyncRequest } from '../support/metacontroller.js'
import { pollUntil } from '../support/process.js'

// Issue 28: a resync in which nothing changed arrives byte for byte as the last one, and gets the
// last answer without parsing or extraction, once the exporter says it holds that report.

const SYNC = '/hooks/targets/sync'

interface Answer { status: TargetStatus }

async function sync(url: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await post(url + SYNC, goJson(body))
  assert.equal(res.status, 200, res.text)
  return res.json() as Answer
}

async function reused(server: Pick<HooksServer, 'metrics'>, result = 'reused'): Promise<number> {
  return (await server.metrics.unchangedSyncs.get()).values.find((v) => v.labels.result === result)?.value ?? 0
}

const deployments = () => [deployment(1), deployment(2), deployment(3)]

describe('with the exporter in process', () => {
  let server: HooksServer
  let report: HooksServer['exporter']['reportTarget']
  const reports: TargetReport[] = []
  before(async () => {
    server = await startHooksServer()
    report = server.exporter.reportTarget.bind(server.exporter)
    // What the hooks send the exporter, read back.
    server.exporter.reportTarget = async (r) => {
      reports.push(JSON.parse(Buffer.from((r as { json: Uint8Array }).json).toString('utf8')) as TargetReport)
      return report(r)
    }
  })
  after(() => server.close())

  test('the same body again: the same answer, no extraction, no report; one changed object runs the sync again', async () => {
    const objects = deployments()
    const first = await sync(server.url, targetSyncRequest(objects))
    assert.equal(first.status.extractedCount, 3)
    assert.equal(reports.length, 1)
    const before = await reused(server)

    const again = await sync(server.url, targetSyncRequest(objects))
    assert.deepEqual(again, first)
    assert.equal(await reused(server), before + 1)
    assert.equal(reports.length, 1, 'the exporter holds that report already: nothing is sent')
    assert.deepEqual(Object.keys(server.app.extractPool.lastPhases ?? {}), ['receive', 'digest', 'report'], 'no child parsed or extracted it')

    ;(objects[1] as { metadata: { resourceVersion: string } }).metadata.resourceVersion = '999'
    ;(objects[1] as { spec: { replicas: number } }).spec.replicas = 9
    const changed = await sync(server.url, targetSyncRequest(objects))
    assert.equal(await reused(server), before + 1)
    assert.equal(reports.length, 2)
    assert.notDeepEqual(changed, first)
    assert.equal(reports[1]?.items.find((i) => i.name === objects[1]?.metadata?.name)?.attributes['replicas'], 9)
  })

  test('a change of profile, target spec, scopes or namespace labels runs the sync again, and its answer shows it', async () => {
    const objects = deployments()
    const profile = loadExampleCr('profile-deployments.yaml')
    const target = loadExampleCr('target-deployments.yaml')
    const base = () => targetSyncRequest(objects, { profile: structuredClone(profile), target: structuredClone(target) })
    await sync(server.url, base())
    await sync(server.url, base())
    const start = await reused(server)

    // The profile: one attribute fewer.
    const trimmed = structuredClone(profile) as KubeObject & { spec: { attributes: unknown[] } }
    trimmed.spec.attributes = trimmed.spec.attributes.slice(0, 2)
    const reports0 = reports.length
    await sync(server.url, targetSyncRequest(objects, { profile: trimmed, target: structuredClone(target) }))
    assert.equal(reports.length, reports0 + 1)
    assert.deepEqual(Object.keys(reports.at(-1)?.items[0]?.attributes ?? {}).sort(), ['images', 'replicas'])

    // The target spec: a label selector that matches none of them.
    const narrowed = structuredClone(target) as KubeObject & { spec: { labelSelector: unknown } }
    narrowed.spec.labelSelector = { matchLabels: { tier: 'backend' } }
    const none = await sync(server.url, targetSyncRequest(objects, { profile: structuredClone(profile), target: narrowed }))
    assert.equal(none.status.extractedCount, 0)

    // The scopes: one that refuses Deployments.
    const scope: KubeObject = {
      apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectScope',
      metadata: { name: 'team-a', namespace: 'team-a', uid: 'uid-scope', generation: 1, resourceVersion: '1' },
      spec: { allowedResources: [{ group: 'apps', kind: 'StatefulSet' }] },
    }
    const denied = await sync(server.url, targetSyncRequest(objects, { profile: structuredClone(profile), target: structuredClone(target), scopes: [scope] }))
    assert.equal(denied.status.conditions?.find((c) => c.type === 'Ready')?.reason, 'ScopeResourceDenied')

    // Namespace labels, for a target that selects namespaces by label: Metacontroller evaluates
    // the customize answer's namespaceSelector, so a namespace that loses the label reaches the
    // hook as a related set without that namespace's objects.
    const bySelector = structuredClone(target) as KubeObject & { spec: Record<string, unknown> }
    bySelector.spec['namespaceSelector'] = { matchLabels: { stage: 'prod' } }
    const selected = (objs: KubeObject[]) => syncRequest(controllerFor('kollect-targets'), bySelector, relatedMap(
      [TYPES.scope, TYPES.profile, TYPES.deployment], { [TYPES.profile]: [profile], [TYPES.deployment]: objs },
    ))
    assert.equal((await sync(server.url, selected(objects))).status.extractedCount, 3)
    assert.equal((await sync(server.url, selected(objects))).status.extractedCount, 3)
    const afterProd = await reused(server)
    assert.equal((await sync(server.url, selected([]))).status.extractedCount, 0, 'the namespace no longer matches')
    assert.equal(await reused(server), afterProd)

    // Of all of these, only the repeated bodies were reused.
    assert.equal(afterProd, start + 1)
  })

  test('the same body again after syncs in which every object changed (records not kept) is still answered from before', async () => {
    const target = structuredClone(loadExampleCr('target-deployments.yaml'))
    Object.assign(target.metadata as object, { name: 'rollouts', uid: 'uid-rollouts' })
    const objects = deployments()
    const rollout = (round: number) => objects.forEach((o, i) => ((o.metadata as { resourceVersion: string }).resourceVersion = String(round * 1000 + i)))
    await sync(server.url, targetSyncRequest(objects, { target }))
    // Two syncs in which every object changed: the second one's records are not kept (incremental-syncs.test.ts).
    rollout(1)
    await sync(server.url, targetSyncRequest(objects, { target }))
    rollout(2)
    const last = await sync(server.url, targetSyncRequest(objects, { target }))
    const start = await reused(server)
    const count = reports.length
    assert.deepEqual(await sync(server.url, targetSyncRequest(objects, { target })), last)
    assert.equal(await reused(server), start + 1)
    assert.equal(reports.length, count, 'nothing sent')
  })

  test('an answer whose report the exporter did not take whole is not kept: the same body runs again', async () => {
    const objects = [deployment(7, { name: 'stale-one' })]
    const target = structuredClone(loadExampleCr('target-deployments.yaml'))
    ;(target.metadata as Record<string, unknown>)['name'] = 'refusals'
    ;(target.metadata as Record<string, unknown>)['uid'] = 'uid-refusals'
    ;(target.metadata as Record<string, unknown>)['generation'] = 1
    // The exporter holds a newer generation of this target: the report of generation 1 is stale.
    await report({ target: { namespace: 'team-a', name: 'refusals' }, uid: 'uid-refusals', generation: 2, checksum: 'x', items: [], failedKeys: [], sequence: Number.MAX_SAFE_INTEGER })
    const start = await reused(server)
    const count = reports.length
    await sync(server.url, targetSyncRequest(objects, { target }))
    await sync(server.url, targetSyncRequest(objects, { target }))
    assert.equal(reports.length, count + 2, 'both syncs reported')
    assert.equal(await reused(server), start)
  })
})

describe('with the exporter as its own process, restarted', () => {
  let exporter: EntryProcess
  let server: Omit<HooksServer, 'exporter'>
  const startExporter = async () => {
    exporter = await spawnEntry('main-exporter', { KOLLECT_HOOK_AUTH: 'none' })
    await pollUntil('the exporter answers', async () => (await fetch(`http://127.0.0.1:${exporter.exporterPort}/healthz`).catch(() => null))?.ok === true, { timeoutMs: 20_000, proc: exporter.proc })
  }
  before(async () => {
    await startExporter()
    server = await startHooksServerWith(`http://127.0.0.1:${exporter.exporterPort}`)
  })
  after(async () => {
    await server?.close()
    await exporter?.close()
  })

  test('an exporter that lost the report (a restart) is sent it again by the next identical resync', async () => {
    const body = targetSyncRequest(deployments())
    const first = await sync(server.url, body)
    assert.deepEqual(await sync(server.url, body), first)
    assert.equal(await reused(server), 1)

    // The same port, a new process with nothing held.
    const port = exporter.exporterPort
    await exporter.close()
    exporter = await spawnEntry('main-exporter', { KOLLECT_HOOK_AUTH: 'none', KOLLECT_EXPORTER_PORT: String(port) })
    await pollUntil('the new exporter answers', async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.ok === true, { timeoutMs: 20_000, proc: exporter.proc })
    const held = { target: { namespace: 'team-a', name: 'prod-deploys' }, generation: 1, checksum: first.status.checksum ?? '' }
    const ask = async () => ((await (await fetch(`http://127.0.0.1:${port}/v1/targets/held`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...held, uid: 'uid-prod-deploys' }) })).json()) as { held: boolean }).held
    assert.equal(await ask(), false, 'the new exporter holds nothing')

    assert.deepEqual(await sync(server.url, body), first)
    assert.equal(await reused(server, 'exporter-lacks'), 1)
    assert.equal(await ask(), true, 'the resync sent the report again')
    assert.deepEqual(await sync(server.url, body), first)
    assert.equal(await reused(server), 2)
  })
})
