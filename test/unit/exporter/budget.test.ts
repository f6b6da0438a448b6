import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { Item, ObjectRef, ReportResult } from '../../../api/types.js'
import { ItemCharger, type BudgetOptions } from '../../../exporter/budget.js'
import { composition, expected, harness, INV, itemsOf, LIMIT, report, T1, T2 } from './harness.js'

// The exporter's item budget: a report that would take its target's namespace over its share,
// or the exporter over its budget, is refused and changes nothing; shrinking and removing free.

const TB: ObjectRef = { namespace: 'team-b', name: 'tb' }
const ACCEPTED: ReportResult = { accepted: true }

/** What the exporter charges, computed the same way in the same order (charges remember key sequences). */
function charger(): (items: Item[]) => number {
  const c = new ItemCharger()
  return (items) => items.reduce((n, item) => n + c.charge(item), 0)
}

interface Held {
  namespaces: Map<string, number>
  total: number
  refused: string[]
}

function budgeted(t: TestContext, budget: BudgetOptions) {
  const held: Held = { namespaces: new Map(), total: 0, refused: [] }
  const h = harness(t, {
    budget,
    observer: {
      onHeldChange: (namespace, bytes, total) => {
        held.namespaces.set(namespace, bytes)
        held.total = total
      },
      onReportRefused: (target, limit) => held.refused.push(`${target.namespace}/${target.name}:${limit}`),
    },
  })
  return { ...h, held }
}

async function exportNow(h: ReturnType<typeof budgeted>): Promise<Item[]> {
  h.clock.advance(60_000)
  await h.exporter.idle()
  return h.factory.sink('team-a/primary').lastWrite?.snapshot.items ?? []
}

test('under the budget every report is accepted and charged to its namespace and the total', LIMIT, async (t) => {
  const h = budgeted(t, { maxBytes: 10_000_000, namespaceShare: 0.5 })
  const charge = charger()
  const a = itemsOf(T1, 5)
  const b = itemsOf(TB, 3, 100)
  const ca = charge(a)
  const cb = charge(b)
  assert.deepEqual(await h.exporter.reportTarget(report(T1, a)), ACCEPTED)
  assert.deepEqual(await h.exporter.reportTarget(report(TB, b)), ACCEPTED)
  assert.deepEqual([...h.held.namespaces], [['team-a', ca], ['team-b', cb]])
  assert.equal(h.held.total, ca + cb)
  assert.deepEqual(h.held.refused, [])
  // Each item is charged at least its JSON length, and more than a fixed overhead.
  assert.ok(ca > JSON.stringify(a).length && ca / a.length > 1000, `5 items charged ${ca}`)
})

test('over the namespace share: refused with the reason, while another namespace is still accepted', LIMIT, async (t) => {
  const charge = charger()
  const a1 = itemsOf(T1, 10)
  const a2 = itemsOf(T2, 10, 100)
  const b = itemsOf(TB, 10, 200)
  const [c1, c2, cb] = [charge(a1), charge(a2), charge(b)]
  // The share holds T1 but not T1 and T2; the budget holds three such targets.
  const maxBytes = 2 * (c1 + c2)
  const share = (c1 + c2 - 1) / maxBytes
  const h = budgeted(t, { maxBytes, namespaceShare: share })
  const shareBytes = Math.floor(maxBytes * share)

  assert.deepEqual(await h.exporter.reportTarget(report(T1, a1)), ACCEPTED)
  assert.deepEqual(await h.exporter.reportTarget(report(T2, a2)), {
    accepted: false,
    reason: 'ResourceLimit',
    message: `the exporter refused 10 items (${c2} bytes): namespace team-a holds ${c1} bytes of items and its share is ${shareBytes} bytes; ` +
      'split the target, trim the profile, or raise KOLLECT_EXPORTER_NAMESPACE_SHARE',
  })
  assert.deepEqual(await h.exporter.reportTarget(report(TB, b)), ACCEPTED)
  assert.deepEqual([...h.held.namespaces], [['team-a', c1], ['team-b', cb]])
  assert.equal(h.held.total, c1 + cb)
  assert.deepEqual(h.held.refused, ['team-a/t2:namespace'])

  // A refused target never reported, as far as inventories go: the completeness gate waits for it.
  const state = await h.exporter.applyInventory(composition({ targets: [T1, T2] }))
  assert.deepEqual(state.missingTargets, [T2])
})

test('over the exporter budget: refused with the reason, whatever the namespace', LIMIT, async (t) => {
  const charge = charger()
  const a = itemsOf(T1, 10)
  const b = itemsOf(TB, 10, 200)
  const [ca, cb] = [charge(a), charge(b)]
  const h = budgeted(t, { maxBytes: ca + cb - 1, namespaceShare: 1 })
  assert.deepEqual(await h.exporter.reportTarget(report(T1, a)), ACCEPTED)
  assert.deepEqual(await h.exporter.reportTarget(report(TB, b)), {
    accepted: false,
    reason: 'ResourceLimit',
    message: `the exporter refused 10 items (${cb} bytes): the exporter holds ${ca} bytes of items and its budget is ${ca + cb - 1} bytes; ` +
      'split the target, trim the profile, or raise KOLLECT_EXPORTER_ITEM_BUDGET_BYTES with the exporter\'s memory limit',
  })
  assert.deepEqual(h.held.refused, ['team-b/tb:exporter'])
  assert.equal(h.held.total, ca)
})

test('a refused report keeps the target\'s last accepted items, whole, and charges nothing', LIMIT, async (t) => {
  const charge = charger()
  const small = itemsOf(T1, 4)
  const large = itemsOf(T1, 40, 50)
  const cs = charge(small)
  charge(large)
  const h = budgeted(t, { maxBytes: 4 * cs, namespaceShare: 0.5 })
  await h.exporter.applyInventory(composition())
  assert.deepEqual(await h.exporter.reportTarget(report(T1, small)), ACCEPTED)
  assert.deepEqual(await exportNow(h), expected(small).items)

  const refused = await h.exporter.reportTarget(report(T1, large))
  assert.equal(refused.accepted, false)
  assert.equal(h.held.total, cs)
  // Nothing changed, so nothing is exported again; the sink still holds the small set.
  const sink = h.factory.sink('team-a/primary')
  assert.equal(sink.writes.length, 1)
  assert.deepEqual(await exportNow(h), expected(small).items)
  assert.equal(sink.writes.length, 1)
  assert.equal(h.exporter.inventoryState(INV)?.itemCount, 4)
})

test('shrinking a target frees its share: a target refused before then fits', LIMIT, async (t) => {
  const charge = charger()
  const big = itemsOf(T1, 20)
  const other = itemsOf(T2, 10, 100)
  const [cBig, cOther] = [charge(big), charge(other)]
  const h = budgeted(t, { maxBytes: 1_000_000_000, namespaceShare: (cBig + cOther - 1) / 1_000_000_000 })
  assert.deepEqual(await h.exporter.reportTarget(report(T1, big)), ACCEPTED)
  assert.equal((await h.exporter.reportTarget(report(T2, other))).accepted, false)

  const shrunk = big.slice(0, 5)
  assert.deepEqual(await h.exporter.reportTarget(report(T1, shrunk)), ACCEPTED)
  const cShrunk = charge(shrunk) // the same objects: their charges as first computed
  assert.equal(h.held.total, cShrunk)
  assert.ok(cShrunk < cBig / 3, `${cShrunk} after shrinking, ${cBig} before`)
  assert.deepEqual(await h.exporter.reportTarget(report(T2, other)), ACCEPTED)
  assert.equal(h.held.total, cShrunk + cOther)
  assert.equal(h.held.namespaces.get('team-a'), cShrunk + cOther)
})

test('removing a target frees its share', LIMIT, async (t) => {
  const charge = charger()
  const a1 = itemsOf(T1, 10)
  const a2 = itemsOf(T2, 10, 100)
  const [c1, c2] = [charge(a1), charge(a2)]
  const h = budgeted(t, { maxBytes: 1_000_000_000, namespaceShare: (c1 + c2 - 1) / 1_000_000_000 })
  assert.deepEqual(await h.exporter.reportTarget(report(T1, a1)), ACCEPTED)
  assert.equal((await h.exporter.reportTarget(report(T2, a2))).accepted, false)
  await h.exporter.removeTarget(T1)
  assert.equal(h.held.total, 0)
  assert.equal(h.held.namespaces.get('team-a'), 0)
  assert.deepEqual(await h.exporter.reportTarget(report(T2, a2)), ACCEPTED)
  assert.equal(h.held.total, c2)
  // Removing a target the exporter does not hold changes nothing.
  await h.exporter.removeTarget(T1)
  assert.equal(h.held.total, c2)
})

test('an exporter restart refills: the same reports are accepted and refused the same way, charged the same', LIMIT, async (t) => {
  const reports = [report(T1, itemsOf(T1, 10)), report(T2, itemsOf(T2, 10, 100)), report(TB, itemsOf(TB, 10, 200))]
  const charge = charger()
  const [c1, c2] = [charge(reports[0]!.items), charge(reports[1]!.items)]
  const budget = { maxBytes: 1_000_000_000, namespaceShare: (c1 + c2 - 1) / 1_000_000_000 }
  const run = async () => {
    const h = budgeted(t, budget)
    // A restarted exporter gets fresh objects, as they arrive over the wire.
    const results = []
    for (const r of reports) results.push(await h.exporter.reportTarget(structuredClone(r)))
    return { results, total: h.held.total, namespaces: [...h.held.namespaces] }
  }
  const before = await run()
  const after = await run()
  assert.deepEqual(before.results.map((r) => r.accepted), [true, false, true])
  assert.deepEqual(after, before)
})

test('a refused report leaves no trace: the identical report is charged the same and refused with the same message', LIMIT, async (t) => {
  const charge = charger()
  const a = itemsOf(T1, 10)
  const ca = charge(a)
  const h = budgeted(t, { maxBytes: 1_000_000_000, namespaceShare: (ca + 1000) / 1_000_000_000 })
  assert.deepEqual(await h.exporter.reportTarget(report(T1, a)), ACCEPTED)
  // Items of key sequences the exporter has not seen, arriving afresh on every resync.
  const novel = () => itemsOf(T2, 5, 100).map((item, i) => ({ ...item, attributes: { [`only-here-${i}`]: { nested: i, other: [i] } } }))
  const first = await h.exporter.reportTarget(report(T2, novel()))
  const second = await h.exporter.reportTarget(report(T2, novel()))
  assert.equal(first.accepted, false)
  assert.deepEqual(second, first)
})
