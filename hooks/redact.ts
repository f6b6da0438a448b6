import type { JsonValue } from '../api/types.js'

export const REDACTED = '[redacted]'

// Compared after lower-casing and dropping "-" and "_", so apiKey, api_key and API-KEY match.
const BUILT_IN_SUFFIXES = ['password', 'passwd', 'secret', 'token', 'apikey', 'privatekey', 'credential', 'credentials', 'connectionstring']
const BUILT_IN_EXACT = ['auth', 'authorization', 'clientsecret', 'dsn']

const MAX_KNOWN_KEYS = 4096

function copyObject(value: Record<string, JsonValue>): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {}
  for (const k of Object.keys(value)) Object.defineProperty(out, k, { value: value[k], enumerable: true, writable: true, configurable: true })
  return out
}

function normalise(key: string): string {
  return key.toLowerCase().replace(/[-_]/g, '')
}

export interface Redactor {
  isSensitive(key: string): boolean
  redact(value: JsonValue): JsonValue
}

/** Keys are sensitive when they equal or end with a sensitive word, at any depth. */
export function createRedactor(extraKeys: readonly string[] = []): Redactor {
  const exact = new Set([...BUILT_IN_EXACT, ...extraKeys.map(normalise)])
  // Keys repeat across objects (labels, attribute names): the answer is remembered, up to a bound.
  const known = new Map<string, boolean>()
  const isSensitive = (key: string): boolean => {
    let answer = known.get(key)
    if (answer === undefined) {
      const k = normalise(key)
      answer = exact.has(k) || BUILT_IN_SUFFIXES.some((s) => k.endsWith(s))
      if (known.size < MAX_KNOWN_KEYS) known.set(key, answer)
    }
    return answer
  }
  // Copy-on-write: most values hold nothing sensitive and are returned as they are.
  const redact = (value: JsonValue): JsonValue => {
    if (value === null || typeof value !== 'object') return value
    if (Array.isArray(value)) {
      let out: JsonValue[] | null = null
      for (let i = 0; i < value.length; i++) {
        const v = redact(value[i] as JsonValue)
        if (v !== value[i]) (out ??= value.slice())[i] = v
      }
      return out ?? value
    }
    let out: Record<string, JsonValue> | null = null
    // Kubernetes name/value pairs (env vars, args): {name: DB_PASSWORD, value: …} hides the value.
    const pairSensitive = typeof value['name'] === 'string' && 'value' in value && isSensitive(value['name'])
    for (const key of Object.keys(value)) {
      const before = value[key] as JsonValue
      const v = isSensitive(key) || (pairSensitive && key === 'value') ? REDACTED : redact(before)
      if (v === before) continue
      out ??= copyObject(value)
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true })
    }
    return out ?? value
  }
  return { isSensitive, redact }
}
