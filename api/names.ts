import { specSchema } from './crd-schemas.js'

// Names that become parts of keys, paths and subjects: a cluster label, a namespace, an object
// name. Where they arrive from outside the API server (a hub config, a spoke's event), they are
// checked against the rules the API server applies, so "/" and the like never reach a key.

/** RFC 1123 label: a namespace. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
/** RFC 1123 subdomain: a Kollect resource's name. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/

export function isNamespaceName(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 63 && DNS_LABEL.test(value)
}

export function isObjectName(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 253 && DNS_SUBDOMAIN.test(value)
}

let clusterRule: { pattern: RegExp; maxLength: number } | undefined

/** KollectSink.spec.cluster's rule, read from the CRD: one definition of a cluster label. */
function clusterLabelRule(): { pattern: RegExp; maxLength: number } {
  if (!clusterRule) {
    const schema = specSchema('KollectSink').properties?.['cluster']
    if (typeof schema?.['pattern'] !== 'string' || typeof schema['maxLength'] !== 'number') {
      throw new Error('KollectSink CRD: spec.cluster has no pattern and maxLength')
    }
    clusterRule = { pattern: new RegExp(schema['pattern']), maxLength: schema['maxLength'] }
  }
  return clusterRule
}

/** Why a value is not a cluster label (one line), or null when it is one. */
export function clusterLabelProblem(value: unknown): string | null {
  const { pattern, maxLength } = clusterLabelRule()
  if (typeof value === 'string' && value.length <= maxLength && pattern.test(value)) return null
  const shown = typeof value === 'string' ? JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value) : `a ${value === null ? 'null' : typeof value}`
  return `${shown} is not a cluster label: at most ${maxLength} letters, digits, "-", "_" or ".", starting and ending with a letter or digit`
}
