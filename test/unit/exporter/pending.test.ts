// Inventory status follows the export (issue 9): the exporter's state, turned into a sync answer
// by the hook, says Pending while a change waits for the debounce and asks Metacontroller to call
// back when the state is due to change; on a fake clock, so every figure is exact.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { InventoryComposition, InventoryExportState, InventoryStatus } from '../../../api/types.js'
import { syncInventoryResponse } from '../../../hooks/inventory.js'
import type { SyncResponse } from '../../../hooks/request.js'
import { asSyncRequest } from '../hooks/fixtures.js'
import { controllerFor, loadExampleCr, syncRequest } from '../../support/metacontroller.js'
import { composition, eventually, expected, harness, INV, itemsOf, LIMIT, report, T1 } from './harness.js'

const REQ = asSyncRequest(syncRequest(controllerFor('kollect-inventories'), loadExampleCr('inventory.yaml'), {}))

function answer(comp: InventoryComposition, state: InventoryExportState | null): SyncResponse<InventoryStatus> {
  assert.ok(state, 'the exporter knows the inventory')
  return syncInventoryResponse(REQ, { ok: true, problems: [], composition: comp }, state)
}

function synced(res: SyncResponse<InventoryStatus>): string {
  const c = res.status.conditions?.find((x) => x.type === 'Synced')
  return `${c?.status} ${c?.reason}`
}

test('pending: the first export is Pending with a resync after the debounce, then Synced with none', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const comp = composition({ debounceMs: 10_000, maxWaitMs: 60_000 })
  const items = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, items)) // the target syncs first, as after an install
  const first = answer(comp, await exporter.applyInventory(comp))
  assert.equal(synced(first), 'False Pending')
  assert.equal(first.status.itemCount, 0)
  assert.equal(first.resyncAfterSeconds, 11, 'the debounce plus 1 s, not Metacontroller\'s 60 s resync')

  clock.advance(4_000)
  assert.equal(answer(comp, exporter.inventoryState(INV)).resyncAfterSeconds, 7, 'the time left, not the whole debounce again')

  clock.advance(6_000)
  await exporter.idle()
  assert.equal(factory.sink('team-a/primary').writes.length, 1)
  const after = answer(comp, exporter.inventoryState(INV))
  assert.equal(synced(after), 'True Exported')
  assert.equal(after.status.checksum, expected(items).checksum)
  assert.equal(after.status.itemCount, 3)
  assert.equal('resyncAfterSeconds' in after, false, 'nothing left to wait for')
})

test('pending: a target change before the debounce ends is Pending with the old checksum, not Synced', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const comp = composition({ debounceMs: 2_000 })
  const itemsA = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, itemsA))
  await exporter.applyInventory(comp)
  clock.advance(2_000)
  await exporter.idle()
  const A = expected(itemsA).checksum
  assert.equal(synced(answer(comp, exporter.inventoryState(INV))), 'True Exported')

  const itemsB = itemsOf(T1, 4)
  await exporter.reportTarget(report(T1, itemsB))
  const during = answer(comp, await exporter.applyInventory(comp))
  assert.equal(synced(during), 'False Pending', 'kubectl wait --for=condition=Synced must not return before the change is written')
  assert.equal(during.status.checksum, A, 'the checksum is still the one the sinks hold')
  assert.equal(during.status.itemCount, 3)
  assert.equal(during.resyncAfterSeconds, 3)

  clock.advance(2_000)
  await exporter.idle()
  assert.deepEqual(factory.sink('team-a/primary').checksums, [A, expected(itemsB).checksum])
  const after = answer(comp, exporter.inventoryState(INV))
  assert.equal(synced(after), 'True Exported')
  assert.equal(after.status.checksum, expected(itemsB).checksum)
  assert.equal('resyncAfterSeconds' in after, false)
})

test('pending: a periodic resync reporting the same items leaves the inventory Synced and arms no timer', LIMIT, async (t) => {
  const { clock, factory, exporter } = harness(t)
  const comp = composition({ debounceMs: 2_000 })
  const items = itemsOf(T1, 3)
  await exporter.reportTarget(report(T1, items))
  await exporter.applyInventory(comp)
  clock.advance(2_000)
  await exporter.idle()

  await exporter.reportTarget(report(T1, itemsOf(T1, 3))) // equal items, new objects, as a fresh sync sends them
  assert.equal(clock.pendingTimers(), 0)
  const res = answer(comp, exporter.inventoryState(INV))
  assert.equal(synced(res), 'True Exported')
  assert.equal('resyncAfterSeconds' in res, false)
  clock.advance(60_000)
  await exporter.idle()
  assert.equal(factory.sink('team-a/primary').attempts.length, 1)
})

test('pending: a failing sink is Failing with a resync from its backoff, capped at 60 s', LIMIT, async (t) => {
  for (const { backoff, want } of [
    { backoff: { minMs: 4_000, maxMs: 30_000, factor: 2 }, want: 9 }, // jitter waits at most 8 s after the first failure
    { backoff: { minMs: 45_000, maxMs: 300_000, factor: 2 }, want: 60 },
  ]) {
    const { clock, factory, exporter } = harness(t, { backoff })
    const comp = composition({ debounceMs: 2_000 })
    await exporter.reportTarget(report(T1, itemsOf(T1, 3)))
    await exporter.applyInventory(comp)
    factory.sink('team-a/primary').failNextWrites(Number.POSITIVE_INFINITY)
    clock.advance(2_000)
    await eventually(() => exporter.inventoryState(INV)?.sinks[0]?.state === 'Failing', 'the first write failing')
    const res = answer(comp, exporter.inventoryState(INV))
    assert.equal(synced(res), 'False Failing')
    assert.equal(res.resyncAfterSeconds, want, JSON.stringify(backoff))
    assert.equal(factory.sink('team-a/primary').attempts.length, 1, 'the retry waits for its backoff')
    // Past the latest retry time the attempt is taken as running, with no known end: no 1 s resync loop.
    clock.advance(backoff.maxMs)
    assert.equal(answer(comp, exporter.inventoryState(INV)).resyncAfterSeconds, 10)
    await exporter.close()
  }
})

test('pending: an inventory waiting for its targets asks for a modest resync', LIMIT, async (t) => {
  const { exporter } = harness(t)
  const comp = composition()
  const res = answer(comp, await exporter.applyInventory(comp))
  assert.equal(synced(res), 'False WaitingForTargets')
  assert.equal(res.resyncAfterSeconds, 10)
})
