// The pure half of `kollect preview`: the sync request Metacontroller would send for objects
// read from a file or a cluster, run through the target sync hook itself. No selection or
// extraction of its own, so the preview cannot disagree with the hook.
import type { KubeObject, ResourceSpec } from '../api/types.js'
import { DEFAULT_LIMITS } from '../hooks/limits.js'
import { isClusterScoped, wellKnownNamespaced, wellKnownPlural, type PluralResolution } from '../hooks/plural.js'
import { typeKey, type ObjectMap, type SyncRequest } from '../hooks/request.js'
import { SCOPE_KEY } from '../hooks/scope.js'
import { splitApiVersion } from '../hooks/select.js'
import { PROFILE_KEY, syncTarget, type ObjectOutcome, type TargetSyncResult } from '../hooks/target.js'

export interface PreviewInput {
  /** The KollectTarget, with its namespace (and generation) filled in. */
  target: KubeObject
  /** The profile to use; it is related under the name the target's profileRef gives, in the target's namespace. */
  profile: KubeObject
  /** KollectScopes of the target's namespace; their own namespace is ignored. */
  scopes: KubeObject[]
  objects: KubeObject[]
  plural: PluralResolution
  /** Called after each object of the target's kind the hook looked at. */
  progress?: (done: number, total: number) => void
}

export interface PreviewSync extends TargetSyncResult {
  request: SyncRequest
  /** Each object's outcome by its related key, in the hook's order. */
  outcomes: Map<string, ObjectOutcome>
  /** Objects of another kind, left out of the request. */
  otherKinds: number
  /** Objects whose key was seen before; the last copy is used, as in a map. */
  duplicates: number
}

const nameOf = (o: KubeObject) => o.metadata?.name ?? ''

export function previewSync(input: PreviewInput): PreviewSync {
  const { target, profile, scopes, objects, plural } = input
  const namespace = target.metadata?.namespace ?? ''
  const spec = target['spec'] as { resource?: ResourceSpec; profileRef?: { name?: unknown } } | undefined
  const res = isResource(spec?.resource) ? spec.resource : undefined
  const selected: ObjectMap = {}
  let otherKinds = 0
  let duplicates = 0
  const clusterScoped = res ? isClusterScoped(res, plural) : false
  for (const object of objects) {
    if (!res || !sameType(object, res)) {
      otherKinds++
      continue
    }
    const name = object.metadata?.name ?? ''
    // v2 keys: a bare name for an object without a namespace, whatever the kind resolved as.
    const key = clusterScoped || !object.metadata?.namespace ? name : `${object.metadata.namespace}/${name}`
    if (Object.hasOwn(selected, key)) duplicates++
    selected[key] = object
  }
  const wanted = typeof spec?.profileRef?.name === 'string' && spec.profileRef.name !== '' ? spec.profileRef.name : nameOf(profile)
  const request: SyncRequest = {
    controller: {},
    parent: target,
    children: {},
    related: {
      [PROFILE_KEY]: { [`${namespace}/${wanted}`]: { ...profile, metadata: { ...profile.metadata, namespace, name: wanted } } },
      [SCOPE_KEY]: Object.fromEntries(scopes.map((s) => [`${namespace}/${nameOf(s)}`, { ...s, metadata: { ...s.metadata, namespace } }])),
      ...(res ? { [typeKey(res.group, res.version, res.kind)]: selected } : {}),
    },
    finalizing: false,
  }
  const outcomes = new Map<string, ObjectOutcome>()
  const total = Object.keys(selected).length
  const result = syncTarget(request, {
    plural,
    limits: DEFAULT_LIMITS,
    observe: (key, outcome) => {
      outcomes.set(key, outcome)
      input.progress?.(outcomes.size, total)
    },
  })
  return { ...result, request, outcomes, otherKinds, duplicates }
}

function isResource(res: unknown): res is ResourceSpec {
  const r = res as Partial<ResourceSpec> | undefined
  return typeof r === 'object' && r !== null && typeof r.kind === 'string' && typeof r.version === 'string'
}

/** Offline there is no discovery: the spec's plural, or the well-known one. */
export function offlinePlural(res: ResourceSpec | undefined): PluralResolution {
  if (!isResource(res)) return { plural: null, source: 'unresolved', message: 'spec.resource needs version and kind' }
  if (res.plural) return { plural: res.plural, source: 'spec', namespaced: wellKnownNamespaced(res) }
  const known = wellKnownPlural(res)
  if (known) return { plural: known, source: 'well-known', namespaced: wellKnownNamespaced(res) }
  // Only listing needs the plural, and offline the objects are already listed.
  return { plural: `${res.kind.toLowerCase()}s`, source: 'unresolved' }
}

function sameType(object: KubeObject, res: ResourceSpec): boolean {
  const [group, version] = splitApiVersion(object.apiVersion ?? '')
  return object.kind === res.kind && group === (res.group ?? '') && version === res.version
}

export function describeType(res: ResourceSpec): string {
  return `${res.group ? `${res.group}/` : ''}${res.version} ${res.kind}`
}
