import type { Condition, InventoryComposition, InventoryExportState, InventoryStatus, KubeObject, ObjectRef, SinkExportState } from '../api/types.js'
import { formatDuration } from '../api/duration.js'
import { condition, sortConditions, truncate } from './conditions.js'
import { parentGeneration, relatedOne, typeKey, type SyncRequest } from './request.js'

// An inventory's status: a pure function of the request's composition (inventory.ts) and what the
// exporter says it holds.

const TARGET_KEY = typeKey('kollect.dev', 'v1alpha1', 'KollectTarget')
const WAITING_TARGETS_NAMED = 5
const TARGET_READY_LIMIT = 160
const SINK_PROBLEMS = new Set(['ScopeSinkDenied', 'ScopeSecretDenied', 'SinkNotFound'])

export interface Problem {
  reason: string
  message: string
}

export type Composed =
  | { ok: true; composition: InventoryComposition; problems: Problem[] }
  | { ok: false; problems: Problem[] }

/** Status as a pure function of the request's composition and the exporter's recorded state. */
export function inventoryStatus(req: SyncRequest, composed: Composed, state: InventoryExportState | null): InventoryStatus {
  const generation = parentGeneration(req.parent)
  if (!composed.ok || !state) {
    const p = composed.problems[0] ?? { reason: 'ExporterUnavailable', message: 'the exporter did not answer' }
    return {
      observedGeneration: generation,
      itemCount: 0,
      checksum: '',
      targetCount: 0,
      sinks: [],
      conditions: sortConditions([
        condition('Ready', false, p.reason, p.message, generation),
        condition('Synced', 'Unknown', p.reason, p.message, generation),
        condition('Degraded', true, p.reason, p.message, generation),
      ]),
    }
  }
  const { composition, problems } = composed
  const blocking = problems.filter((p) => p.reason !== 'DebounceRaised')
  // Every named sink refused or missing: nothing can be written, so Ready must not say Resolved.
  if (!hasSinks(composition) && !blocking.some((p) => SINK_PROBLEMS.has(p.reason))) blocking.push({ reason: 'NoSinks', message: 'no sink to export to' })
  const failing = state.sinks.filter((s) => s.state === 'Failing')
  const pending = state.sinks.filter((s) => s.state === 'Pending')
  const drifted = state.sinks.filter((s) => s.state === 'Drifted')
  const reviewing = state.sinks.filter((s) => s.state === 'AwaitingReview')
  const unverified = state.sinks.filter((s) => s.state === 'Unverified')
  const troubled = [...failing, ...unverified, ...drifted]
  const blocker = blocking[0] as Problem // read only while blocking is not empty
  const conditions: Condition[] = [
    blocking.length > 0
      ? condition('Ready', false, blocker.reason, blocking.map((p) => p.message).join('; '), generation)
      : condition('Ready', true, 'Resolved', `${composition.targets.length} targets, ${state.sinks.length} sinks`, generation),
    syncedCondition(req, composed, state, { pending, failing, drifted, reviewing, unverified }, generation),
    troubled.length > 0 || blocking.length > 0
      ? condition('Degraded', true, failing[0] ? 'SinkFailing' : unverified[0] ? 'SinkUnverified' : drifted[0] ? 'SinkDrifted' : blocker.reason,
        [...troubled.map((s) => `${s.namespace}/${s.name}: ${s.message}`), ...blocking.map((p) => p.message)].join('; '), generation)
      : condition('Degraded', false, 'AsExpected', problems.map((p) => p.message).join('; '), generation),
  ]
  const status: InventoryStatus = {
    observedGeneration: generation,
    itemCount: state.itemCount,
    checksum: state.checksum,
    targetCount: composition.targets.length,
    sinks: state.sinks,
    conditions: sortConditions(conditions),
  }
  if (state.lastExportTime) status.lastExportTime = state.lastExportTime
  return status
}

type SinkGroups = Record<'pending' | 'failing' | 'drifted' | 'reviewing' | 'unverified', SinkExportState[]>

function syncedCondition(req: SyncRequest, composed: Composed & { ok: true }, state: InventoryExportState, groups: SinkGroups, generation: number): Condition {
  const c = composed.composition
  if (c.suspend) return condition('Synced', false, 'Suspended', 'inventory is suspended; nothing is exported', generation)
  // Before WaitingForTargets: once the targets report there would still be nowhere to write.
  if (!hasSinks(c)) return condition('Synced', false, 'NoSinks', noSinksMessage(composed.problems), generation)
  if (!state.complete) return condition('Synced', false, 'WaitingForTargets', waitingMessage(req, state.missingTargets), generation)
  if (groups.failing.length > 0) return condition('Synced', false, 'Failing', `${groups.failing.length} of ${state.sinks.length} sinks failing`, generation)
  if (state.pending) {
    const message = `a change waits for the ${formatDuration(c.debounceMs)} debounce; checksum and itemCount are the last export's`
    return condition('Synced', false, 'Pending', message, generation)
  }
  if (groups.pending.length > 0) return condition('Synced', false, 'Pending', `${groups.pending.length} of ${state.sinks.length} sinks pending`, generation)
  if (groups.reviewing.length > 0) {
    const requests = groups.reviewing.map((s) => `${s.namespace}/${s.name} ${s.reviewUrl ?? ''}`.trim()).join(', ')
    return condition('Synced', false, 'AwaitingReview', `${groups.reviewing.length} of ${state.sinks.length} sinks await review: ${requests}`, generation)
  }
  if (groups.unverified.length > 0) return condition('Synced', false, 'Unverified',
    `${groups.unverified.length} of ${state.sinks.length} sinks cannot be checked for drift; the checks are retried`, generation)
  if (groups.drifted.length > 0) return condition('Synced', false, 'Drifted',
    `${groups.drifted.length} of ${state.sinks.length} sinks hold changes made outside Kollect (drift policy Report)`, generation)
  // Synced=True only where a sink holds the export: never "exported to 0 sinks".
  if (state.sinks.length === 0) return condition('Synced', false, 'NoSinks', noSinksMessage(composed.problems), generation)
  return condition('Synced', true, 'Exported', `${state.itemCount} items exported to ${state.sinks.length} sinks`, generation)
}

export function hasSinks(c: InventoryComposition): boolean {
  return c.sinks.length > 0 || c.useDefaultSink !== false
}

function noSinksMessage(problems: Problem[]): string {
  const refused = problems.filter((p) => SINK_PROBLEMS.has(p.reason)).map((p) => p.message)
  return `no sink to export to${refused.length > 0 ? `: ${refused.join('; ')}` : ''}`
}

/**
 * A target that fails its own sync (a misspelt kind) never reports, so the wait names the
 * targets and, from the related KollectTarget, why each is not ready.
 */
function waitingMessage(req: SyncRequest, missing: ObjectRef[]): string {
  const sorted = [...missing].sort((a, b) => compareKeys(`${a.namespace}/${a.name}`, `${b.namespace}/${b.name}`))
  const named = sorted.slice(0, WAITING_TARGETS_NAMED).map((t) => {
    const ready = notReady(relatedOne(req, TARGET_KEY, t))
    return ready ? `${t.name} (${ready})` : t.name
  })
  const more = sorted.length - named.length
  return `waiting for targets to report: ${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}`
}

function notReady(target: KubeObject | undefined): string {
  if (!target) return ''
  const conditions = (target['status'] as { conditions?: Condition[] } | undefined)?.conditions
  const ready = Array.isArray(conditions) ? conditions.find((x) => x?.type === 'Ready') : undefined
  if (!ready) return 'no status yet'
  if (ready.status === 'True') return ''
  return truncate(`Ready=${String(ready.status)} ${String(ready.reason)}: ${String(ready.message ?? '')}`, TARGET_READY_LIMIT)
}

function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}
