import { specProblems } from '../api/crd-schemas.js'
import {
  API_VERSION, type FinalizeResult, type InventoryComposition, type InventoryExportState, type InventoryStatus,
  type KollectInventorySpec, type KollectSinkSpec, type ObjectRef, type ResolvedSink,
} from '../api/types.js'
import { MAX_DURATION_MS, durationProblem, formatDuration, parseDuration } from '../api/duration.js'
import {
  parentGeneration, parentRef, parentSpec, related, relatedOne, typeKey,
  type CustomizeRequest, type CustomizeResponse, type RelatedRule, type SyncRequest, type SyncResponse,
} from './request.js'
import { hasSinks, inventoryStatus, type Composed, type Problem } from './inventory-status.js'
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
/** Problems that leave a named sink out of the composition. */

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
