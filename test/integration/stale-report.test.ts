import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { KubeObject, Snapshot } from '../../api/types.js'
import { get, type RawResponse } from '../support/hooks-server.js'
import { spawnEntry, type EntryProcess } from '../support/kollect-process.js'
import { deployment, targetSyncRequest } from '../support/metacontroller.js'
import { pollUntil } from '../support/process.js'
import { ROUTES, conditionOf, fileExportInventory, holdRequest, send, sleep, statusOf, targetWith, walk } from '../security/support.js'

// Finding 2 of issue 16: the exporter took any report, so a sync carrying older state that
// finished after a newer one moved the exported image back and observedGeneration backwards.
// Real processes: one exporter and two hooks replicas feeding it, as in a pod behind a Service.

const NS = 'team-a'
const INVENTORY = { namespace: NS, inventory: 'prod-inventory', target: 'prod-deploys', sink: 'files' }
const IMAGE = (tag: string) => `registry.example.com/payments/web-00001:${tag}`
// Objects of the target's kind that its label selector filters out: they make a sync parse and
// select for a while (about a second here) without changing its items.
const PADDING = 9_000

/** The Deployment web-00001 at a given image, object generation and resourceVersion. */
function web(tag: string, generation: number, resourceVersion: string): KubeObject {
  const d = deployment(1, { image: IMAGE(tag) })
  d.metadata = { ...d.metadata, generation, resourceVersion }
  return d
}

function targetSync(generation: number, objects: KubeObject[], uid?: string): string {
  const target = targetWith({})
  target.metadata = { ...target.metadata, generation, ...(uid ? { uid } : {}) }
  return JSON.stringify(targetSyncRequest(objects, { target }))
}

const padding = Array.from({ length: PADDING }, (_, i) => deployment(1000 + i, { tier: 'backend' }))

describe('stale target reports are dropped: hooks replicas and exporter as separate processes', { timeout: 120_000 }, () => {
  let exporter: EntryProcess
  let hooksA: EntryProcess
  let hooksB: EntryProcess
  let exporterData: string
  const urlOf = (p: EntryProcess) => `http://127.0.0.1:${p.port}`

  before(async () => {
    exporterData = mkdtempSync(path.join(os.tmpdir(), 'kollect-stale-'))
    exporter = await spawnEntry('main-exporter', { KOLLECT_HOOK_AUTH: 'none', KOLLECT_DATA_DIR: exporterData })
    const hooksEnv = { KOLLECT_HOOK_AUTH: 'none', HOST: '127.0.0.1', KOLLECT_EXPORTER_URL: `http://127.0.0.1:${exporter.exporterPort}` }
    ;[hooksA, hooksB] = await Promise.all([spawnEntry('main-hooks', hooksEnv), spawnEntry('main-hooks', hooksEnv)])
    await pollUntil('exporter', async () => (await get(`http://127.0.0.1:${exporter.exporterPort}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 20_000, proc: exporter.proc })
    for (const h of [hooksA, hooksB]) {
      await pollUntil('hooks', async () => (await get(`${urlOf(h)}/readyz`).catch(() => null))?.status === 200, { timeoutMs: 30_000, proc: h.proc })
    }
    const inventory = await send(urlOf(hooksA), ROUTES.inventorySync, { body: JSON.stringify(fileExportInventory(INVENTORY)) })
    assert.equal(inventory.status, 200, inventory.text)
  })
  after(async () => {
    await Promise.all([hooksA?.close(), hooksB?.close(), exporter?.close()])
    rmSync(exporterData, { recursive: true, force: true })
  })

  /** The snapshot in the file sink once the exporter has no change waiting. */
  async function exported(): Promise<Snapshot> {
    // A report the exporter accepted marked the inventory dirty before the hook answered, so
    // Synced True (nothing debounced, nothing in flight) means every accepted report is exported.
    await pollUntil('the export to settle', async () => {
      const res = await send(urlOf(hooksB), ROUTES.inventorySync, { body: JSON.stringify(fileExportInventory(INVENTORY)) })
      return conditionOf(res, 'Synced')?.status === 'True'
    }, { timeoutMs: 15_000 })
    const files = walk(path.join(exporterData, 'sinks')).filter((f) => f.endsWith('.json'))
    assert.equal(files.length, 1, files.join(', '))
    return JSON.parse(readFileSync(files[0] as string, 'utf8')) as Snapshot
  }
  const imageOf = (snapshot: Snapshot) => (snapshot.items.find((i) => i.name === 'web-00001')?.attributes['images'] as string[] | undefined)?.[0]

  test('a sync that arrived first but finished last (older image) does not replace the newer one', async (t) => {
    const older = Buffer.from(targetSync(4, [web('1.0.699', 3, '899000'), ...padding]))
    const newer = targetSync(4, [web('1.0.700', 4, '900000')])
    const done: string[] = []
    const at: Record<string, number> = {}
    const started = performance.now()
    // A arrives first (headers and the first KiB), then gets the rest; B is sent only once all of A is out.
    const a = holdRequest(urlOf(hooksA), ROUTES.targetSync, older)
    await sleep(50)
    a.finish()
    await a.sent
    const sentAt = performance.now()
    const answered = (name: string) => (r: RawResponse) => {
      done.push(name)
      at[name] = Math.round(performance.now() - sentAt)
      return r
    }
    const aAnswer = a.response.then(answered('A'))
    const bAnswer = send(urlOf(hooksB), ROUTES.targetSync, { body: newer }).then(answered('B'))
    const [ra, rb] = await Promise.all([aAnswer, bAnswer])
    t.diagnostic(`A (${older.length} bytes) sent in ${Math.round(sentAt - started)} ms; after that, B answered in ${at['B']} ms and A in ${at['A']} ms`)
    assert.equal(rb.status, 200, rb.text)
    assert.equal(ra.status, 200, ra.text)
    assert.deepEqual(done, ['B', 'A'], 'precondition: the newer sync (B) must answer before the older one (A); raise PADDING if this machine parses faster')

    // The finding first: the sinks must keep the newer image.
    assert.equal(imageOf(await exported()), IMAGE('1.0.700'))
    const b = statusOf(rb)
    assert.equal(conditionOf(rb, 'Stale'), undefined)
    assert.deepEqual(conditionOf(ra, 'Stale'), {
      type: 'Stale', status: 'True', reason: 'StaleReportDropped', observedGeneration: 4,
      message: 'the exporter holds a later report of generation 4; this one, of the same generation but an earlier sync, was dropped as stale',
    })
    const aStatus = statusOf(ra)
    assert.equal(aStatus['observedGeneration'], 4)
    assert.equal(aStatus['checksum'], b['checksum'], 'the stale answer carries the checksum the exporter holds (B\'s)')
    // The drop was decided by the arrival stamps, which only the exporter's log shows.
    const dropped = exporter.output().split('\n').filter((l) => l.includes('target report dropped')).map((l) => JSON.parse(l) as Record<string, number>)
    assert.equal(dropped.length, 1, exporter.output())
    assert.ok((dropped[0]?.['sequence'] ?? Infinity) < (dropped[0]?.['heldSequence'] ?? 0), JSON.stringify(dropped[0]))
  })

  test('generation 4 after generation 5 to one replica is dropped; status keeps generation 5', async () => {
    const five = await send(urlOf(hooksA), ROUTES.targetSync, { body: targetSync(5, [web('1.0.701', 5, '901000')]) })
    assert.equal(five.status, 200, five.text)
    assert.equal(conditionOf(five, 'Stale'), undefined)
    const four = await send(urlOf(hooksA), ROUTES.targetSync, { body: targetSync(4, [web('1.0.699', 3, '899000')]) })
    assert.equal(four.status, 200, four.text)
    const status = statusOf(four)
    assert.equal(status.observedGeneration, 5)
    assert.equal(status.checksum, statusOf(five).checksum)
    assert.deepEqual(conditionOf(four, 'Stale'), {
      type: 'Stale', status: 'True', reason: 'StaleReportDropped', observedGeneration: 5,
      message: 'the exporter holds a report of generation 5; this one, of generation 4, was dropped as stale',
    })
    assert.ok(status.conditions, 'the answer has conditions')
    for (const c of status.conditions) assert.equal(c.observedGeneration, 5)
    // Deterministic: the same stale sync answers byte for byte the same.
    const again = await send(urlOf(hooksA), ROUTES.targetSync, { body: targetSync(4, [web('1.0.699', 3, '899000')]) })
    assert.equal(again.text, four.text)
    assert.equal(imageOf(await exported()), IMAGE('1.0.701'))
    const metrics = (await get(`${urlOf(hooksA)}/metrics`)).text
    assert.match(metrics, /^kollect_stale_reports_total\{target="team-a\/prod-deploys",dropped="report"\} 3$/m)
  })

  test('a recreated target (new uid) at generation 1 is not stale against the old one; an object older than its held item is', async () => {
    const recreated = await send(urlOf(hooksB), ROUTES.targetSync, { body: targetSync(1, [web('1.0.702', 6, '902000')], 'uid-recreated') })
    assert.equal(recreated.status, 200, recreated.text)
    assert.equal(conditionOf(recreated, 'Stale'), undefined)
    assert.equal(statusOf(recreated).observedGeneration, 1)
    assert.equal(imageOf(await exported()), IMAGE('1.0.702'))

    // A later sync whose copy of web-00001 is older (metadata.generation 5 < 6): the item stays at 6.
    const older = await send(urlOf(hooksA), ROUTES.targetSync, { body: targetSync(1, [web('1.0.699', 5, '899000')], 'uid-recreated') })
    assert.equal(older.status, 200, older.text)
    assert.equal(conditionOf(older, 'Stale'), undefined)
    assert.deepEqual(conditionOf(older, 'Degraded'), {
      type: 'Degraded', status: 'True', reason: 'StaleItemsKept', observedGeneration: 1,
      message: '1 object was older (metadata.generation) than the exporter\'s items for them; the newer items were kept',
    })
    assert.equal(imageOf(await exported()), IMAGE('1.0.702'))
    assert.match((await get(`${urlOf(hooksA)}/metrics`)).text, /^kollect_stale_reports_total\{target="team-a\/prod-deploys",dropped="items"\} 1$/m)
  })
})
