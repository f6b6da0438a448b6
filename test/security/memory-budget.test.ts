import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { startKollectProcess, type KollectProcess } from '../support/kollect-process.js'
import { targetSyncRequest } from '../support/metacontroller.js'
import { ROUTES, conditionOf, doublingCel, fileExportInventory, outputHeavySync, profileWith, send, sleep, statusOf, targetWith, walk } from './support.js'

// Issue 8, finding 3: small target syncs whose CEL output is large (string doubling) made the
// exporter hold every target's items until the process died of heap exhaustion. Against the
// real `npm start` process, with a fixed heap: targets past their namespace's share are refused
// with Ready=False ResourceLimit, another namespace is still accepted and exported, the process
// stays up and its memory stays within a bound derived from the settings.
//
// Each process is held to the rule that sizes it (docs/operations.md, Sizing): the server, which
// holds the items, to idle + 5 × the item budget; each extraction child to idle + its heap limit.
// One bound over the whole group would let either rule hide a breach of the other, and moves with
// each Node release's per-process overhead (Node 24's children start ~12 MiB larger than 20's).

const MIB = 1024 * 1024
const BUDGET = 64 * MIB
const SHARE = 0.5
// The server's heap: its live data peaked at 147 MB here when team-b was exported (about 40 MiB
// of held items, plus the export's texts, about 5 times the 13.5 MiB inventory: docs/operations.md,
// "What else the memory holds"). At 160 MB a loaded CI run once died of heap exhaustion in that
// export (the test then read ECONNRESET); 224 MB leaves half again. The RSS bounds below, not the
// heap, are what the test holds the process to.
const HEAP_MB = 224
const OBJECTS = 1000
const TEAM_A_TARGETS = 16
const WORKER_MEMORY_MB = 256

let kp: KollectProcess

// A request that fails (the server reset or died) names the server's last log lines.
const ask = (urlPath: string, options?: Parameters<typeof send>[2]) =>
  send(kp.url, urlPath, options).catch((err: Error) => {
    throw new Error(`${urlPath}: ${err.message}; server ${kp.proc.hasExited() ? 'exited' : 'running'}\n${kp.proc.logTail(20)}`)
  })

const hostileSync = (namespace: string, target: number): string => outputHeavySync(namespace, `t${target}`, OBJECTS, doublingCel(10))

const peakRss = new Map<number, number>()
let sampling = true
let sampler: Promise<void>

before(async () => {
  kp = await startKollectProcess({
    KOLLECT_EXPORTER_ITEM_BUDGET_BYTES: String(BUDGET),
    KOLLECT_EXPORTER_NAMESPACE_SHARE: String(SHARE),
    KOLLECT_EXTRACT_WORKERS: '1',
    KOLLECT_WORKER_MEMORY_MB: String(WORKER_MEMORY_MB),
    KOLLECT_SYNC_TIMEOUT_MS: '30000',
  }, [`--max-old-space-size=${HEAP_MB}`])
  sampler = (async () => {
    while (sampling && !kp.proc.hasExited()) {
      for (const [pid, rss] of kp.rssByPid()) peakRss.set(pid, Math.max(peakRss.get(pid) ?? 0, rss))
      await sleep(20)
    }
  })()
})
after(async () => {
  sampling = false
  await sampler
  await kp.close()
})

test('targets past their namespace share are refused with ResourceLimit; another namespace is accepted and exported; memory stays bounded', async (t) => {
  // Warm the worker and the exporter with one target of the other namespace, then take the idle figure.
  const warmTarget = { target: targetWith({}, 'warm', 'team-c'), profile: profileWith([{ name: 'x', cel: '1' }], 'deployments-basic', 'team-c') }
  const warm = await ask(ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([], warmTarget)) })
  assert.equal(warm.status, 200, warm.text)
  const idleRss = kp.rssByPid()
  const serverPid = kp.proc.child.pid ?? 0
  const mib = (bytes: number) => `${(bytes / MIB).toFixed(0)} MiB`

  const answers: { status: number; ready?: string; reason?: string; message?: string; extracted?: unknown; lastError?: unknown; checksum?: unknown }[] = []
  for (let n = 0; n < TEAM_A_TARGETS; n++) {
    const r = await ask(ROUTES.targetSync, { body: hostileSync('team-a', n) })
    assert.equal(r.status, 200, `team-a target ${n}: ${r.text.slice(0, 300)}\n${kp.proc.logTail(5)}`)
    const ready = conditionOf(r, 'Ready')
    const status = statusOf(r)
    answers.push({ status: r.status, ready: ready?.status, reason: ready?.reason, message: ready?.message, extracted: status.extractedCount, lastError: status.lastError, checksum: status.checksum })
  }
  const accepted = answers.filter((a) => a.ready === 'True')
  const refused = answers.filter((a) => a.ready === 'False')
  t.diagnostic(`team-a: ${accepted.length} accepted, ${refused.length} refused`)

  // Each target's items are charged about 13.5 MiB (1,000 items of 12 KiB strings plus their identity):
  // two fit in team-a's share of 32 MiB, the third does not.
  assert.deepEqual(answers.slice(0, 2).map((a) => [a.ready, a.reason]), [['True', 'Extracted'], ['True', 'Extracted']])
  assert.equal(refused.length, TEAM_A_TARGETS - 2)
  for (const a of refused) {
    assert.equal(a.reason, 'ResourceLimit')
    assert.match(a.message ?? '', /^the exporter refused 1000 items \(\d+ bytes\): namespace team-a holds \d+ bytes of items and its share is 33554432 bytes; split the target, trim the profile, or raise KOLLECT_EXPORTER_NAMESPACE_SHARE$/)
    assert.equal(a.extracted, OBJECTS, 'the counts say what was extracted')
    assert.equal(a.lastError, a.message)
    assert.equal(a.checksum, '')
  }
  // Identical request, identical exporter state: byte-identical status.
  const again = await ask(ROUTES.targetSync, { body: hostileSync('team-a', TEAM_A_TARGETS - 1) })
  assert.deepEqual(statusOf(again), statusOf(await ask(ROUTES.targetSync, { body: hostileSync('team-a', TEAM_A_TARGETS - 1) })))

  // Another namespace still has room in the global budget: accepted, and exported.
  const b = await ask(ROUTES.targetSync, { body: hostileSync('team-b', 0) })
  assert.equal(b.status, 200, b.text)
  assert.deepEqual([conditionOf(b, 'Ready')?.status, conditionOf(b, 'Ready')?.reason], ['True', 'Extracted'])
  const inventory = JSON.stringify(fileExportInventory({ namespace: 'team-b', inventory: 'inv-b', target: 't0', sink: 'files-b' }))
  const deadline = Date.now() + 20_000
  for (;;) {
    const res = await ask(ROUTES.inventorySync, { body: inventory })
    assert.equal(res.status, 200, res.text)
    const sinks = statusOf(res).sinks
    if (sinks?.[0]?.state === 'Synced') break
    assert.ok(Date.now() < deadline, `inventory not exported: ${JSON.stringify(statusOf(res))}`)
    await sleep(100)
  }
  const doc = walk(path.join(kp.dataDir, 'data', 'sinks')).find((f) => f.endsWith(`${path.sep}inv-b.json`))
  assert.ok(doc, 'the team-b inventory file was written')
  assert.equal((JSON.parse(readFileSync(doc, 'utf8')) as { itemCount: number }).itemCount, OBJECTS)

  const health = await ask('/healthz', { method: 'GET' })
  assert.equal(health.status, 200)
  assert.equal(kp.proc.hasExited(), false)

  // The exporter's own accounting: team-a within its share, everything within the budget.
  const metrics = (await ask('/metrics', { method: 'GET' })).text
  const gauge = (line: RegExp) => Number(line.exec(metrics)?.[1] ?? NaN)
  const teamA = gauge(/^kollect_namespace_held_bytes\{namespace="team-a"\} (\d+)$/m)
  const total = gauge(/^kollect_exporter_held_bytes (\d+)$/m)
  assert.ok(teamA > 0 && teamA <= BUDGET * SHARE, `team-a holds ${teamA}`)
  assert.ok(total > teamA && total <= BUDGET, `the exporter holds ${total}`)
  assert.match(metrics, /^kollect_reports_refused_total\{target="team-a\/t2",limit="namespace"\} [1-9]/m)

  // The server's bound is the sizing rule of docs/operations.md: the idle process plus 5 bytes of
  // memory per charged byte of the budget (the items, charged at least their heap size; their
  // previous versions; the documents sinks render; one report in flight). The process held
  // about 40 MiB of items here (team-a's share and one team-b target); without the budget, with
  // a 160 MB heap, it died of heap exhaustion at about the tenth team-a target.
  sampling = false
  await sampler
  const serverIdle = idleRss.get(serverPid) ?? 0
  const serverPeak = peakRss.get(serverPid) ?? 0
  const serverBound = serverIdle + 5 * BUDGET
  t.diagnostic(`server: idle ${mib(serverIdle)}, peak ${mib(serverPeak)}, bound ${mib(serverBound)}`)
  assert.ok(serverIdle > 0 && serverPeak < serverBound, `server peak RSS ${mib(serverPeak)} over the bound ${mib(serverBound)}`)
  // The children that ran the hostile syncs: their growth is the CEL values, capped by their heap.
  const children = [...idleRss.keys()].filter((pid) => pid !== serverPid)
  assert.ok(children.length >= 1, 'the extraction children were measured')
  for (const pid of children) {
    const idle = idleRss.get(pid) ?? 0
    const peak = peakRss.get(pid) ?? 0
    t.diagnostic(`extraction child ${pid}: idle ${mib(idle)}, peak ${mib(peak)}, bound ${mib(idle + WORKER_MEMORY_MB * MIB)}`)
    assert.ok(peak < idle + WORKER_MEMORY_MB * MIB, `extraction child ${pid} peak RSS ${mib(peak)} over its idle ${mib(idle)} + heap limit ${WORKER_MEMORY_MB} MiB`)
  }
})
