import type { KubeObject, LabelSelector } from '../api/types.js'
import { celError, type CelProgram } from './cel.js'
import { ResourceLimitError } from './limits.js'
import type { EffectiveScope } from './scope.js'

// Selection is a chain of named predicates. Each returns null when the object passes, or why it
// does not: a typed rejection that callers branch on, with describeRejection for logs and status.
export type Rejection =
  | { type: 'namespaceDenied'; namespace: string }
  | { type: 'namespaceNotSelected'; namespace: string }
  | { type: 'clusterScopedNotAllowed' }
  | { type: 'labelsDoNotMatch' }
  | { type: 'matchPolicyFailed'; error: string }
  | { type: 'matchPolicyNotBool' }
  | { type: 'matchPolicyFalse' }
  | { type: 'kindNotAllowed'; kind: string }

export type Predicate = (object: KubeObject) => Rejection | null

export function describeRejection(r: Rejection): string {
  switch (r.type) {
    case 'namespaceDenied': return `namespace ${r.namespace} is denied by scope`
    case 'namespaceNotSelected': return `namespace ${r.namespace} is not selected`
    case 'clusterScopedNotAllowed': return 'cluster-scoped, and the scope does not allow all namespaces ("*")'
    case 'labelsDoNotMatch': return 'labels do not match labelSelector'
    case 'matchPolicyFailed': return `matchPolicy failed: ${r.error}`
    case 'matchPolicyNotBool': return 'matchPolicy did not return a bool'
    case 'matchPolicyFalse': return 'matchPolicy is false'
    case 'kindNotAllowed': return `${r.kind} is not allowed by scope`
  }
}

export function matchesSelector(labels: Record<string, string> | undefined, selector: LabelSelector | undefined): boolean {
  return labelMatcher(selector)(labels)
}

/** The selector's matchLabels read once, not once per object: a target's selector meets 10,000 objects a sync. */
function labelMatcher(selector: LabelSelector | undefined): (labels: Record<string, string> | undefined) => boolean {
  if (!selector) return () => true
  const pairs = Object.entries(selector.matchLabels ?? {})
  const expressions = selector.matchExpressions ?? []
  return (labels) => matchesParts(labels ?? {}, pairs, expressions)
}

function matchesParts(l: Record<string, string>, pairs: readonly [string, string][], expressions: NonNullable<LabelSelector['matchExpressions']>): boolean {
  for (const [k, v] of pairs) {
    if (l[k] !== v) return false
  }
  for (const req of expressions) {
    const has = Object.prototype.hasOwnProperty.call(l, req.key)
    const values = req.values ?? []
    switch (req.operator) {
      case 'In':
        if (!has || !values.includes(l[req.key] as string)) return false
        break
      case 'NotIn':
        if (has && values.includes(l[req.key] as string)) return false
        break
      case 'Exists':
        if (!has) return false
        break
      case 'DoesNotExist':
        if (has) return false
        break
      default:
        return false
    }
  }
  return true
}

export function inNamespace(allowed: ReadonlySet<string> | '*', denied: ReadonlySet<string>): Predicate {
  return (object) => {
    const ns = object.metadata?.namespace ?? ''
    if (denied.has(ns)) return { type: 'namespaceDenied', namespace: ns }
    if (allowed !== '*' && !allowed.has(ns)) return { type: 'namespaceNotSelected', namespace: ns }
    return null
  }
}

/**
 * inNamespace for a kind resolved as namespaced. An object without a namespace is
 * cluster-scoped whatever the resolution said (a table or a guess can be wrong), and like any
 * cluster-scoped object it needs a scope that allows all namespaces.
 */
export function inNamespaceOrCluster(allowed: ReadonlySet<string> | '*', denied: ReadonlySet<string>, allowsAll: boolean): Predicate {
  const namespaced = inNamespace(allowed, denied)
  return (object) => {
    if (object.metadata?.namespace) return namespaced(object)
    return allowsAll ? null : { type: 'clusterScopedNotAllowed' }
  }
}

export function matchesLabels(selector: LabelSelector | undefined): Predicate {
  const matches = labelMatcher(selector)
  return (object) => (matches(object.metadata?.labels) ? null : { type: 'labelsDoNotMatch' })
}

export function passesMatchPolicy(program: CelProgram | undefined): Predicate {
  return (object) => {
    if (!program) return null
    let result: unknown
    try {
      result = program({ object })
    } catch (err) {
      if (err instanceof ResourceLimitError) throw new ResourceLimitError(`matchPolicy: ${err.message}`)
      return { type: 'matchPolicyFailed', error: celError(err).message }
    }
    if (typeof result !== 'boolean') return { type: 'matchPolicyNotBool' }
    return result ? null : { type: 'matchPolicyFalse' }
  }
}

export function allowedByScope(scope: EffectiveScope): Predicate {
  // A sync's objects share one apiVersion and kind: the last answer is kept.
  let apiVersion: unknown
  let kind: unknown
  let allowed = false
  return (object) => {
    if (object.apiVersion !== apiVersion || object.kind !== kind || apiVersion === undefined) {
      const [group] = splitApiVersion(object.apiVersion ?? '')
      allowed = scope.resourceAllowed(group, object.kind ?? '')
      apiVersion = object.apiVersion
      kind = object.kind
    }
    return allowed ? null : { type: 'kindNotAllowed', kind: String(object.kind) }
  }
}

export function splitApiVersion(apiVersion: string): [group: string, version: string] {
  const i = apiVersion.indexOf('/')
  return i < 0 ? ['', apiVersion] : [apiVersion.slice(0, i), apiVersion.slice(i + 1)]
}

/** The first failing predicate's rejection, or null when all pass. */
export function select(object: KubeObject, predicates: readonly Predicate[]): Rejection | null {
  for (const p of predicates) {
    const reason = p(object)
    if (reason !== null) return reason
  }
  return null
}
