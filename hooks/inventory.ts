import { specProblems } from '../api/crd-schemas.js'
import {
  API_VERSION, type Condition, type FinalizeResult, type InventoryComposition, type InventoryExportState, type InventoryStatus, type SinkExportState,
  type KollectInventorySpec, type KollectSinkSpec, type KubeObject, type ObjectRef, type ResolvedSink,
} from '../api/types.js'
import { condition, sortConditions, truncate } from './conditions.js'
import { MAX_DURATION_MS, durationProblem, formatDuration, parseDuration } from '../api/duration.js'
import {
  parentGeneration, parentRef, parentSpec, related, relatedOne, typeKey,
  type CustomizeRequest, type CustomizeResponse, type RelatedRule, type SyncRequest, type SyncResponse,
} from './request.js'
import { effectiveScope, scopesOf, secretDenial, type EffectiveScope } from './scope.js'

const TARGET_KEY = typeKey('kollect.dev', 'v1alpha1', 'KollectTarget')
const SINK_KEY = typeKey('kollect.dev', 'v1alpha1', 'KollectSink')

export const DEFAULT_DEBOUNCE_MS = 10_000
export const DEFAULT_MAX_WAIT_MS = 120_000
/** Resync bounds: a missing target or a failing sink's running retry may end any time; a write usually lands within seconds. */
const WAITING_RESYNC_SECONDS = 10
const IN_FLIGHT_RESYNC_SECONDS = 2
const MAX_RESYNC_SECONDS = 60
/** How many waited-for targets WaitingForTargets names, each with its own Ready; the rest are counted. */
const WAITING_TARGETS_NAMED = 5
const TARGET_READY_LIMIT = 160
/** Problems that leave a named sink out of the composition. */
const SINK_PROBLEMS = new Set(['ScopeSinkDenied', 'ScopeSecretDenied', 'SinkNotFound'])

export function customizeInventory(req: CustomizeRequest): CustomizeResponse {
  const { namespace } = parentRef(req.parent)
  const spec = parentSpec<KollectInventorySpec>(req.parent)
  const rules: RelatedRule[] = [{ apiVersion: API_VERSION, resource: 'kollectscopes', namespace, labelSelector: {} }]
  const targetNames = names(spec.targetRefs)
  if (targetNames.length > 0) rules.push({ apiVersion: API_VERSION, resource: 'kollecttargets', namespace, names: targetNames })
  else if (spec.targetSelector) {
    const { matchLabels, matchExpressions } = spec.targetSelector
    const labelSelector = { matchLabels: matchLabels ?? {}, ...(matchExpressions ? { matchExpressions } : {}) }
    rules.push({ apiVersion: API_VERSION, resource: 'kollecttargets', namespace, labelSelector })
  }
  const byNamespace = new Map<string, Set<string>>()
  for (const ref of Array.isArray(spec.sinkRefs) ? spec.sinkRefs : []) {
    if (typeof ref?.name !== 'string') continue
    const ns = typeof ref.namespace === 'string' && ref.namespace !== '' ? ref.namespace : namespace
    byNamespace.set(ns, (byNamespace.get(ns) ?? new Set()).add(ref.name))
  }
  const namespaces = [...byNamespace.keys()].sort()
  for (const ns of namespaces) {
    rules.push({ apiVersion: API_VERSION, resource: 'kollectsinks', namespace: ns, names: [...(byNamespace.get(ns) as Set<string>)].sort() })
  }
  // A sink's Secret is governed by the scopes of the sink's own namespace.
  for (const ns of namespaces) {
    if (ns !== namespace) rules.push({ apiVersion: API_VERSION, resource: 'kollectscopes', namespace: ns, labelSelector: {} })
  }
  return { relatedResources: rules }
}

function names(refs: { name: string }[] | undefined): string[] {
  return Array.isArray(refs) ? [...new Set(refs.map((r) => r?.name).filter((n): n is string => typeof n === 'string' && n !== ''))].sort() : []
}

interface Problem {
  reason: string
  message: string
}

export type Composed =
  | { ok: true; composition: InventoryComposition; problems: Problem[] }
  | { ok: false; problems: Problem[] }

/** Resolve the inventory's targets, sinks and debounce from the request alone. */
export function composeInventory(req: SyncRequest): Composed {
  const ref = parentRef(req.parent)
  const spec = parentSpec<KollectInventorySpec>(req.parent)
  const invalid = specProblems('KollectInventory', spec)
  if (invalid.length > 0) return { ok: false, problems: [{ reason: 'InvalidSpec', message: invalid.join('; ') }] }
  // The CRD's rule, re-checked for clusters whose admission was bypassed.
  const tooLong = (['debounce', 'maxWait'] as const).flatMap((field) => {
    const problem = spec[field] === undefined ? null : durationProblem(`spec.${field}`, spec[field], MAX_DURATION_MS)
    return problem ? [problem] : []
  })
  if (tooLong.length > 0) return { ok: false, problems: [{ reason: 'InvalidSpec', message: tooLong.join('; ') }] }

  const problems: Problem[] = []
  const scope = effectiveScope(ref.namespace, scopesOf(req, ref.namespace))
  const scopes = new Map<string, EffectiveScope>([[ref.namespace, scope]])
  const scopeOf = (namespace: string): EffectiveScope => {
    let s = scopes.get(namespace)
    if (!s) scopes.set(namespace, s = effectiveScope(namespace, scopesOf(req, namespace)))
    return s
  }
  const targets: ObjectRef[] = []
  const targetNames = names(spec.targetRefs)
  if (targetNames.length > 0) {
    const missing: string[] = []
    for (const name of targetNames) {
      if (relatedOne(req, TARGET_KEY, { namespace: ref.namespace, name })) targets.push({ namespace: ref.namespace, name })
      else missing.push(name)
    }
    if (missing.length > 0) problems.push({ reason: 'TargetNotFound', message: `KollectTarget not found in ${ref.namespace}: ${missing.join(', ')}` })
  } else {
    for (const { object } of related(req, TARGET_KEY)) {
      if (object.metadata?.namespace === ref.namespace && object.metadata.name) targets.push({ namespace: ref.namespace, name: object.metadata.name })
    }
  }

  const sinks: ResolvedSink[] = []
  const denied: string[] = []
  const secretsDenied: string[] = []
  const missing: string[] = []
  const seen = new Set<string>()
  for (const s of Array.isArray(spec.sinkRefs) ? spec.sinkRefs : []) {
    const sinkRef = { namespace: s.namespace || ref.namespace, name: s.name }
    const key = `${sinkRef.namespace}/${sinkRef.name}`
    if (seen.has(key)) continue
    seen.add(key)
    if (!scope.sinkAllowed(sinkRef)) {
      denied.push(key)
      continue
    }
    const object = relatedOne(req, SINK_KEY, sinkRef)
    if (!object) {
      missing.push(key)
      continue
    }
    const sinkSpec = parentSpec<KollectSinkSpec>(object)
    const secretDenied = secretDenial(sinkRef, sinkSpec.secretRef, scopeOf(sinkRef.namespace))
    if (secretDenied) secretsDenied.push(secretDenied)
    else sinks.push({ ...sinkRef, spec: sinkSpec })
  }
  if (denied.length > 0) {
    problems.push({ reason: 'ScopeSinkDenied', message: `sinks not allowed by the scope of namespace ${ref.namespace}: ${denied.join(', ')}` })
  }
  if (secretsDenied.length > 0) problems.push({ reason: 'ScopeSecretDenied', message: secretsDenied.join('; ') })
  if (missing.length > 0) problems.push({ reason: 'SinkNotFound', message: `KollectSink not found: ${missing.join(', ')}` })

  let debounceMs = spec.debounce ? (parseDuration(spec.debounce) ?? DEFAULT_DEBOUNCE_MS) : DEFAULT_DEBOUNCE_MS
  if (debounceMs < scope.minDebounceMs) {
    const message = `debounce ${formatDuration(debounceMs)} raised to the scope minimum ${formatDuration(scope.minDebounceMs)}`
    problems.push({ reason: 'DebounceRaised', message })
    debounceMs = scope.minDebounceMs
  }
  const maxWaitMs = Math.max(debounceMs, spec.maxWait ? (parseDuration(spec.maxWait) ?? DEFAULT_MAX_WAIT_MS) : DEFAULT_MAX_WAIT_MS)

  return {
    ok: true,
    problems,
    composition: {
      inventory: ref,
      generation: parentGeneration(req.parent),
      targets,
      sinks,
      useDefaultSink: !Array.isArray(spec.sinkRefs) || spec.sinkRefs.length === 0,
      debounceMs,
      maxWaitMs,
      suspend: spec.suspend === true,
    },
  }
}

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

function hasSinks(c: InventoryComposition): boolean {
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

export function syncInventoryResponse(req: SyncRequest, composed: Composed, state: InventoryExportState | null): SyncResponse<InventoryStatus> {
  const response: SyncResponse<InventoryStatus> = { status: inventoryStatus(req, composed, state), children: [] }
  const resync = composed.ok && state ? resyncAfterSeconds(composed.composition, state) : undefined
  if (resync !== undefined) response.resyncAfterSeconds = resync
  return response
}

/**
 * Metacontroller calls back only on events or its periodic resync; the exporter cannot call it, so
 * while the status is bound to change (debounce, retry, write in flight) the answer asks for a call.
 */
export function resyncAfterSeconds(c: InventoryComposition, state: InventoryExportState): number | undefined {
  // Nowhere to write: only a sink or scope change helps, and that is an event.
  if (c.suspend || !hasSinks(c)) return undefined
  if (!state.complete) return WAITING_RESYNC_SECONDS
  // Drifted changes only at the sink's next drift check, minutes away: no reason to call sooner.
  const settled = !state.pending && state.sinks.every((s) => s.state === 'Synced' || s.state === 'Drifted')
  if (settled) return undefined
  // No known time: a write or a failing sink's retry is running.
  if (state.nextChangeInMs === undefined) {
    const retrying = state.sinks.some((s) => s.state === 'Failing' || s.state === 'Unverified')
    return retrying ? WAITING_RESYNC_SECONDS : IN_FLIGHT_RESYNC_SECONDS
  }
  // One second of margin, so the call lands after the timer, not just before it.
  return Math.min(MAX_RESYNC_SECONDS, Math.ceil(state.nextChangeInMs / 1000) + 1)
}

export function finalizeInventoryResponse(req: SyncRequest, composed: Composed, result: FinalizeResult | null): SyncResponse<InventoryStatus> {
  const status = inventoryStatus(req, composed, result?.state ?? null)
  if (result?.finalized) return { status, children: [], finalized: true }
  return { status, children: [], finalized: false, resyncAfterSeconds: 5 }
}
