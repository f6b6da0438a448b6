// What the exporter takes per held item (issue 13): an exporter in a process of its own holds
// 10k, 100k and 1M items of the bench profile (test/support/items.ts), reported in targets of
// 10,000 items that each arrive as JSON, as from the hooks (fresh objects, the hooks' hashes and
// generations). No inventory names the targets, so nothing is exported: this measures holding.
// Baseline: the items' canonical JSON; figures are RSS and heap over the idle process, per item.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { canonicalJson, compareItems, itemHash, itemsChecksum } from '../api/canonical.js'
import type { TargetReport } from '../api/types.js'
import { Exporter } from '../exporter/index.js'
import { makeItem } from '../test/support/items.js'
import { collectGarbage, median, report } from './stats.js'
import { isMainModule } from '../server/process/entry.js'

const PER_TARGET = 10_000
/**
 * Heap per held item over its canonical JSON, at most, at the largest count (where the idle
 * process's own growth weighs least): as parsed an item takes 1.7-1.9 × its JSON, and the
 * exporter's keys, hashes and maps came on top (2.1 × before the strings were shared).
 */
const TARGET_RATIO = 2

interface Held { items: number; rssBytes: number; heapBytes: number; jsonBytes: number; reportMs: number }

function gc(): void {
  collectGarbage()
  collectGarbage()
}

/** In the child: hold the reports that arrive on stdin, one JSON line each, then print what that took. */
async function hold(count: number): Promise<void> {
  const exporter = new Exporter({ cluster: 'bench', createSink: async () => { throw new Error('no sinks here') } })
  gc()
  const idle = process.memoryUsage()
  let reportMs = 0
  let held = 0
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    const parsed = JSON.parse(line) as TargetReport
    const start = performance.now()
    const result = await exporter.reportTarget(parsed)
    reportMs += performance.now() - start
    if (!result.accepted) throw new Error(`report refused: ${JSON.stringify(result)}`)
    held += parsed.items.length
    if (held >= count) break
  }
  gc()
  const now = process.memoryUsage()
  console.log(JSON.stringify({ items: held, rssBytes: now.rss - idle.rss, heapBytes: now.heapUsed - idle.heapUsed, jsonBytes: 0, reportMs }))
  await exporter.close()
}

/** One child process holding `count` items, sent as reports of PER_TARGET items. */
async function measure(count: number): Promise<Held> {
  const heapMb = Math.max(1024, Math.ceil((count * 6_000) / 2 ** 20))
  const child = spawn(process.execPath, [`--max-old-space-size=${heapMb}`, fileURLToPath(import.meta.url)], {
    env: { ...process.env, BENCH_MEMORY_HOLD: String(count) },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (d: Buffer) => { out += d.toString() })
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  let jsonBytes = 0
  for (let from = 0, t = 0; from < count; from += PER_TARGET, t++) {
    const target = { namespace: 'team-a', name: `deploys-${String(t).padStart(4, '0')}` }
    const items = Array.from({ length: Math.min(PER_TARGET, count - from) }, (_, k) => makeItem(from + k, { target }))
    for (const it of items) jsonBytes += Buffer.byteLength(canonicalJson(it))
    const line = JSON.stringify({
      target, generation: 1, checksum: itemsChecksum([...items].sort(compareItems)), items, failedKeys: [],
      itemHashes: items.map(itemHash), itemGenerations: items.map(() => 1),
    })
    if (!child.stdin.write(line + '\n')) await once(child.stdin, 'drain')
  }
  child.stdin.end()
  const code = await exited
  if (code !== 0) throw new Error(`memory child for ${count} items exited ${code}`)
  return { ...(JSON.parse(out.trim().split('\n').pop() as string) as Held), jsonBytes }
}

export async function benchMemory(counts = [10_000, 100_000, 1_000_000], rounds = 3): Promise<boolean> {
  const rows: [string, string][] = []
  const targets: [string, boolean][] = []
  const held: { count: number; rss: number; heapRatio: number }[] = []
  for (const count of counts) {
    const runs: Held[] = []
    // A 1M-item round takes a minute: one is enough to size from.
    for (let r = 0; r < (count >= 1_000_000 ? 1 : rounds); r++) runs.push(await measure(count))
    const rss = runs.map((h) => h.rssBytes / count)
    const heap = runs.map((h) => h.heapBytes / count)
    const json = (runs[0] as Held).jsonBytes / count
    const ratio = median(rss) / json
    rows.push(
      [`${count} items: RSS over idle`, `${(median(runs.map((h) => h.rssBytes)) / 2 ** 20).toFixed(0)} MiB`],
      ['  bytes per item: RSS / heap (median; range)', `${median(rss).toFixed(0)} / ${median(heap).toFixed(0)}  (${Math.min(...rss).toFixed(0)}–${Math.max(...rss).toFixed(0)})`],
      ['  canonical JSON per item (baseline)', json.toFixed(0)],
      ['  ratio RSS / JSON, heap / JSON', `${ratio.toFixed(2)}, ${(median(heap) / json).toFixed(2)}`],
      ['  reportTarget, all targets (median ms)', median(runs.map((h) => h.reportMs)).toFixed(0)],
    )
    held.push({ count, rss: median(runs.map((h) => h.rssBytes)), heapRatio: median(heap) / json })
  }
  const [small, large] = held.slice(-2)
  if (small && large && small !== large) {
    rows.push([`marginal RSS per item, ${small.count} → ${large.count}`, `${((large.rss - small.rss) / (large.count - small.count)).toFixed(0)} bytes`])
  }
  if (large) targets.push([`heap per item <= ${TARGET_RATIO} × its JSON at ${large.count}`, large.heapRatio <= TARGET_RATIO])
  return report('memory: exporter holding items (own process, no export)', rows, targets)
}

if (isMainModule(import.meta.url)) {
  const hold$ = process.env['BENCH_MEMORY_HOLD']
  if (hold$) await hold(Number(hold$))
  else {
    const counts = process.env['BENCH_COUNTS']?.split(',').map(Number)
    process.exitCode = (await benchMemory(counts)) ? 0 : 1
  }
}
