// Target status from counts and conditions, and the adjustments the server makes to a sync's
// answer once the exporter has spoken (refused, stale) or the sync was stopped.
import type { Condition, KubeObject, TargetStatus, TargetStatusResource } from '../api/types.js'
import { condition, sortConditions, truncate } from './conditions.js'
import { parentGeneration, parentStatus, type SyncRequest, type SyncResponse } from './request.js'

export interface Counts {
  matchedCount: number
  extractedCount: number
  failedCount: number
  lastError: string
}

export const NO_COUNTS: Counts = { matchedCount: 0, extractedCount: 0, failedCount: 0, lastError: '' }

export function targetResponse(
  counts: Counts,
  checksum: string,
  resource: TargetStatusResource | undefined,
  conditions: Condition[],
  generation: number,
): SyncResponse<TargetStatus> {
  const status: TargetStatus = {
    observedGeneration: generation,
    matchedCount: counts.matchedCount,
    extractedCount: counts.extractedCount,
    failedCount: counts.failedCount,
    lastError: counts.lastError,
    checksum,
    conditions: sortConditions(conditions),
  }
  if (resource) status.resource = resource
  return { status, children: [] }
}

/**
 * Deleting a target drops its items from every inventory. The server has the exporter do that
 * first, and answers with an error (which Metacontroller retries) when it cannot.
 */
export function finalizeTarget(req: SyncRequest): SyncResponse<TargetStatus> {
  const generation = parentGeneration(req.parent)
  const status: TargetStatus = { ...parentStatus<TargetStatus>(req.parent) }
  status.observedGeneration = generation
  status.conditions = [condition('Ready', false, 'Finalized', 'items removed from the exporter', generation)]
  return { status, children: [], finalized: true }
}

/**
 * Status for a sync the server had to stop (time or memory budget): Ready False with the
 * reason; the exporter keeps the target's last items.
 */
export function abortedTargetSync(parent: KubeObject, reason: 'EvaluationTimeout' | 'ResourceLimit', message: string): SyncResponse<TargetStatus> {
  const generation = parentGeneration(parent)
  const ready = condition('Ready', false, reason, message, generation)
  return targetResponse({ ...NO_COUNTS, lastError: truncate(message, 256) }, '', undefined, [ready], generation)
}

/**
 * Status for a sync whose items the exporter refused (over its item budget): the counts of what
 * was extracted, Ready False ResourceLimit with the exporter's message, and no checksum, since
 * the exporter still holds the target's last accepted items. Other conditions stay.
 */
export function refusedTargetSync(response: SyncResponse<TargetStatus>, message: string): SyncResponse<TargetStatus> {
  const generation = response.status.observedGeneration ?? 0
  const conditions = (response.status.conditions ?? []).filter((c) => c.type !== 'Ready')
  conditions.push(condition('Ready', false, 'ResourceLimit', message, generation))
  return { ...response, status: { ...response.status, lastError: truncate(message, 256), checksum: '', conditions: sortConditions(conditions) } }
}

/**
 * Status for a sync whose report the exporter dropped as older than the one it holds: status
 * must not move backwards, so observedGeneration and checksum are the held report's, every
 * condition is raised to that generation, and Stale says why. The counts are this sync's.
 */
export function staleTargetSync(
  response: SyncResponse<TargetStatus>, stale: { message: string; heldGeneration: number; heldChecksum: string },
): SyncResponse<TargetStatus> {
  const generation = Math.max(stale.heldGeneration, response.status.observedGeneration ?? 0)
  const conditions = (response.status.conditions ?? []).map((c): Condition => ({ ...c, observedGeneration: Math.max(c.observedGeneration ?? 0, generation) }))
  conditions.push(condition('Stale', true, 'StaleReportDropped', stale.message, generation))
  return { ...response, status: { ...response.status, observedGeneration: generation, checksum: stale.heldChecksum, conditions: sortConditions(conditions) } }
}

/**
 * Status for a sync some of whose objects were older (metadata.generation) than the items the
 * exporter holds for them: those keep the held items, and Degraded says how many.
 */
export function staleItemsTargetSync(response: SyncResponse<TargetStatus>, staleItems: number): SyncResponse<TargetStatus> {
  const generation = response.status.observedGeneration ?? 0
  const message = `${staleItems} ${staleItems === 1 ? 'object was' : 'objects were'} older (metadata.generation) than the exporter's items for them; ` +
    'the newer items were kept'
  const conditions = response.status.conditions ?? []
  const degraded = conditions.find((c) => c.type === 'Degraded')
  const rest = conditions.filter((c) => c !== degraded)
  // One condition per type: an existing Degraded keeps its reason and gains the message.
  rest.push(degraded
    ? { ...degraded, message: truncate(`${degraded.message}; ${message}`) }
    : condition('Degraded', true, 'StaleItemsKept', message, generation))
  return { ...response, status: { ...response.status, conditions: sortConditions(rest) } }
}
