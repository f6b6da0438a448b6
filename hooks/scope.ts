import type { KollectScopeSpec, ObjectRef } from '../api/types.js'
import { MAX_DURATION_MS, parseDuration } from '../api/duration.js'
import { isCoreSecretResource } from './core-secret.js'
import { parentSpec, related, typeKey, type SyncRequest } from './request.js'

export const SCOPE_KEY = typeKey('kollect.dev', 'v1alpha1', 'KollectScope')

/**
 * The KollectScopes of one namespace among the related ones. Only a namespace's own scopes
 * govern it: an inventory also relates the scopes of its sinks' namespaces, and a scope from
 * elsewhere must never widen (or narrow) what this namespace may do.
 */
export function scopesOf(req: SyncRequest, namespace: string): { name: string; spec: KollectScopeSpec }[] {
  return related(req, SCOPE_KEY)
    .filter(({ object }) => object.metadata?.namespace === namespace)
    .map(({ object }) => ({ name: object.metadata?.name ?? '', spec: parentSpec<KollectScopeSpec>(object) }))
}

/** A sink's secretRef: the namespace is the sink's when absent or empty. */
export interface SecretRef {
  name: string
  namespace?: string
}

/** The namespace a secretRef points into. */
export function secretNamespace(sinkNamespace: string, ref: SecretRef): string {
  return typeof ref.namespace === 'string' && ref.namespace !== '' ? ref.namespace : sinkNamespace
}

/**
 * What a namespace may do, combined from all KollectScopes in it. Several scopes combine to
 * the most restrictive reading: allowed sets intersect, denied sets unite, the largest
 * minDebounce wins. A scope that leaves a list out takes the default for that list.
 */
export interface EffectiveScope {
  /** Namespaces the namespace's targets may select, or "*" for any not denied. */
  allowedNamespaces: ReadonlySet<string> | '*'
  deniedNamespaces: ReadonlySet<string>
  resourceAllowed(group: string, kind: string): boolean
  sinkAllowed(sink: ObjectRef): boolean
  /**
   * Whether a sink in sinkNamespace may read the Secret ref (its namespace defaults to the
   * sink's). Only this scope's own namespace can be granted foreign Secrets.
   */
  secretAllowed(sinkNamespace: string, ref: SecretRef): boolean
  minDebounceMs: number
  /** Names of the scopes that were combined, for messages. */
  sources: string[]
}

export function effectiveScope(namespace: string, scopes: { name: string; spec: KollectScopeSpec }[]): EffectiveScope {
  let allowed: Set<string> | '*' = scopes.length === 0 ? new Set([namespace]) : '*'
  const denied = new Set<string>()
  // null: that scope left allowedResources out, so its default (anything but core Secrets) applies.
  const resourceLists: ({ group: string; kind: string }[] | null)[] = []
  const sinkLists: Set<string>[] = []
  const secretLists: Set<string>[] = []
  let minDebounceMs = 0
  for (const { spec } of scopes) {
    const own: Set<string> | '*' = Array.isArray(spec.allowedNamespaces) && spec.allowedNamespaces.length > 0
      ? (spec.allowedNamespaces.includes('*') ? '*' : new Set(spec.allowedNamespaces))
      : new Set([namespace])
    allowed = intersect(allowed, own)
    for (const ns of spec.deniedNamespaces ?? []) denied.add(ns)
    resourceLists.push(Array.isArray(spec.allowedResources) && spec.allowedResources.length > 0
      ? spec.allowedResources.map((r) => ({ group: r.group ?? '', kind: r.kind }))
      : null)
    sinkLists.push(new Set((spec.allowedSinks ?? []).map((s) => `${s.namespace}/${s.name}`)))
    secretLists.push(new Set((spec.allowedSecrets ?? []).map((s) => `${s.namespace}/${s.name}`)))
    // Past the maximum (admission bypassed): the maximum, never nothing, so a scope still binds.
    const d = spec.minDebounce ? Math.min(parseDuration(spec.minDebounce) ?? MAX_DURATION_MS, MAX_DURATION_MS) : 0
    if (d > minDebounceMs) minDebounceMs = d
  }
  if (scopes.length === 0) {
    sinkLists.push(new Set())
    secretLists.push(new Set())
  }
  const isSecret = isCoreSecretResource
  return {
    allowedNamespaces: allowed,
    deniedNamespaces: denied,
    resourceAllowed: (group, kind) => {
      if (resourceLists.length === 0) return !isSecret(group, kind)
      return resourceLists.every((list) => list === null
        ? !isSecret(group, kind)
        : list.some((r) => r.group === group && (r.kind === kind || (r.kind === '*' && !isSecret(group, kind)))))
    },
    // A team always owns the sinks in its own namespace; other namespaces' sinks need every scope's consent.
    sinkAllowed: (sink) => sink.namespace === namespace || sinkLists.every((set) => set.has(`${sink.namespace}/${sink.name}`)),
    // A sink always uses its own namespace's Secrets; another namespace's needs every scope's consent.
    secretAllowed: (sinkNamespace, ref) => {
      const ns = secretNamespace(sinkNamespace, ref)
      if (ns === sinkNamespace) return true
      return sinkNamespace === namespace && typeof ref.name === 'string' && secretLists.every((set) => set.has(`${ns}/${ref.name}`))
    },
    minDebounceMs,
    sources: scopes.map((s) => s.name).sort(),
  }
}

/** " (KollectScope a, b)" or the no-scope default, for condition messages. */
export function scopeNames(scope: EffectiveScope): string {
  return scope.sources.length > 0 ? ` (KollectScope ${scope.sources.join(', ')})` : ' (no KollectScope: own namespace only)'
}

/**
 * Why a sink may not use its secretRef, or null when it may (or names none). `scope` is the
 * effective scope of the sink's own namespace. The message names the Secret, never its data.
 */
export function secretDenial(sink: ObjectRef, ref: SecretRef | undefined, scope: EffectiveScope): string | null {
  if (!ref || scope.secretAllowed(sink.namespace, ref)) return null
  return `Secret ${secretNamespace(sink.namespace, ref)}/${String(ref.name)} of KollectSink ${sink.namespace}/${sink.name} ` +
    `is not allowed by the scope of namespace ${sink.namespace}${scopeNames(scope)}`
}

function intersect(a: Set<string> | '*', b: Set<string> | '*'): Set<string> | '*' {
  if (a === '*') return b
  if (b === '*') return a
  return new Set([...a].filter((x) => b.has(x)))
}

/** The namespaces a target may read: requested ∩ allowed − denied, and the requested ones refused. */
export function resolveNamespaces(requested: string[], scope: EffectiveScope): { effective: Set<string> | '*'; refused: string[] } {
  const refused: string[] = []
  if (requested.includes('*')) {
    if (scope.allowedNamespaces === '*') return { effective: '*', refused }
    return { effective: new Set([...scope.allowedNamespaces].filter((ns) => !scope.deniedNamespaces.has(ns))), refused }
  }
  const effective = new Set<string>()
  for (const ns of requested) {
    const ok = !scope.deniedNamespaces.has(ns) && (scope.allowedNamespaces === '*' || scope.allowedNamespaces.has(ns))
    if (ok) effective.add(ns)
    else refused.push(ns)
  }
  return { effective, refused: refused.sort() }
}
