import { itemHashOfJson, itemJsonWithAttributes, itemKey, itemsChecksum } from '../api/canonical.js'
import { specProblems, validateSpec } from '../api/crd-schemas.js'
import {
  API_VERSION, type Condition, type Item, type KollectProfileSpec, type KollectTargetSpec,
  type KubeObject, type LabelSelector, type TargetReport, type TargetStatus,
} from '../api/types.js'
import { condition, truncate } from './conditions.js'
import { extractObject } from './extract.js'
import { DEFAULT_LIMITS, ResourceLimitError, type ExpressionLimits } from './limits.js'
import { isClusterScoped, type PluralResolution } from './plural.js'
import { compileProfile, describeProblem } from './profile.js'
import {
  apiVersionOf, parentGeneration, parentRef, parentSpec, related, relatedOne, typeKey,
  type CustomizeRequest, type CustomizeResponse, type RelatedRule, type SyncRequest, type SyncResponse,
} from './request.js'
import { effectiveScope, scopeNames, scopesOf } from './scope.js'
import { describeRejection, splitApiVersion, type Rejection } from './select.js'
import { namespacesToRead, selectionFor, selectObject } from './selection.js'
import { abortedTargetSync, NO_COUNTS, targetResponse, type Counts } from './target-status.js'
import { TargetTally, type ItemRecord, type ObjectRecord, type Tallied } from './target-tally.js'

export { abortedTargetSync, finalizeTarget, refusedTargetSync, staleItemsTargetSync, staleTargetSync } from './target-status.js'

export const PROFILE_KEY = typeKey('kollect.dev', 'v1alpha1', 'KollectProfile')

export interface TargetContext {
  plural: PluralResolution
  limits?: ExpressionLimits
  /** Told each object's outcome in turn, so `kollect preview` explains the hook's own pass. */
  observe?: (key: string, outcome: ObjectOutcome) => void
  /** Milliseconds spent per phase (select, extract, hash), added to: the benchmark's per-phase figures. */
  phases?: SyncPhases
  /** Told each object's part in the sync, in key order: an incremental sync keeps them (server/extraction/incremental.ts). */
  records?: RecordSink
}

export interface RecordSink {
  add(key: string, record: ObjectRecord<Item>): void
  /** Every object was tallied: the records are the whole answer's. Not called when a sync fails or stops. */
  complete(tallied: Tallied<Item>): void
}

export interface SyncPhases {
  select: number
  extract: number
  hash: number
}

/** An object the selection rejected, or one it selected with its extraction errors. */
export type ObjectOutcome = { rejection: Rejection } | { errors: readonly string[] }

/** How soon Metacontroller calls sync again while the target's kind is not watched. */
export const NOT_WATCHED_RESYNC_SECONDS = 60

export interface TargetSyncResult {
  response: SyncResponse<TargetStatus>
  /** Items for the exporter; null keeps what it already holds (the spec or profile is broken, or the target is suspended). */
  report: TargetReport | null
  /** Set when a runtime bound stopped the whole sync (the server counts it as shed). */
  stopped?: 'ResourceLimit'
}

/** Related-resource rules from the target's own spec, so Metacontroller's per-generation cache stays right. */
export function customizeTarget(req: CustomizeRequest, ctx: TargetContext): CustomizeResponse {
  const { namespace } = parentRef(req.parent)
  const spec = parentSpec<KollectTargetSpec>(req.parent)
  const rules: RelatedRule[] = [{ apiVersion: API_VERSION, resource: 'kollectscopes', namespace, labelSelector: {} }]
  if (typeof spec.profileRef?.name === 'string' && spec.profileRef.name !== '') {
    rules.push({ apiVersion: API_VERSION, resource: 'kollectprofiles', namespace, names: [spec.profileRef.name] })
  }
  const res = spec.resource
  // An invalid spec selects nothing: Metacontroller decodes rules strictly, and sync reports the problem.
  if (spec.suspend === true || !ctx.plural.plural || !validateSpec('KollectTarget', spec).valid) {
    return { relatedResources: rules }
  }
  const base = { apiVersion: apiVersionOf(res.group, res.version), resource: ctx.plural.plural, labelSelector: plainSelector(spec.labelSelector) }
  const read = namespacesToRead(spec, namespace, isClusterScoped(res, ctx.plural))
  if ('selector' in read) rules.push({ ...base, namespaceSelector: plainSelector(read.selector) })
  else if ('names' in read) for (const ns of read.names) rules.push({ ...base, namespace: ns })
  else rules.push(base)
  return { relatedResources: rules }
}

/** Metacontroller decodes rules strictly: only the two selector fields may appear. */
function plainSelector(selector: LabelSelector | undefined): { matchLabels?: Record<string, string>; matchExpressions?: unknown[] } {
  const out: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] } = {}
  if (selector?.matchLabels) out.matchLabels = selector.matchLabels
  if (selector?.matchExpressions) out.matchExpressions = selector.matchExpressions
  return out
}

export function syncTarget(req: SyncRequest, ctx: TargetContext): TargetSyncResult {
  const limits = ctx.limits ?? DEFAULT_LIMITS
  const ref = parentRef(req.parent)
  const generation = parentGeneration(req.parent)
  const spec = parentSpec<KollectTargetSpec>(req.parent)
  const res = spec.resource
  const resourceStatus = res ? { group: res.group ?? '', version: res.version ?? '', kind: res.kind ?? '', plural: ctx.plural.plural ?? '' } : undefined
  const fail = (reason: string, message: string, report: TargetReport | null = null): TargetSyncResult => ({
    response: targetResponse(
      { ...NO_COUNTS, lastError: truncate(message, 256) }, '', resourceStatus, [condition('Ready', false, reason, message, generation)], generation,
    ),
    report,
  })

  const invalid = specProblems('KollectTarget', spec)
  if (invalid.length > 0) return fail('InvalidSpec', invalid.join('; '))
  // Rules the CRD enforces with CEL; re-checked here for clusters whose admission was bypassed.
  if (Array.isArray(spec.namespaces) && spec.namespaces.length > 0 && spec.namespaceSelector) {
    return fail('InvalidSpec', 'spec.namespaces and spec.namespaceSelector are mutually exclusive')
  }
  if (spec.suspend === true) return fail('Suspended', 'target is suspended; the exporter keeps its last items')
  if (!ctx.plural.plural) return fail('ResourceUnresolved', ctx.plural.message ?? `cannot resolve the plural of ${res.kind}; set spec.resource.plural`)

  const scope = effectiveScope(ref.namespace, scopesOf(req, ref.namespace))
  const group = res.group ?? ''
  const uid = req.parent.metadata?.uid
  const empty = (): TargetReport => ({
    target: ref, generation, ...(uid ? { uid } : {}), checksum: itemsChecksum([]), items: [], failedKeys: [], itemGenerations: [],
  })
  if (!scope.resourceAllowed(group, res.kind)) {
    return fail('ScopeResourceDenied',
      `${res.kind}${group ? '.' + group : ''} is not allowed by the scope of namespace ${ref.namespace}${scopeNames(scope)}`, empty())
  }

  const profileObject = relatedOne(req, PROFILE_KEY, { namespace: ref.namespace, name: spec.profileRef.name })
  if (!profileObject) return fail('ProfileNotFound', `KollectProfile ${ref.namespace}/${spec.profileRef.name} not found`)
  const profile = compileProfile(parentSpec<KollectProfileSpec>(profileObject), limits)
  if (profile.problems.length > 0) {
    return fail('ProfileInvalid', `KollectProfile ${spec.profileRef.name}: ${profile.problems.map(describeProblem).join('; ')}`)
  }

  const built = selectionFor(spec, ref.namespace, scope, { plural: ctx.plural, limits })
  if (!built.ok) return fail(built.problem.reason, built.problem.message, built.problem.scopeForbids ? empty() : null)
  const { selection } = built

  const key = typeKey(res.group, res.version, res.kind)
  // Metacontroller sends every type its cached customize answer asked for, even with no
  // objects: a missing type means that answer was made before the kind existed. It is
  // cached per generation for up to 20 minutes; resyncing until then picks up the new answer.
  if (!Object.hasOwn(req.related ?? {}, key)) {
    const result = fail('ResourceNotWatched', `Metacontroller does not watch ${res.kind}${group ? '.' + group : ''} for this target: ` +
      'its cached customize answer predates the kind. It asks again within 20 minutes; ' +
      'a spec edit makes it ask now (labels and annotations do not count). The exporter keeps the last items')
    return { ...result, response: { ...result.response, resyncAfterSeconds: NOT_WATCHED_RESYNC_SECONDS } }
  }
  const objects = related(req, key)
  const tally = new TargetTally<Item>()
  const phases = ctx.phases
  let mark = phases ? performance.now() : 0
  // Adds the time since the last mark to a phase: two clock reads per object, only when asked.
  const lap = phases ? (phase: keyof SyncPhases) => { const now = performance.now(); phases[phase] += now - mark; mark = now } : () => undefined
  try {
    for (const { key, object } of objects) {
      const { input, rejection } = selectObject(selection, object, profile.redactor)
      lap('select')
      const identity = identityOf(object, res.version, ref)
      let record: ObjectRecord<Item>
      if (rejection !== null) {
        ctx.observe?.(key, { rejection })
        // A policy that errors on one object must not delete that object's exported item.
        record = rejection.type === 'matchPolicyFailed'
          ? { matched: false, failure: describeRejection(rejection), failedKey: itemKey(identity) }
          : NOT_SELECTED
      } else {
        const out = extractObject(input, profile, limits.maxItemBytes)
        lap('extract')
        ctx.observe?.(key, { errors: out.errors })
        record = { matched: true }
        if (out.errors.length > 0) record.failure = out.errors.join('; ')
        if (!out.attributes) record.failedKey = itemKey(identity)
        else {
          const item = orderedItem(identity, out.attributes)
          const json = itemJsonWithAttributes(item, out.json)
          const hash = itemHashOfJson(item, json)
          const generation = typeof object.metadata?.generation === 'number' ? object.metadata.generation : null
          const order: ItemRecord<Item>['order'] = [item.group, item.version, item.kind, item.namespace, item.name, item.uid]
          record.item = { value: item, hash, order, generation, bytes: out.bytes, json }
          lap('hash')
        }
      }
      tally.add(key, record)
      ctx.records?.add(key, record)
      if (tally.itemBytes > limits.maxRequestItemBytes) {
        return fail('OutputTooLarge', `extracted attributes exceed ${limits.maxRequestItemBytes} bytes for one sync; split the target or trim the profile`)
      }
    }
  } catch (err) {
    // A value past a runtime bound is the profile's doing, not one object's: stop the whole sync.
    if (!(err instanceof ResourceLimitError)) throw err
    return { response: abortedTargetSync(req.parent, 'ResourceLimit', `extraction stopped: ${err.message}`), report: null, stopped: 'ResourceLimit' }
  }
  lap('select')
  const tallied = tally.finish()
  const { counts, items, failedKeys, checksum } = tallied
  lap('hash')

  ctx.records?.complete(tallied)
  const conditions = [extractedCondition(counts, generation)]
  if (selection.refused.length > 0) {
    const message = `namespaces not allowed by scope: ${selection.refused.join(', ')}${scopeNames(scope)}`
    conditions.push(condition('Degraded', true, 'ScopeNamespaceDenied', message, generation))
  }
  return {
    response: targetResponse(counts, checksum, resourceStatus, conditions, generation),
    report: {
      target: ref,
      generation,
      ...(uid ? { uid } : {}),
      checksum,
      items: items.map((i) => i.value),
      failedKeys,
      itemHashes: items.map((i) => i.hash),
      itemGenerations: items.map((i) => i.generation),
    },
  }
}

const NOT_SELECTED: ObjectRecord<Item> = Object.freeze({ matched: false })

/** Ready, from what the objects gave. */
export function extractedCondition(counts: Counts, generation: number): Condition {
  return counts.failedCount > 0
    ? condition('Ready', true, 'ExtractedWithErrors', `${counts.failedCount} of ${counts.matchedCount} objects had extraction errors`, generation)
    : condition('Ready', true, 'Extracted', `${counts.extractedCount} of ${counts.matchedCount} matched objects extracted`, generation)
}

/** The item with its keys in code-unit order (its attributes come so from extractObject): hashed natively, see api/canonical.ts. */
function orderedItem(id: Omit<Item, 'attributes'>, attributes: Item['attributes']): Item {
  return {
    attributes, group: id.group, kind: id.kind, name: id.name, namespace: id.namespace,
    target: { name: id.target.name, namespace: id.target.namespace }, uid: id.uid, version: id.version,
  }
}

function identityOf(object: KubeObject, fallbackVersion: string, target: { namespace: string; name: string }): Omit<Item, 'attributes'> {
  const [group, version] = splitApiVersion(object.apiVersion ?? '')
  const meta = object.metadata ?? {}
  const namespace = meta.namespace ?? ''
  const name = meta.name ?? ''
  const kind = object.kind ?? ''
  return {
    group,
    version: version || fallbackVersion,
    kind,
    namespace,
    name,
    uid: meta.uid ?? `${group}/${kind}/${namespace}/${name}`,
    target: { namespace: target.namespace, name: target.name },
  }
}
