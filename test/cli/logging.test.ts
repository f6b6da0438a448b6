import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { loadConfig } from '../../server/process/config.js'
import { usesPretty } from '../../server/process/logger.js'
import { startKollectProcess, type KollectProcess } from '../support/kollect-process.js'
import { get, post } from '../support/hooks-server.js'
import { ROOT } from '../support/metacontroller.js'
import { pollUntil } from '../support/process.js'

// npm start's logs: a kubelet's probes and Prometheus' scrapes every few seconds must not bury
// the hook requests at info, and a terminal gets readable lines while pods keep JSON.

const PROBES = ['/healthz', '/readyz', '/metrics']

function output(k: KollectProcess): string {
  return readFileSync(path.join(k.dataDir, 'server.log'), 'utf8')
}

interface Line {
  level: number
  msg: string
  reqId?: string
  req?: { url: string }
}

test('probes, scrapes and successful hook requests log at debug, a refused hook request at info; JSON when stdout is no terminal', { timeout: 60_000 }, async () => {
  const k = await startKollectProcess({ KOLLECT_LOG_LEVEL: 'debug', KOLLECT_LOG_FORMAT: '' })
  try {
    for (const url of PROBES) assert.equal((await get(k.url + url)).status, 200, url)
    const hook = await post(`${k.url}/hooks/targets/sync`, readFileSync(path.join(ROOT, 'examples', 'requests', 'target-sync.json')), { 'content-type': 'application/json' })
    assert.equal(hook.status, 200)
    const lines = () => output(k).trim().split('\n').map((l) => JSON.parse(l) as Line)
    const hookIds = () => new Set(lines().filter((l) => l.req?.url === '/hooks/targets/sync').map((l) => l.reqId))
    await pollUntil('the hook request logged as completed', async () => lines().some((l) => l.msg === 'request completed' && hookIds().has(l.reqId)), { timeoutMs: 10_000, proc: k.proc })

    const all = lines()
    const probeIds = new Set(all.filter((l) => PROBES.includes(l.req?.url ?? '')).map((l) => l.reqId))
    assert.ok(probeIds.size >= PROBES.length, `every probe is still logged, at debug: ${[...probeIds].length}`)
    const probeLines = all.filter((l) => probeIds.has(l.reqId))
    assert.deepEqual([...new Set(probeLines.map((l) => l.level))], [20], JSON.stringify(probeLines.slice(0, 4)))
    const hookLines = all.filter((l) => hookIds().has(l.reqId) && /^(incoming request|request completed)$/.test(l.msg))
    assert.deepEqual(hookLines.map((l) => [l.msg, l.level]), [['incoming request', 20], ['request completed', 20]])

    // A refused call is what an operator must see: it completes at info.
    assert.equal((await post(`${k.url}/hooks/targets/sync`, '{}', { 'content-type': 'application/json', 'x-request-id': 'refused' })).status, 400)
    await pollUntil('the refused request logged as completed', async () => lines().some((l) => l.msg === 'request completed' && l.reqId === 'refused'), { timeoutMs: 10_000, proc: k.proc })
    const refused = lines().filter((l) => l.reqId === 'refused' && /^(incoming request|request completed)$/.test(l.msg))
    assert.deepEqual(refused.map((l) => [l.msg, l.level]), [['incoming request', 20], ['request completed', 30]])
  } finally {
    await k.close()
  }
})

/** An example hook request, with `edit` applied to its parsed body. */
function example(name: string, edit: (body: { parent: { spec: Record<string, unknown> } }) => void = () => {}): string {
  const body = JSON.parse(readFileSync(path.join(ROOT, 'examples', 'requests', `${name}.json`), 'utf8')) as { parent: { spec: Record<string, unknown> } }
  edit(body)
  return JSON.stringify(body)
}

test("the start line names the embedded default's repository where its first export really lands; successful hook calls log nothing at info", { timeout: 60_000 }, async () => {
  const k = await startKollectProcess({ KOLLECT_LOG_LEVEL: 'info', KOLLECT_LOG_FORMAT: 'json' })
  try {
    const running = output(k).trim().split('\n').map((l) => JSON.parse(l) as Line & { repo?: string }).find((l) => l.msg.startsWith('kollect is running'))
    const repo = running?.repo
    assert.equal(repo, path.join(k.dataDir, 'data', 'repo'), JSON.stringify(running))
    const json = { 'content-type': 'application/json' }
    assert.equal((await post(`${k.url}/hooks/targets/sync`, example('target-sync'), json)).status, 200)
    // No sinkRefs: the embedded default.
    const inventory = example('inventory-sync', (b) => {
      delete b.parent.spec['sinkRefs']
      b.parent.spec['debounce'] = '100ms'
    })
    assert.equal((await post(`${k.url}/hooks/inventories/sync`, inventory, json)).status, 200)
    await pollUntil('the default export', async () => existsSync(path.join(repo, '.git')), { timeoutMs: 15_000, proc: k.proc })
    // At info, successful hook calls log nothing; the export that changed the repository does.
    const info = () => output(k).trim().split('\n').map((l) => JSON.parse(l) as Line)
    await pollUntil('the export logged', async () => info().some((l) => l.msg === 'exported'), { timeoutMs: 10_000, proc: k.proc })
    assert.deepEqual(info().filter((l) => l.reqId !== undefined || l.req !== undefined), [])
  } finally {
    await k.close()
  }
})

test('KOLLECT_LOG_FORMAT=pretty prints readable lines, not JSON', { timeout: 60_000 }, async () => {
  const k = await startKollectProcess({ KOLLECT_LOG_LEVEL: 'info', KOLLECT_LOG_FORMAT: 'pretty' })
  try {
    const text = output(k)
    const running = text.split('\n').find((l) => l.includes('kollect is running'))
    assert.ok(running, text)
    assert.match(running, /INFO/)
    assert.throws(() => JSON.parse(running))
  } finally {
    await k.close()
  }
})

test('KOLLECT_LOG_FORMAT: auto is pretty on a terminal only; anything else is refused at start', () => {
  assert.equal(usesPretty('auto', true), true)
  assert.equal(usesPretty('auto', false), false)
  assert.equal(usesPretty('json', true), false)
  assert.equal(usesPretty('pretty', false), true)
  assert.equal(loadConfig({ HOST: '127.0.0.1', KOLLECT_HOOK_AUTH: 'none' }).logFormat, 'auto')
  assert.equal(loadConfig({ HOST: '127.0.0.1', KOLLECT_HOOK_AUTH: 'none', KOLLECT_LOG_FORMAT: 'json' }).logFormat, 'json')
  assert.throws(() => loadConfig({ KOLLECT_HOOK_AUTH: 'none', KOLLECT_LOG_FORMAT: 'fancy' }), /KOLLECT_LOG_FORMAT must be auto, json, pretty, got "fancy"/)
})
