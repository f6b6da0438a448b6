// The hook reports one joined message per object; a team trying a profile wants each
// attribute's errors counted, and why objects were not selected.
import type { CompiledProfile } from '../hooks/profile.js'
import { describeRejection } from '../hooks/select.js'
import type { ObjectOutcome } from '../hooks/target.js'

export interface Explained {
  /** Why objects were not selected; namespace reasons name the namespaces. */
  notSelected: Map<string, { count: number; namespaces: Set<string> }>
  /** By attribute (profile order), then `matchPolicy` and `item size`. */
  errors: Map<string, { count: number; first: string }>
}

/** The hook's own per-object outcomes, grouped: rejections by reason, errors by attribute. */
export function explain(outcomes: ReadonlyMap<string, ObjectOutcome>, profile: CompiledProfile): Explained {
  const names = new Set(profile.attributes.map((a) => a.name))
  const buckets = new Map<string, { count: number; first: string }>(profile.attributes.map((a) => [a.name, { count: 0, first: '' }]))
  const record = (bucket: string, first: string) => {
    const b = buckets.get(bucket) ?? { count: 0, first: '' }
    if (b.count === 0) b.first = first
    b.count++
    buckets.set(bucket, b)
  }
  const out: Explained = { notSelected: new Map(), errors: new Map() }
  for (const [key, outcome] of outcomes) {
    if ('rejection' in outcome) {
      const rejection = outcome.rejection
      if (rejection.type === 'matchPolicyFailed') {
        record('matchPolicy', `${key}: ${rejection.error}`)
        continue
      }
      const namespace = rejection.type === 'namespaceDenied' || rejection.type === 'namespaceNotSelected' ? rejection.namespace : null
      const bucket = rejection.type === 'namespaceDenied' ? 'namespace is denied by scope'
        : rejection.type === 'namespaceNotSelected' ? 'namespace is not selected'
        : describeRejection(rejection)
      const b = out.notSelected.get(bucket) ?? { count: 0, namespaces: new Set<string>() }
      b.count++
      if (namespace !== null) b.namespaces.add(namespace)
      out.notSelected.set(bucket, b)
      continue
    }
    for (const error of outcome.errors) {
      const colon = error.indexOf(': ')
      const name = colon > 0 ? error.slice(0, colon) : ''
      if (names.has(name)) record(name, `${key}: ${error.slice(colon + 2)}`)
      else record('item size', `${key}: ${error}`)
    }
  }
  for (const [name, b] of buckets) if (b.count > 0) out.errors.set(name, b)
  return out
}

/** "not selected: 3 (namespace is not selected (team-c): 1, …)", or null when every object was selected. */
export function notSelectedLine(explained: Explained): string | null {
  const notSelected = [...explained.notSelected.entries()].sort((a, b) => b[1].count - a[1].count || (a[0] < b[0] ? -1 : 1))
  if (notSelected.length === 0) return null
  const total = notSelected.reduce((n, [, b]) => n + b.count, 0)
  return `not selected: ${total} (${notSelected.map(([why, b]) => `${why}${listNamespaces(b.namespaces)}: ${b.count}`).join(', ')})`
}

function listNamespaces(namespaces: Set<string>): string {
  if (namespaces.size === 0) return ''
  const sorted = [...namespaces].sort()
  return ` (${sorted.slice(0, 3).join(', ')}${sorted.length > 3 ? `, ${sorted.length - 3} more` : ''})`
}
