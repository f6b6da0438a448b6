import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { InventoryExportState } from '../../../api/types.js'
import { FAKE_EPOCH } from '../../support/clock.js'
import { composition, eventually, expected, harness, INV, itemsOf, LIMIT, report, resolvedSink, T1, T2 } from './harness.js'

const UNSORTED = [
  resolvedSink('b', {}, 'zeta'),
  resolvedSink('z', {}, 'alpha'),
  resolvedSink('primary'),
  resolvedSink('a', {}, 'alpha'),
]
const SORTED = ['alpha/a', 'alpha/z', 'team-a/primary', 'zeta/b']

function names(state: InventoryExportState | null): string[] {
  return (state?.sinks ?? []).map((s) => `${s.namespace}/${s.name}`)
}

async function scenario(t: TestContext): Promise<{ states: InventoryExportState[]; applied: InventoryExportState }> {
  const { clock, factory, exporter } = harness(t)
  const comp = composition({ targets: [T1, T2], sinks: UNSORTED, debounceMs: 2_000 })
  const states: InventoryExportState[] = []
  states.push(await exporter.applyInventory(comp))
  await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
  clock.advance(2_000)
  await exporter.idle()
  states.push(exporter.inventoryState(INV)!) // waiting for T2
  factory.sink('zeta/b').failNextWrites(Number.POSITIVE_INFINITY)
  await exporter.reportTarget(report(T2, itemsOf(T2, 2, 100)))
  clock.advance(2_000)
  await eventually(() => factory.sink('zeta/b').attempts.length >= 2, 'zeta/b failing')
  await eventually(() => exporter.inventoryState(INV)?.sinks.filter((s) => s.state === 'Synced').length === 3, 'the other sinks synced')
  states.push(exporter.inventoryState(INV)!) // one sink failing
  const applied = await exporter.applyInventory(comp)
  factory.sink('zeta/b').failNextWrites(0)
  await exporter.idle()
  states.push(exporter.inventoryState(INV)!) // all synced
  await exporter.close()
  return { states, applied }
}

test('status: inventoryState is deterministic and lists sinks sorted by namespace/name', LIMIT, async (t) => {
  const { clock, exporter } = harness(t)
  const comp = composition({ targets: [T1], sinks: UNSORTED, debounceMs: 2_000 })
  const applied = await exporter.applyInventory(comp)
  assert.deepEqual(names(applied), SORTED)
  assert.deepEqual(exporter.inventoryState(INV), exporter.inventoryState(INV))
  assert.deepEqual(exporter.inventoryState(INV), applied)

  const items = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, items))
  clock.advance(2_000)
  await exporter.idle()
  const first = exporter.inventoryState(INV)
  const second = exporter.inventoryState(INV)
  assert.deepEqual(first, second)
  assert.notEqual(first, second, 'a fresh object each time (callers may mutate it)')
  assert.deepEqual(names(first), SORTED)
  assert.deepEqual(await exporter.applyInventory(comp), first, 'an unchanged apply returns the same state')
  const exportedAt = new Date(FAKE_EPOCH + 2_000).toISOString().replace('.000Z', 'Z')
  assert.deepEqual(first, {
    complete: true,
    missingTargets: [],
    itemCount: 3,
    checksum: expected(items).checksum,
    lastExportTime: exportedAt,
    sinks: SORTED.map((id) => ({
      namespace: id.split('/')[0],
      name: id.split('/')[1],
      state: 'Synced',
      checksum: expected(items).checksum,
      itemCount: 3,
      lastExportTime: exportedAt,
      message: '',
    })),
  })
  await exporter.close()
})

test('status: the same inputs on the same clock give deep-equal states, in every phase', LIMIT, async (t) => {
  const one = await scenario(t)
  const two = await scenario(t)
  assert.equal(one.states.length, 4)
  for (const s of one.states) assert.deepEqual(names(s), SORTED)
  assert.deepEqual(one.states, two.states)
  assert.deepEqual(one.applied, two.applied)

  const [initial, waiting, failing, synced] = one.states
  assert.equal(initial?.complete, false)
  assert.deepEqual(waiting?.missingTargets, [T2])
  assert.equal(failing?.sinks.find((s) => s.namespace === 'zeta')?.state, 'Failing')
  assert.deepEqual(failing?.sinks.filter((s) => s.state === 'Synced').map((s) => s.name), ['a', 'z', 'primary'])
  assert.ok(synced?.sinks.every((s) => s.state === 'Synced'))
})

test('status: during the debounce a sink holding the last export is Pending, as the inventory is, and keeps its last checksum and time', LIMIT, async (t) => {
  const { clock, exporter } = harness(t)
  await exporter.applyInventory(composition({ targets: [T1], sinks: [resolvedSink('primary')], debounceMs: 2_000 }))
  const items = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, items))
  clock.advance(2_000)
  await exporter.idle()
  const exportedAt = new Date(FAKE_EPOCH + 2_000).toISOString().replace('.000Z', 'Z')
  const held = { namespace: 'team-a', name: 'primary', checksum: expected(items).checksum, itemCount: 3, lastExportTime: exportedAt }
  assert.deepEqual(exporter.inventoryState(INV)?.sinks, [{ ...held, state: 'Synced', message: '' }])

  const changed = itemsOf(T1, 4)
  await exporter.reportTarget(report(T1, changed))
  const waiting = exporter.inventoryState(INV)
  assert.equal(waiting?.pending, true)
  assert.deepEqual(waiting?.sinks, [{ ...held, state: 'Pending', message: 'a change waits for the debounce; checksum and itemCount are the last export\'s' }])

  clock.advance(2_000)
  await exporter.idle()
  const after = exporter.inventoryState(INV)
  assert.equal(after?.pending, undefined)
  assert.deepEqual(after?.sinks.map((s) => [s.state, s.checksum]), [['Synced', expected(changed).checksum]])
  await exporter.close()
})
