import { refKey } from '../api/canonical.js'
import type { InventoryExportState, ObjectRef, SinkExportState } from '../api/types.js'
import { driftMessage, driftSettings } from './drift.js'
import type { ReviewView } from './review-poll.js'
import type { Inventory } from './inventory.js'
import type { SinkDriver } from './sink-driver.js'

/**
 * An inventory's export state, as status shows it: a pure function of the inventory and its
 * drivers, the targets still missing, the sinks that owe a journaled export still waiting for the
 * gate, and the time (which only sets nextChangeInMs; lastExportTime moves with exports).
 */
export function exportState(inv: Inventory, missing: ObjectRef[], resumed: readonly string[], now: number): InventoryExportState {
  const dueAt = inv.debounce.dueAt
  const sinks: SinkExportState[] = inv.drivers
    .map((d): SinkExportState => {
      const confirmed = d.confirmed
      const check = d.drift?.view
      const review = awaitsReview(inv, d)
      const s: SinkExportState = {
        namespace: d.ref.namespace,
        name: d.ref.name,
        state: d.failure ? 'Failing'
          : review ? 'AwaitingReview'
          : d.owes || !confirmed || confirmed.restored || (inv.desired && confirmed.checksum !== inv.desired.checksum) ? 'Pending'
          // The record could not be read: neither in step nor drifted is known.
          : check?.failing ? 'Unverified'
          : check?.drift ? 'Drifted'
          // The new checksum is not computed before the debounce ends, but the sink is behind it.
          : dueAt !== null ? 'Pending' : 'Synced',
        checksum: confirmed?.checksum ?? '',
        itemCount: confirmed?.itemCount ?? 0,
        message: sinkMessage(inv, d, missing, resumed),
      }
      if (confirmed) s.lastExportTime = new Date(confirmed.at).toISOString().replace(/\.\d{3}Z$/, 'Z')
      if (review) s.reviewUrl = review.url
      return s
    })
    .sort((a, b) => compareRefs(a, b))
  const times = sinks.map((s) => s.lastExportTime).filter((t): t is string => !!t).sort()
  // Before the first export since start, the newest export a sink confirmed (restored from the journal).
  const shown = inv.desired ?? newestConfirmed(inv)
  const state: InventoryExportState = {
    complete: missing.length === 0,
    missingTargets: missing,
    itemCount: shown?.itemCount ?? 0,
    checksum: shown?.checksum ?? '',
    sinks,
  }
  const last = times[times.length - 1]
  if (last) state.lastExportTime = last
  if (dueAt !== null) state.pending = true
  // A retry time already passed means an attempt is running: its end is unknown, so it is left out.
  const retries = inv.drivers.flatMap((d) => [d.failure?.retryAt, d.drift?.view.failing ? d.drift.view.retryAt : null, awaitsReview(inv, d)?.pollAt])
  const next = [dueAt, ...retries.filter((t) => t != null && t > now)].filter((t): t is number => t != null)
  if (next.length > 0) state.nextChangeInMs = Math.max(0, Math.min(...next) - now)
  return state
}

/** Why a sink is not simply Synced, in the order a reader needs it; empty when it is. */
function sinkMessage(inv: Inventory, d: SinkDriver, missing: ObjectRef[], resumed: readonly string[]): string {
  const failure = d.failure
  if (failure) return failure.message
  const review = awaitsReview(inv, d)
  if (review) return `awaiting review: ${review.url}`
  const check = d.drift?.view
  if (d.confirmed && check?.failing && !d.owes) return check.failing
  if (d.confirmed && check?.drift && !d.owes) return driftMessage(check.drift, driftSettings(d.resolved).intervalMs)
  if (resumed.includes(refKey(d.ref))) return 'an export pending at the last shutdown waits for the targets to report; their fresh reports are what is written'
  if (d.confirmed?.restored) return 'confirmed before the exporter restarted or took over; written again once every target has reported'
  if (d.confirmed && !d.owes && inv.debounce.dueAt !== null) return 'a change waits for the debounce; checksum and itemCount are the last export\'s'
  if (d.confirmed) return ''
  if (missing.length > 0) return 'waiting for targets to report'
  return inv.composition.suspend ? 'suspended' : 'waiting for the first export'
}

/** The newest confirmation of any sink; the first sink in composition order on a tie, so status is deterministic. */
function newestConfirmed(inv: Inventory): { checksum: string; itemCount: number } | null {
  let newest: { checksum: string; itemCount: number; at: number } | null = null
  for (const d of inv.drivers) if (d.confirmed && (!newest || d.confirmed.at > newest.at)) newest = d.confirmed
  return newest
}

/** The latest snapshot is proposed in an open request (a poll of it may be running): that proposal. */
function awaitsReview(inv: Inventory, d: SinkDriver): ReviewView | null {
  const review = d.review.view
  return review && !d.failure && inv.desired?.checksum === review.checksum ? review : null
}

function compareRefs(a: ObjectRef, b: ObjectRef): number {
  if (a.namespace !== b.namespace) return a.namespace < b.namespace ? -1 : 1
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0
}
