import { refKey } from '../api/canonical.js'
import type { InventoryExportState, ObjectRef, SinkExportState } from '../api/types.js'
import { driftMessage, driftSettings } from './drift.js'
import type { InventoryRuntime, SinkRuntime } from './runtime.js'

/**
 * An inventory's export state, as status shows it: a pure function of the runtime, the targets
 * still missing and the time (which only sets nextChangeInMs; lastExportTime moves with exports).
 */
export function exportState(inv: InventoryRuntime, missing: ObjectRef[], now: number): InventoryExportState {
  const sinks: SinkExportState[] = [...inv.sinks.values()]
    .map((rt): SinkExportState => {
      const s: SinkExportState = {
        namespace: rt.ref.namespace,
        name: rt.ref.name,
        state: rt.failing ? 'Failing'
          : awaitsReview(inv, rt) ? 'AwaitingReview'
          : rt.pending || !rt.confirmed || rt.confirmed.restored || (inv.desired && rt.confirmed.checksum !== inv.desired.checksum) ? 'Pending'
          // The record could not be read: neither in step nor drifted is known.
          : rt.verifyFailing ? 'Unverified'
          : rt.drift ? 'Drifted'
          // The new checksum is not computed before the debounce ends, but the sink is behind it.
          : inv.dueAt !== null ? 'Pending' : 'Synced',
        checksum: rt.confirmed?.checksum ?? '',
        itemCount: rt.confirmed?.itemCount ?? 0,
        message: sinkMessage(inv, rt, missing),
      }
      if (rt.confirmed) s.lastExportTime = new Date(rt.confirmed.at).toISOString().replace(/\.\d{3}Z$/, 'Z')
      if (s.state === 'AwaitingReview' && rt.review) s.reviewUrl = rt.review.url
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
  if (inv.dueAt !== null) state.pending = true
  // A retry time already passed means an attempt is running: its end is unknown, so it is left out.
  const next = [inv.dueAt, ...[...inv.sinks.values()].flatMap((rt) => [
    rt.failing && rt.retryAt !== null && rt.retryAt > now ? rt.retryAt : null,
    rt.verifyFailing && rt.verifyRetryAt !== null && rt.verifyRetryAt > now ? rt.verifyRetryAt : null,
    awaitsReview(inv, rt) && rt.reviewAt !== null && rt.reviewAt > now ? rt.reviewAt : null,
  ])]
    .filter((t): t is number => t !== null)
  if (next.length > 0) state.nextChangeInMs = Math.max(0, Math.min(...next) - now)
  return state
}

/** Why a sink is not simply Synced, in the order a reader needs it; empty when it is. */
function sinkMessage(inv: InventoryRuntime, rt: SinkRuntime, missing: ObjectRef[]): string {
  if (rt.failing) return rt.failing
  if (awaitsReview(inv, rt)) return `awaiting review: ${rt.review?.url ?? ''}`
  if (rt.confirmed && rt.verifyFailing && !rt.pending) return rt.verifyFailing
  if (rt.confirmed && rt.drift && !rt.pending) return driftMessage(rt.drift, driftSettings(rt.resolved).intervalMs)
  if (inv.resumed?.sinks.includes(refKey(rt.ref))) return 'an export pending at the last shutdown waits for the targets to report; their fresh reports are what is written'
  if (rt.confirmed?.restored) return 'confirmed before the exporter restarted or took over; written again once every target has reported'
  if (rt.confirmed && !rt.pending && inv.dueAt !== null) return 'a change waits for the debounce; checksum and itemCount are the last export\'s'
  if (rt.confirmed) return ''
  if (missing.length > 0) return 'waiting for targets to report'
  return inv.composition.suspend ? 'suspended' : 'waiting for the first export'
}

/** The newest confirmation of any sink; the first sink in composition order on a tie, so status is deterministic. */
function newestConfirmed(inv: InventoryRuntime): { checksum: string; itemCount: number } | null {
  let newest: { checksum: string; itemCount: number; at: number } | null = null
  for (const rt of inv.sinks.values()) if (rt.confirmed && (!newest || rt.confirmed.at > newest.at)) newest = rt.confirmed
  return newest
}

/** The latest snapshot is proposed in an open request; a poll of it may be running. */
function awaitsReview(inv: InventoryRuntime, rt: SinkRuntime): boolean {
  return rt.review !== null && !rt.failing && inv.desired?.checksum === rt.review.checksum
}

function compareRefs(a: ObjectRef, b: ObjectRef): number {
  if (a.namespace !== b.namespace) return a.namespace < b.namespace ? -1 : 1
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0
}
