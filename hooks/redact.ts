import type { JsonValue } from '../api/types.js'

export const REDACTED = '[redacted]'

// Compared after lower-casing and dropping "-" and "_", so apiKey, api_key and API-KEY match.
const BUILT_IN_SUFFIXES = ['password', 'passwd', 'secret', 'token', 'apikey', 'privatekey', 'credential', 'credentials', 'connectionstring']
const BUILT_IN_EXACT = ['auth', 'authorization', 'clientsecret', 'dsn']

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
  const isSensitive = (key: string): boolean => {
    const k = normalise(key)
    return exact.has(k) || BUILT_IN_SUFFIXES.some((s) => k.endsWith(s))
  }
  const redact = (value: JsonValue): JsonValue => {
    if (Array.isArray(value)) return value.map(redact)
    if (value === null || typeof value !== 'object') return value
    const out: Record<string, JsonValue> = {}
    for (const key of Object.keys(value)) {
      const v = isSensitive(key) ? REDACTED : redact(value[key] as JsonValue)
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true })
    }
    return out
  }
  return { isSensitive, redact }
}
