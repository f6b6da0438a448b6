import type { KollectTargetSpec, KubeObject, LabelSelector } from '../api/types.js'
import { compileCel, type CelProgram, type CompileError } from './cel.js'
import { isCoreSecretResource } from './core-secret.js'
import { expressionInput } from './extract.js'
import type { ExpressionLimits } from './limits.js'
import { isClusterScoped, type PluralResolution } from './plural.js'
import type { Redactor } from './redact.js'
import { resolveNamespaces, scopeNames, type EffectiveScope } from './scope.js'
import { allowedByScope, inNamespaceOrCluster, matchesLabels, passesMatchPolicy, select, type Predicate, type Rejection } from './select.js'

// A target's selection, built once: the sync hook runs it, customize and `kollect preview` read
// the same namespaces from it, so the preview cannot disagree with the hook.

/** What Metacontroller lists for a target: every namespace, those a selector picks, or these names. */
export type NamespacesToRead = { all: true } | { selector: LabelSelector } | { names: string[] }

export interface Selection {
  read: NamespacesToRead
  /** Requested namespaces the scope took away, sorted (they go into a Degraded condition). */
  refused: string[]
  predicates: readonly Predicate[]
  /** The target's resource is core Secrets: no object it is sent shows its data to an expression. */
  secrets: boolean
}

/** Why nothing can be selected; scopeForbids means the exporter must drop the target's items too. */
export interface SelectionProblem {
  reason: 'InvalidMatchPolicy' | 'ScopeNamespaceDenied'
  message: string
  scopeForbids: boolean
}

export interface SelectionContext {
  plural: Pick<PluralResolution, 'namespaced'>
  limits: ExpressionLimits
}

export function namespacesToRead(spec: KollectTargetSpec, own: string, clusterScoped: boolean): NamespacesToRead {
  if (clusterScoped) return { all: true }
  if (spec.namespaceSelector) return { selector: spec.namespaceSelector }
  const requested = requestedNamespaces(spec, own)
  return requested.includes('*') ? { all: true } : { names: requested }
}

/** The namespaces list, deduplicated and sorted; none means the target's own namespace. */
function requestedNamespaces(spec: KollectTargetSpec, own: string): string[] {
  return Array.isArray(spec.namespaces) && spec.namespaces.length > 0 ? [...new Set(spec.namespaces)].sort() : [own]
}

/** The compile error of a matchPolicy as status and `kollect validate` show it, or null when it compiles. */
export function matchPolicyProblem(matchPolicy: string, limits: ExpressionLimits): string | null {
  const compiled = compileCel(matchPolicy, limits)
  return compiled.ok ? null : describeCompileError(compiled.error)
}

function describeCompileError(error: CompileError): string {
  return `${error.message}${error.position === undefined ? '' : ` at position ${error.position}`}`
}

/**
 * The namespaces a target in namespace `own` asks for as its scope allows them (none for a
 * cluster-scoped kind), then its labels, the scope's kinds and its match policy.
 */
export function selectionFor(
  spec: KollectTargetSpec, own: string, scope: EffectiveScope, ctx: SelectionContext,
): { ok: true; selection: Selection } | { ok: false; problem: SelectionProblem } {
  let policy: CelProgram | undefined
  if (spec.matchPolicy !== undefined) {
    const compiled = compileCel(spec.matchPolicy, ctx.limits)
    if (!compiled.ok) {
      return { ok: false, problem: { reason: 'InvalidMatchPolicy', message: `spec.matchPolicy: ${describeCompileError(compiled.error)}`, scopeForbids: false } }
    }
    policy = compiled.program
  }
  const clusterScoped = isClusterScoped(spec.resource, ctx.plural)
  if (clusterScoped && scope.allowedNamespaces !== '*') {
    const message = `${spec.resource.kind} is cluster-scoped; the scope of namespace ${own} must allow all namespaces ("*")${scopeNames(scope)}`
    return { ok: false, problem: { reason: 'ScopeNamespaceDenied', message, scopeForbids: true } }
  }
  // With a namespaceSelector, Metacontroller already picked the namespaces; the scope still bounds them.
  const requested = spec.namespaceSelector ? ['*'] : requestedNamespaces(spec, own)
  const { effective, refused } = clusterScoped ? { effective: '*' as const, refused: [] } : resolveNamespaces(requested, scope)
  const predicates: Predicate[] = [
    ...(clusterScoped ? [] : [inNamespaceOrCluster(effective, scope.deniedNamespaces, scope.allowedNamespaces === '*')]),
    matchesLabels(spec.labelSelector),
    allowedByScope(scope),
    ...(policy ? [passesMatchPolicy(policy)] : []),
  ]
  const secrets = isCoreSecretResource(spec.resource.group ?? '', spec.resource.kind)
  return { ok: true, selection: { read: namespacesToRead(spec, own, clusterScoped), refused, predicates, secrets } }
}

/**
 * One object through the selection. The predicates see the expression input, not the raw
 * object: matchPolicy is an expression too, and never sees Secret data.
 */
export function selectObject(selection: Selection, object: KubeObject, redactor: Redactor): { input: KubeObject; rejection: Rejection | null } {
  const input = expressionInput(object, redactor, selection.secrets)
  return { input, rejection: select(input, selection.predicates) }
}
