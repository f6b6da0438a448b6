import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { validateStatus } from '../../api/crd-schemas.js'
import type { InventoryStatus, KubeObject, TargetStatus } from '../../api/types.js'
import { NOT_WATCHED_RESYNC_SECONDS } from '../../hooks/target.js'
import { exampleRequests } from '../support/gen-examples.js'
import { get, post, startHooksServer, statusOf, type HooksServer } from '../support/hooks-server.js'
import {
  ROOT, TYPES, controllerFor, deployment, goJson, loadExampleCr, relatedMap, syncRequest, targetSyncRequest,
} from '../support/metacontroller.js'

// The hook contract, over a real socket: requests shaped exactly as Metacontroller sends them.
const EXAMPLES = path.join(ROOT, 'examples', 'requests')
const GOLDEN = path.join(ROOT, 'test', 'golden')
const ROUTES: Record<string, string> = {
  'target-customize': '/hooks/targets/customize',
  'target-sync': '/hooks/targets/sync',
  'target-sync-changed': '/hooks/targets/sync',
  'inventory-customize': '/hooks/inventories/customize',
  'inventory-sync': '/hooks/inventories/sync',
  'inventory-finalize': '/hooks/inventories/finalize',
  'profile-sync': '/hooks/profiles/sync',
  'sink-customize': '/hooks/sinks/customize',
  'sink-sync': '/hooks/sinks/sync',
}

let server: HooksServer
before(async () => {
  server = await startHooksServer({ KOLLECT_HOOK_BODY_LIMIT: String(256 * 1024) })
})
after(async () => {
  await server.close()
})

describe('examples and golden responses', () => {
  test('checked-in example requests are what the generator produces', () => {
    for (const [name, body] of Object.entries(exampleRequests())) {
      assert.equal(readFileSync(path.join(EXAMPLES, `${name}.json`), 'utf8'), goJson(body) + '\n', `examples/requests/${name}.json is stale: run npm run examples`)
    }
  })

  test('every example request gets its golden response', async () => {
    const fresh = await startHooksServer()
    try {
      const update = process.env['KOLLECT_UPDATE_GOLDEN'] === '1'
      if (update) mkdirSync(GOLDEN, { recursive: true })
      const names = readdirSync(EXAMPLES).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)).sort()
      assert.deepEqual(names, Object.keys(ROUTES).sort())
      // Order matters for the exporter state that inventory status reports.
      for (const name of ['profile-sync', 'sink-customize', 'sink-sync', 'target-customize', 'target-sync', 'inventory-customize', 'inventory-sync', 'target-sync-changed', 'inventory-finalize']) {
        const res = await post(fresh.url + ROUTES[name], readFileSync(path.join(EXAMPLES, `${name}.json`)))
        assert.equal(res.status, 200, `${name}: ${res.text}`)
        const file = path.join(GOLDEN, `${name}.response.json`)
        const pretty = JSON.stringify(res.json(), null, 2) + '\n'
        if (update) writeFileSync(file, pretty)
        assert.ok(existsSync(file), `missing golden file ${file}; run with KOLLECT_UPDATE_GOLDEN=1`)
        assert.equal(pretty, readFileSync(file, 'utf8'), `${name} differs from its golden response`)
      }
    } finally {
      await fresh.close()
    }
  })
})

interface InventoryAnswer {
  status: InventoryStatus
  resyncAfterSeconds?: number
}

/** POST an example (or its parsed, edited body) to its route; the answer's Synced condition as "True Exported". */
async function sendExample(url: string, name: string, edit?: (body: { parent: { spec: Record<string, unknown> } }) => void): Promise<InventoryAnswer & { synced: string }> {
  const raw = readFileSync(path.join(EXAMPLES, `${name}.json`), 'utf8')
  let body = raw
  if (edit) {
    const parsed = JSON.parse(raw) as { parent: { spec: Record<string, unknown> } }
    edit(parsed)
    body = JSON.stringify(parsed)
  }
  const res = await post(url + ROUTES[name], body)
  assert.equal(res.status, 200, `${name}: ${res.text}`)
  const answer = res.json() as InventoryAnswer
  if (name.startsWith('inventory')) assert.deepEqual(validateStatus('KollectInventory', answer.status), { valid: true })
  const synced = answer.status.conditions?.find((c) => c.type === 'Synced')
  return { ...answer, synced: `${synced?.status} ${synced?.reason}` }
}

describe('inventory status follows the export (the README walkthrough)', () => {
  test('a target change sent with the inventory sync at once is Pending with the old checksum, never Synced', async () => {
    const fresh = await startHooksServer()
    try {
      await sendExample(fresh.url, 'target-sync')
      const first = await sendExample(fresh.url, 'inventory-sync')
      assert.equal(first.synced, 'False Pending')
      assert.equal(first.resyncAfterSeconds, 11, 'the 10s debounce plus 1 s')
      fresh.exporter.flush() // stands in for the debounce, as npm run demo does
      await fresh.exporter.idle()
      const exported = await sendExample(fresh.url, 'inventory-sync')
      assert.equal(exported.synced, 'True Exported')
      assert.equal('resyncAfterSeconds' in exported, false)

      await sendExample(fresh.url, 'target-sync-changed')
      const during = await sendExample(fresh.url, 'inventory-sync')
      assert.equal(during.synced, 'False Pending', 'kubectl wait --for=condition=Synced must not return before the change is written')
      assert.equal(during.status.checksum, exported.status.checksum, 'still the checksum the sink holds')
      assert.ok(during.resyncAfterSeconds !== undefined && during.resyncAfterSeconds >= 2 && during.resyncAfterSeconds <= 11, `resyncAfterSeconds ${during.resyncAfterSeconds}`)

      fresh.exporter.flush()
      await fresh.exporter.idle()
      const after = await sendExample(fresh.url, 'inventory-sync')
      assert.equal(after.synced, 'True Exported')
      assert.notEqual(after.status.checksum, exported.status.checksum)
    } finally {
      await fresh.close()
    }
  })

  test('following resyncAfterSeconds alone, as Metacontroller does, reaches Synced without another event', async () => {
    const fresh = await startHooksServer()
    try {
      const debounce2s = (body: { parent: { spec: Record<string, unknown> } }) => { body.parent.spec['debounce'] = '2s' }
      await sendExample(fresh.url, 'target-sync')
      let answer = await sendExample(fresh.url, 'inventory-sync', debounce2s)
      assert.equal(answer.synced, 'False Pending')
      assert.equal(answer.resyncAfterSeconds, 3)
      const started = Date.now()
      const calls: string[] = []
      while (answer.resyncAfterSeconds !== undefined) {
        // Generous: a loaded machine may still be writing the commit at the first callback.
        assert.ok(Date.now() - started < 20_000, `still not Synced after 20 s: ${calls.join(', ')}`)
        await new Promise((r) => setTimeout(r, (answer.resyncAfterSeconds as number) * 1000))
        answer = await sendExample(fresh.url, 'inventory-sync', debounce2s)
        calls.push(`${answer.synced} resync=${answer.resyncAfterSeconds}`)
      }
      assert.equal(answer.synced, 'True Exported', calls.join(', '))
      assert.equal(answer.status.itemCount, 3)
    } finally {
      await fresh.close()
    }
  })
})

describe('Metacontroller request shapes', () => {
  test('the same sync request twice gives byte-identical responses', async () => {
    const body = goJson(targetSyncRequest([deployment(1), deployment(2), deployment(3, { tier: 'backend' })]))
    const a = await post(server.url + '/hooks/targets/sync', body)
    const b = await post(server.url + '/hooks/targets/sync', body)
    assert.equal(a.status, 200)
    assert.equal(a.text, b.text)
    const status = statusOf(a)
    assert.equal(status.matchedCount, 2)
    assert.deepEqual(validateStatus('KollectTarget', status), { valid: true })
  })

  test('v2 keys, managedFields and Go escapes are read as data', async () => {
    const d = deployment(7, { name: 'escapes' })
    ;(d.metadata as Record<string, unknown>)['annotations'] = { note: '<b>a & b</b>' }
    const body = goJson(targetSyncRequest([d]))
    assert.match(body, /\\u003cb\\u003ea \\u0026 b/)
    assert.match(body, /"managedFields"/)
    assert.match(body, /"team-a\/escapes"/)
    const res = await post(server.url + '/hooks/targets/sync', body)
    assert.equal(res.status, 200)
    assert.equal(statusOf(res).extractedCount, 1)
  })

  test('core kinds are keyed Kind.version (Pod.v1) and selected', async () => {
    const target = loadExampleCr('target-deployments.yaml')
    target['spec'] = { resource: { version: 'v1', kind: 'Pod' }, profileRef: { name: 'pods' } }
    const profile = {
      apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectProfile', metadata: { name: 'pods', namespace: 'team-a', uid: 'p', generation: 1 },
      spec: { attributes: [{ name: 'node', jsonPath: '$.spec.nodeName', optional: true }, { name: 'phase', cel: 'object.status.phase' }] },
    }
    const pod = (name: string, ns: string): KubeObject => ({
      apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: ns, uid: `pod-${name}` }, spec: { nodeName: 'node-1' }, status: { phase: 'Running' },
    })
    const related = relatedMap([TYPES.scope, TYPES.profile, TYPES.pod], { [TYPES.profile]: [profile], [TYPES.pod]: [pod('a', 'team-a'), pod('b', 'team-a'), pod('c', 'team-c')] })
    assert.deepEqual(Object.keys(related[TYPES.pod] ?? {}), ['team-a/a', 'team-a/b', 'team-c/c'])
    const res = await post(server.url + '/hooks/targets/sync', goJson(syncRequest(controllerFor('kollect-targets'), target, related)))
    const status = statusOf(res)
    assert.equal(status.matchedCount, 2, 'team-c is outside the target namespace')
    assert.deepEqual(status.resource, { group: '', version: 'v1', kind: 'Pod', plural: 'pods' })
  })

  test('cluster-scoped objects keyed by bare name are selected when the scope allows all namespaces', async () => {
    const target = loadExampleCr('target-deployments.yaml')
    target['spec'] = { resource: { version: 'v1', kind: 'Namespace' }, profileRef: { name: 'ns' } }
    const profile = {
      apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectProfile', metadata: { name: 'ns', namespace: 'team-a', generation: 1 },
      spec: { attributes: [{ name: 'owner', cel: 'object.metadata.?labels.owner.orValue("")' }] },
    }
    const scope = {
      apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectScope', metadata: { name: 'wide', namespace: 'team-a' },
      spec: { allowedNamespaces: ['*'], allowedResources: [{ group: '', kind: 'Namespace' }] },
    }
    const ns = (name: string): KubeObject => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, uid: `ns-${name}`, labels: { owner: 'x' } } })
    const related = relatedMap([TYPES.scope, TYPES.profile, TYPES.namespace], { [TYPES.profile]: [profile], [TYPES.scope]: [scope], [TYPES.namespace]: [ns('team-a'), ns('team-b')] })
    assert.deepEqual(Object.keys(related[TYPES.namespace] ?? {}), ['team-a', 'team-b'])
    const res = await post(server.url + '/hooks/targets/sync', goJson(syncRequest(controllerFor('kollect-targets'), target, related)))
    assert.equal(statusOf(res).extractedCount, 2)

    const noScope = relatedMap([TYPES.scope, TYPES.profile, TYPES.namespace], { [TYPES.profile]: [profile], [TYPES.namespace]: [ns('team-a')] })
    const denied = await post(server.url + '/hooks/targets/sync', goJson(syncRequest(controllerFor('kollect-targets'), target, noScope)))
    const conditions = statusOf(denied).conditions
    assert.equal(conditions?.[0]?.reason, 'ScopeNamespaceDenied')
  })

  test('every declared type present as {} is an empty selection, not an error', async () => {
    const res = await post(server.url + '/hooks/targets/sync', goJson(targetSyncRequest([])))
    assert.equal(res.status, 200)
    const status = statusOf(res)
    assert.equal(status.matchedCount, 0)
    assert.equal(status.checksum, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
  })

  test('no entry at all for the target\'s type (a customize answer older than the kind) comes back through the extraction child as ResourceNotWatched with resyncAfterSeconds', async () => {
    const related = relatedMap([TYPES.scope, TYPES.profile], { [TYPES.profile]: [loadExampleCr('profile-deployments.yaml')] })
    const res = await post(server.url + '/hooks/targets/sync', goJson(syncRequest(controllerFor('kollect-targets'), loadExampleCr('target-deployments.yaml'), related)))
    assert.equal(res.status, 200)
    const body = res.json() as { status: TargetStatus; resyncAfterSeconds?: number }
    assert.deepEqual(Object.keys(body).sort(), ['children', 'resyncAfterSeconds', 'status'])
    assert.equal(body.resyncAfterSeconds, NOT_WATCHED_RESYNC_SECONDS)
    assert.deepEqual(body.status.conditions?.map((c) => `${c.type}=${c.status} ${c.reason}`), ['Ready=False ResourceNotWatched'])
  })

  test('responses carry only the keys a strict v2 decoder accepts', async () => {
    const sync = (await post(server.url + '/hooks/targets/sync', goJson(targetSyncRequest([deployment(1)])))).json() as Record<string, unknown>
    assert.deepEqual(Object.keys(sync).sort(), ['children', 'status'])
    assert.deepEqual(sync['children'], [])
    for (const name of ['target-customize', 'inventory-customize', 'sink-customize']) {
      const customize = (await post(server.url + ROUTES[name], readFileSync(path.join(EXAMPLES, `${name}.json`)))).json() as { relatedResources: Record<string, unknown>[] }
      assert.ok(customize.relatedResources.length > 0, name)
      for (const rule of customize.relatedResources) {
        for (const k of Object.keys(rule)) assert.ok(['apiVersion', 'resource', 'labelSelector', 'namespaceSelector', 'namespace', 'names'].includes(k), `${name}: ${k}`)
        if (rule['names']) assert.equal(rule['labelSelector'], undefined, 'names with a selector is an error in Metacontroller')
      }
    }
  })
})

describe('bad input gets a clear 4xx or a status condition, and the server keeps serving', () => {
  const cases: { reason: string; route: string; body: string | Buffer; status: number; code?: string; message?: RegExp }[] = [
    { reason: 'invalid JSON is a 400', route: '/hooks/targets/sync', body: '{"parent":', status: 400, code: 'KOLLECT_ERR_HOOK_BAD_JSON' },
    { reason: 'an empty body is a 400', route: '/hooks/targets/sync', body: '', status: 400, code: 'KOLLECT_ERR_HOOK_BAD_JSON' },
    { reason: 'a wrong type names the field', route: '/hooks/targets/sync', body: '{"parent":"x"}', status: 400, code: 'KOLLECT_ERR_HOOK_BAD_REQUEST', message: /parent/ },
    { reason: 'a parent without metadata.name names the field', route: '/hooks/inventories/sync', body: '{"parent":{"metadata":{}}}', status: 400, code: 'KOLLECT_ERR_HOOK_BAD_REQUEST', message: /name/ },
    { reason: 'related must be a map of maps', route: '/hooks/targets/sync', body: '{"parent":{"metadata":{"name":"a"}},"related":{"Pod.v1":[1]}}', status: 400, code: 'KOLLECT_ERR_HOOK_BAD_REQUEST', message: /related/ },
    { reason: 'finalizing must be a boolean', route: '/hooks/targets/sync', body: '{"parent":{"metadata":{"name":"a"}},"finalizing":"yes"}', status: 400, code: 'KOLLECT_ERR_HOOK_BAD_REQUEST', message: /finalizing/ },
    { reason: 'an unknown route is a 404', route: '/hooks/widgets/sync', body: '{}', status: 404, code: 'KOLLECT_ERR_HOOK_NOT_FOUND' },
    { reason: 'a body over the limit is a 413', route: '/hooks/targets/sync', body: '{"x":"' + 'a'.repeat(300 * 1024) + '"}', status: 413, code: 'KOLLECT_ERR_HOOK_BODY_TOO_LARGE' },
    { reason: 'a __proto__ key is refused', route: '/hooks/targets/sync', body: '{"parent":{"metadata":{"name":"a"}},"__proto__":{"polluted":1}}', status: 400, code: 'KOLLECT_ERR_HOOK_BAD_JSON' },
  ]
  for (const c of cases) {
    test(c.reason, async () => {
      const res = await post(server.url + c.route, c.body)
      assert.equal(res.status, c.status, res.text)
      const body = res.json() as { code: string; message: string }
      if (c.code) assert.equal(body.code, c.code)
      assert.ok(body.message.length > 0)
      if (c.message) assert.match(body.message, c.message)
      assert.equal((await get(server.url + '/healthz')).status, 200)
      assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
    })
  }

  test('a CEL syntax error becomes a profile condition with its position', async () => {
    const profile = loadExampleCr('profile-deployments.yaml')
    ;(profile['spec'] as { attributes: { name: string; cel?: string }[] }).attributes[0] = { name: 'images', cel: 'object.spec.template.spec.containers.map(c, c.image' }
    const res = await post(server.url + '/hooks/profiles/sync', goJson(syncRequest(controllerFor('kollect-profiles'), profile, {})))
    assert.equal(res.status, 200)
    const ready = statusOf(res).conditions?.[0]
    assert.equal(ready?.status, 'False')
    assert.equal(ready?.reason, 'InvalidExpression')
    assert.match(ready?.message ?? '', /spec\.attributes\[0\]\.cel \(images\): .* at position \d+/)
  })

  test('a JSONPath filter that tries to run code becomes a condition and runs nothing', async () => {
    const profile = loadExampleCr('profile-deployments.yaml')
    ;(profile['spec'] as { attributes: unknown[] }).attributes = [{ name: 'x', jsonPath: "$..[?(@.constructor.constructor('return process')().exit(3))]" }]
    const res = await post(server.url + '/hooks/targets/sync', goJson(targetSyncRequest([deployment(1)], { profile })))
    assert.equal(res.status, 200)
    const ready = statusOf(res).conditions?.[0]
    assert.equal(ready?.reason, 'ProfileInvalid')
    assert.match(ready?.message ?? '', /jsonPath/)
    assert.equal((await get(server.url + '/healthz')).status, 200)
  })
})

describe('hook authentication', () => {
  test('with a token, hooks need the bearer token; health and metrics stay open', async () => {
    const s = await startHooksServer({ KOLLECT_HOOK_TOKEN: 's3cret-token' })
    try {
      const body = readFileSync(path.join(EXAMPLES, 'profile-sync.json'))
      const none = await post(s.url + '/hooks/profiles/sync', body)
      assert.equal(none.status, 401)
      assert.deepEqual(none.json(), { code: 'KOLLECT_ERR_HOOK_UNAUTHORIZED', message: 'unauthorized' })
      assert.equal((await post(s.url + '/hooks/profiles/sync', body, { Authorization: 'Bearer wrong' })).status, 401)
      assert.equal((await post(s.url + '/hooks/profiles/sync', body, { Authorization: 's3cret-token' })).status, 401)
      assert.equal((await post(s.url + '/hooks/profiles/sync', body, { Authorization: 'Bearer s3cret-token' })).status, 200)
      assert.equal((await get(s.url + '/healthz')).status, 200)
      assert.equal((await get(s.url + '/metrics')).status, 200)
    } finally {
      await s.close()
    }
  })
})
