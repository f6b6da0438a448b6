import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import type { KubeObject } from '../../api/types.js'
import { reportBody } from '../../server/exporter-api/client.js'
import { buildExporterApp, reportBodyLimit } from '../../server/exporter-api/server.js'
import { createLogger } from '../../server/process/logger.js'
import { createMetrics } from '../../server/process/metrics.js'
import { startHooksServer, type HooksServer } from '../support/hooks-server.js'
import { TYPES, controllerFor, deployment, loadExampleCr, relatedMap, syncRequest, targetSyncRequest } from '../support/metacontroller.js'
import { ROUTES, exportThroughFileSink, fileSink, inventorySync, nestedIn, profileWith, send, sleep, targetWith } from './support.js'

// Deep input: JSON.parse nests as deep as it is told, but everything after it (schema checks,
// the status echo, structured clone, canonical JSON) recurses. A body nesting deeper than
// KOLLECT_MAX_JSON_DEPTH (512) is a 400 before any hook or exporter state is touched.

const LIMIT = 512
const TOO_DEEP = { code: 'KOLLECT_ERR_HOOK_TOO_DEEP', message: `request body nests deeper than the limit of ${LIMIT} levels` }

/** Nesting depth of parsed JSON (objects and arrays), counted independently of the server. */
function depthOf(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0
  return 1 + Math.max(0, ...Object.values(value).map(depthOf))
}

/** `text` with "DEEP" replaced by nested arrays so that the whole body nests exactly `total` deep. */
function nestedTo(text: string, total: number): string {
  const at = depthOf(JSON.parse(nestedIn(text, 'DEEP', 1000))) - 1000
  const body = nestedIn(text, 'DEEP', total - at)
  assert.equal(depthOf(JSON.parse(body)), total)
  return body
}

const withSpecField = (o: KubeObject): KubeObject => ({ ...o, spec: { ...(o['spec'] as Record<string, unknown>), extra: 'DEEP' } })
const finalizeTargetBody = () => {
  const req = targetSyncRequest([deployment(1), deployment(2)]) as { parent: KubeObject; finalizing: boolean }
  req.parent = { ...req.parent, status: { deep: 'DEEP' } }
  req.finalizing = true
  return JSON.stringify(req)
}
const inventoryWithDeepSink = (name: string) => JSON.stringify(inventorySync({
  name,
  spec: { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name: 'files' }], debounce: '1ms', maxWait: '1ms' },
  sinks: [withSpecField(fileSink('team-a', 'files'))],
}))

let server: HooksServer
let exporterApi: FastifyInstance
let exporterUrl: string
before(async () => {
  server = await startHooksServer()
  // The exporter sidecar's API, over the same exporter the hooks server feeds.
  exporterApi = await buildExporterApp({
    exporter: server.exporter, auth: { mode: 'none', reason: 'test' }, bodyLimit: 64 * 1024 * 1024, reportBodyLimit: reportBodyLimit(server.exporter.budgetBytes.namespace),
    maxJsonDepth: LIMIT, logger: createLogger('silent', 'test'), metrics: createMetrics('exporter'),
  })
  await exporterApi.listen({ port: 0, host: '127.0.0.1' })
  const address = exporterApi.server.address()
  exporterUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
})
after(async () => {
  await exporterApi?.close()
  await server?.close()
})

describe('the findings', () => {
  test('finalize with a 10,000-deep parent.status is a 400, and the target keeps its items in the exporter', async () => {
    assert.equal((await send(server.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([deployment(1), deployment(2)])) })).status, 200)
    await exportThroughFileSink(server, { namespace: 'team-a', inventory: 'fin-inv', target: 'prod-deploys', sink: 'fin-files' })
    const before = server.exporter.inventoryState({ namespace: 'team-a', name: 'fin-inv' })
    assert.equal(before?.itemCount, 2)

    const res = await send(server.url, ROUTES.targetFinalize, { body: nestedIn(finalizeTargetBody(), 'DEEP', 10_000) })
    assert.equal(res.status, 400, res.text)
    assert.deepEqual(res.json(), TOO_DEEP)

    // Had removeTarget run, the inventory would be waiting for the target again.
    await sleep(20)
    server.exporter.flush()
    await server.exporter.idle()
    assert.deepEqual(server.exporter.inventoryState({ namespace: 'team-a', name: 'fin-inv' }), before)
  })

  test('inventory sync with a 100,000-deep field in a related KollectSink is a 400, and the exporter holds nothing for it', async () => {
    const res = await send(server.url, ROUTES.inventorySync, { body: nestedIn(inventoryWithDeepSink('deep-sink-inv'), 'DEEP', 100_000) })
    assert.equal(res.status, 400, res.text)
    assert.deepEqual(res.json(), TOO_DEEP)
    await sleep(20)
    assert.equal(server.exporter.inventoryState({ namespace: 'team-a', name: 'deep-sink-inv' }), null)
    assert.equal((await send(server.url, '/healthz', { method: 'GET' })).status, 200)
  })
})

describe('the bound, exactly', () => {
  test(`an inventory sync nesting exactly ${LIMIT} deep is applied whole; ${LIMIT + 1} is refused and applies nothing`, async () => {
    const ok = await send(server.url, ROUTES.inventorySync, { body: nestedTo(inventoryWithDeepSink('at-limit'), LIMIT) })
    assert.equal(ok.status, 200, ok.text.slice(0, 300))
    assert.equal(server.exporter.inventoryState({ namespace: 'team-a', name: 'at-limit' })?.sinks.length, 1)

    const over = await send(server.url, ROUTES.inventorySync, { body: nestedTo(inventoryWithDeepSink('over-limit'), LIMIT + 1) })
    assert.equal(over.status, 400, over.text)
    assert.deepEqual(over.json(), TOO_DEEP)
    assert.equal(server.exporter.inventoryState({ namespace: 'team-a', name: 'over-limit' }), null)
  })

  test(`a target sync (parsed in a worker) nesting exactly ${LIMIT} deep extracts; ${LIMIT + 1} is refused`, async () => {
    const d = deployment(1)
    ;(d.metadata as Record<string, unknown>)['annotations'] = { deep: 'DEEP' }
    const text = JSON.stringify(targetSyncRequest([d, deployment(2)]))
    const ok = await send(server.url, ROUTES.targetSync, { body: nestedTo(text, LIMIT) })
    assert.equal(ok.status, 200, ok.text.slice(0, 300))
    assert.equal((ok.json() as { status: { extractedCount: number } }).status.extractedCount, 2)
    const over = await send(server.url, ROUTES.targetSync, { body: nestedTo(text, LIMIT + 1) })
    assert.equal(over.status, 400, over.text)
    assert.deepEqual(over.json(), TOO_DEEP)
  })

  test('brackets inside strings, escaped quotes and backslashes do not count as nesting', async () => {
    const d = deployment(1)
    ;(d.metadata as Record<string, unknown>)['annotations'] = { a: '['.repeat(5000), b: '\\"{{{{'.repeat(2000), c: '\\\\', d: '"]]]]' + '{'.repeat(1000) }
    const res = await send(server.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([d])) })
    assert.equal(res.status, 200, res.text.slice(0, 300))
  })

  test('KOLLECT_MAX_JSON_DEPTH sets the bound: 64 still takes real requests', async () => {
    const small = await startHooksServer({ KOLLECT_MAX_JSON_DEPTH: '64' })
    try {
      assert.equal((await send(small.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([deployment(1), deployment(2)])) })).status, 200)
      assert.equal((await send(small.url, ROUTES.inventorySync, { body: JSON.stringify(inventorySync()) })).status, 200)
      const over = await send(small.url, ROUTES.inventorySync, { body: nestedTo(inventoryWithDeepSink('small'), 65) })
      assert.deepEqual([over.status, over.json()], [400, { code: 'KOLLECT_ERR_HOOK_TOO_DEEP', message: 'request body nests deeper than the limit of 64 levels' }])
    } finally {
      await small.close()
    }
  })
})

describe('every hook route and the exporter API', () => {
  const deepParent = (controller: Parameters<typeof controllerFor>[0], cr: string) =>
    nestedIn(JSON.stringify(syncRequest(controllerFor(controller), withSpecField(loadExampleCr(cr)), relatedMap([TYPES.scope], {}))), 'DEEP', 100_000)
  const ROUTE_BODIES: [string, string][] = [
    [ROUTES.targetCustomize, deepParent('kollect-targets', 'target-deployments.yaml')],
    [ROUTES.targetSync, deepParent('kollect-targets', 'target-deployments.yaml')],
    [ROUTES.targetFinalize, deepParent('kollect-targets', 'target-deployments.yaml')],
    [ROUTES.inventoryCustomize, deepParent('kollect-inventories', 'inventory.yaml')],
    [ROUTES.inventorySync, deepParent('kollect-inventories', 'inventory.yaml')],
    [ROUTES.inventoryFinalize, deepParent('kollect-inventories', 'inventory.yaml')],
    [ROUTES.profileSync, deepParent('kollect-profiles', 'profile-deployments.yaml')],
    [ROUTES.sinkSync, nestedIn(JSON.stringify(syncRequest(controllerFor('kollect-sinks'), withSpecField(fileSink('team-a', 'deep')), {})), 'DEEP', 100_000)],
  ]
  for (const [route, body] of ROUTE_BODIES) {
    test(`${route}: 100,000 deep is a 400 naming the limit`, async () => {
      const res = await send(server.url, route, { body })
      assert.equal(res.status, 400, res.text.slice(0, 300))
      assert.deepEqual(res.json(), TOO_DEEP)
    })
  }

  test('the exporter API refuses deep compositions and reports with a 400 and applies nothing', async () => {
    const composition = JSON.stringify({
      inventory: { namespace: 'team-a', name: 'api-deep' }, generation: 1, targets: [{ namespace: 'team-a', name: 'prod-deploys' }],
      sinks: [{ namespace: 'team-a', name: 'files', spec: { type: 'file', extra: 'DEEP' } }], debounceMs: 1, maxWaitMs: 1, suspend: false,
    })
    for (const route of ['/v1/inventories/apply', '/v1/inventories/finalize', '/v1/sinks/check']) {
      const res = await send(exporterUrl, route, { body: nestedIn(composition, 'DEEP', 100_000) })
      assert.equal(res.status, 400, `${route}: ${res.text.slice(0, 300)}`)
      assert.deepEqual(res.json(), TOO_DEEP)
    }
    assert.equal(server.exporter.inventoryState({ namespace: 'team-a', name: 'api-deep' }), null)

    const report = JSON.stringify({ target: { namespace: 'team-a', name: 'api-deep-target' }, generation: 1, checksum: 'x', items: [{ attributes: { a: 'DEEP' } }], failedKeys: [] })
    const res = await send(exporterUrl, '/v1/targets/report', { body: nestedIn(report, 'DEEP', 100_000) })
    assert.deepEqual([res.status, res.json()], [400, TOO_DEEP])
    // One level over its bound is refused, at the bound it is applied: the refusals are the bound's doing.
    assert.equal((await send(exporterUrl, '/v1/inventories/apply', { body: nestedTo(composition, LIMIT + 1) })).status, 400)
    assert.equal(server.exporter.inventoryState({ namespace: 'team-a', name: 'api-deep' }), null)
    const fine = await send(exporterUrl, '/v1/inventories/apply', { body: nestedTo(composition, LIMIT) })
    assert.equal(fine.status, 200, fine.text.slice(0, 300))
    assert.notEqual(server.exporter.inventoryState({ namespace: 'team-a', name: 'api-deep' }), null)
  })

  test('what the hooks send the exporter from requests at the limit fits the exporter API (same bound)', async () => {
    const sent: { route: string; body: unknown }[] = []
    const e = server.exporter
    const [report, apply] = [e.reportTarget.bind(e), e.applyInventory.bind(e)]
    e.reportTarget = async (r) => (sent.push({ route: '/v1/targets/report', body: r }), report(r))
    e.applyInventory = async (c) => (sent.push({ route: '/v1/inventories/apply', body: c }), apply(c))
    try {
      const d = deployment(1, { name: 'whole' })
      ;(d.metadata as Record<string, unknown>)['annotations'] = { deep: 'DEEP' }
      const profile = profileWith([{ name: 'name', cel: 'object.metadata.name' }, { name: 'whole', cel: '[[object]]', optional: true }])
      const target = nestedTo(JSON.stringify(targetSyncRequest([d], { target: targetWith({}, 'whole-target'), profile })), LIMIT)
      assert.equal((await send(server.url, ROUTES.targetSync, { body: target })).status, 200)
      assert.equal((await send(server.url, ROUTES.inventorySync, { body: nestedTo(inventoryWithDeepSink('forwarded'), LIMIT) })).status, 200)
    } finally {
      e.reportTarget = report
      e.applyInventory = apply
    }
    assert.deepEqual(sent.map((s) => s.route), ['/v1/targets/report', '/v1/inventories/apply'])
    for (const { route, body } of sent) {
      // As the hooks' HTTP client sends it: a report from the extraction child is JSON already.
      const wire = route === '/v1/targets/report' ? reportBody(body as Parameters<typeof reportBody>[0]) : JSON.stringify(body)
      const res = await send(exporterUrl, route, { body: typeof wire === 'string' ? wire : Buffer.from(wire) })
      assert.equal(res.status, 200, `${route}: ${res.text.slice(0, 300)}`)
    }
  })
})
