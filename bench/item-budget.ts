// The exporter's item budget: (1) how the charge compares with the heap items really take, for
// realistic and hostile shapes, next to what a budget in JSON bytes would have let through; (2)
// what charging costs on reportTarget, for 10,000 example-profile items arriving as fresh objects.
import { canonicalJson, compareItems, itemHash, itemsChecksum } from '../api/canonical.js'
import type { Item, JsonObject, TargetReport } from '../api/types.js'
import { syncTarget } from '../hooks/target.js'
import { ItemCharger } from '../exporter/budget.js'
import { Exporter } from '../exporter/index.js'
import { makeItem } from '../test/support/items.js'
import { deployment, targetSyncRequest } from '../test/support/metacontroller.js'
import { collectGarbage, median, report, timeMs } from './stats.js'
import { isMainModule } from '../server/process/entry.js'

const SHAPES: [string, number, (i: number) => JsonObject][] = [
  ['realistic (rich Deployment item)', 20_000, (i) => makeItem(i).attributes],
  ['identity only, no attributes', 20_000, () => ({})],
  ['one 60 KB ASCII string', 300, (i) => ({ s: 'x'.repeat(60_000) + i })],
  ['one 30,000-character CJK string', 300, (i) => ({ s: '\u4e00'.repeat(30_000) + i })],
  ['20,000 empty maps', 300, () => ({ l: Array.from({ length: 20_000 }, () => ({})) })],
  ['20,000 empty lists', 300, () => ({ l: Array.from({ length: 20_000 }, () => []) })],
  ['10,000 lists nested 3 deep', 300, () => ({ l: Array.from({ length: 10_000 }, () => [[[]]]) })],
  ['20,000 small integers', 300, () => ({ l: Array.from({ length: 20_000 }, (_, k) => k % 10) })],
  ['20,000 booleans', 300, () => ({ l: Array.from({ length: 20_000 }, () => true) })],
  ['3,000 maps with a key of their own', 300, (i) => ({ l: Array.from({ length: 3_000 }, (_, k) => ({ [`k${i}_${k}`]: true })) })],
  ['one map of 5,000 keys of its own', 300, (i) => Object.fromEntries(Array.from({ length: 5_000 }, (_, k) => [`k${k}_${i}`, k % 10]))],
]

/** Heap growth, charge and JSON bytes of n items of one shape, each parsed from its JSON as it arrives. */
function measure(n: number, attributes: (i: number) => JsonObject): { heap: number; charge: number; json: number } {
  const held: Item[] = []
  const charger = new ItemCharger()
  let json = 0
  collectGarbage()
  collectGarbage()
  const before = process.memoryUsage().heapUsed
  for (let i = 0; i < n; i++) {
    const text = JSON.stringify({ ...makeItem(i), attributes: attributes(i) })
    json += Buffer.byteLength(text)
    const item = JSON.parse(text) as Item
    itemHash(item)
    held.push(item)
  }
  collectGarbage()
  collectGarbage()
  const heap = process.memoryUsage().heapUsed - before
  const charge = held.reduce((sum, item) => sum + charger.charge(item), 0)
  return { heap, charge, json }
}

function exampleItems(count: number): Item[] {
  const { report: r } = syncTarget(targetSyncRequest(Array.from({ length: count }, (_, i) => deployment(i))) as never, { plural: { plural: 'deployments', source: 'spec' } })
  return r?.items ?? []
}

export async function benchItemBudget(count = 10_000, rounds = 11): Promise<boolean> {
  const rows: [string, string | number][] = []
  let worst = 0
  for (const [name, n, attributes] of SHAPES) {
    const m = measure(n, attributes)
    worst = Math.max(worst, m.heap / m.charge)
    rows.push([name, `heap/charge ${(m.heap / m.charge).toFixed(2)}  heap/JSON ${(m.heap / m.json).toFixed(2)}  charge/item ${Math.round(m.charge / n)}`])
  }

  // reportTarget as on the real path: fresh objects (they crossed a socket), with the hooks' hashes.
  const items = exampleItems(count)
  const target = items[0]?.target ?? { namespace: 'team-a', name: 'prod-deploys' }
  const wire = JSON.stringify(items)
  const fresh = (): TargetReport => {
    const parsed = JSON.parse(wire) as Item[]
    return { target, generation: 1, checksum: itemsChecksum([...parsed].sort(compareItems)), items: parsed, failedKeys: [], itemHashes: items.map(itemHash) }
  }
  // A/B in alternating rounds: the same reportTarget, once with charging stubbed out.
  const withCharge: number[] = []
  const without: number[] = []
  const unchanged: number[] = []
  const jsonLength: number[] = []
  const charge = Object.getOwnPropertyDescriptor(ItemCharger.prototype, 'charge') as PropertyDescriptor
  const once = async (stub: boolean): Promise<number> => {
    if (stub) Object.defineProperty(ItemCharger.prototype, 'charge', { ...charge, value: () => 0 })
    try {
      const exporter = new Exporter({ cluster: 'bench', createSink: async () => { throw new Error('no sinks here') }, budget: { maxBytes: 1024 ** 3, namespaceShare: 1 } })
      const r = fresh()
      collectGarbage()
      const ms = await timeAsync(() => exporter.reportTarget(r))
      if (!stub) {
        const again = fresh()
        unchanged.push(await timeAsync(() => exporter.reportTarget(again)))
      }
      await exporter.close()
      return ms
    } finally {
      Object.defineProperty(ItemCharger.prototype, 'charge', charge)
    }
  }
  await once(false)
  await once(true)
  for (let r = 0; r < rounds; r++) {
    withCharge.push(await once(false))
    without.push(await once(true))
    const c = fresh()
    collectGarbage()
    jsonLength.push(timeMs(() => { for (const item of c.items) canonicalJson(item) }))
  }
  const withMs = median(withCharge)
  const withoutMs = median(without)
  rows.push(
    [`reportTarget, ${count} new items, charged (median ms)`, withMs.toFixed(1)],
    ['  the same, charging stubbed out (median ms)', withoutMs.toFixed(1)],
    ['  with / without charging', (withMs / withoutMs).toFixed(2)],
    ['  charging / canonical JSON of the items', ((withMs - withoutMs) / median(jsonLength)).toFixed(2)],
    [`reportTarget, ${count} unchanged items, charged (median ms)`, median(unchanged).toFixed(1)],
  )
  return report('item budget (exporter/budget.ts)', rows, [
    ['heap/charge ≤ 1.05 for every shape', worst <= 1.05],
    ['charging costs less than canonical JSON', withMs - withoutMs < median(jsonLength)],
  ])
}

async function timeAsync(fn: () => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint()
  await fn()
  return Number(process.hrtime.bigint() - t) / 1e6
}

if (isMainModule(import.meta.url)) process.exitCode = (await benchItemBudget()) ? 0 : 1
