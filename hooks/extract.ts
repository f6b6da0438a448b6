import { Optional } from '@marcbachmann/cel-js'
import { canonicalJson } from '../api/canonical.js'
import type { JsonObject, JsonValue, KubeObject } from '../api/types.js'
import { celError, isMissingKey } from './cel.js'
import { readLazily } from './cel-view.js'
import { isCoreSecretObject } from './core-secret.js'
import { MISSING } from './jsonpath.js'
import { ResourceLimitError } from './limits.js'
import type { CompiledProfile } from './profile.js'
import { REDACTED, type Redactor } from './redact.js'
import { coerce, setOwn, toJson, valueBudget } from './values.js'

/** What one object gave: "attribute: message" per failed attribute (in profile order), and its attributes unless a required one failed. */
export type ExtractResult = { errors: string[] } & (Extracted | { attributes?: undefined; json?: undefined; bytes: 0 })

interface Extracted {
  /** Present when every required attribute evaluated; optional failures only drop their key. */
  attributes: JsonObject
  /** Size of the attributes as JSON, for the per-sync output bound. */
  bytes: number
  /** The attributes' canonical JSON: the item's JSON and hash are built on it, not a second serialisation. */
  json: string
}

/** kubectl's JSON copy of the manifest it applied: Secret data included. */
export const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration'

function withoutData<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value
  const { data: _data, stringData: _stringData, ...rest } = value as T & { data?: unknown; stringData?: unknown }
  return rest as T
}

/** The annotation's manifest, redacted like the object itself, then canonical JSON; anything else is a fixed marker. */
function redactedLastApplied(text: unknown, ofSecret: boolean, redactor: Redactor): string {
  if (typeof text !== 'string') return REDACTED
  try {
    let applied = JSON.parse(text) as JsonValue
    if (ofSecret || isCoreSecretObject(applied)) applied = withoutData(applied)
    return canonicalJson(redactor.redact(applied))
  } catch {
    // Not JSON, or nested past the stack: no part of it can be shown safely.
    return REDACTED
  }
}

const prepared = new WeakSet<KubeObject>()

/**
 * The object as expressions (attributes and matchPolicy) see it: a core Secret without data and
 * stringData, and the last-applied annotation redacted by the same rules. An object with neither
 * is returned as it is, at the cost of two property reads: this runs for every object.
 * secretTarget: the target's resource is core Secrets, so every object it is sent is one,
 * whatever the object says it is.
 */
export function expressionInput(object: KubeObject, redactor: Redactor, secretTarget = false): KubeObject {
  if (prepared.has(object)) return object
  const secret = secretTarget || isCoreSecretObject(object)
  const annotations = object.metadata?.annotations
  const lastApplied = typeof annotations === 'object' && annotations !== null && Object.hasOwn(annotations, LAST_APPLIED)
  if (!secret && !lastApplied) return object
  let input = secret ? withoutData(object) : object
  if (lastApplied) {
    // Redacted on first read and kept: most profiles never read it, and parsing it for every
    // object would cost more than the extraction. The raw text is reachable only through here.
    const raw = annotations[LAST_APPLIED]
    let redacted: string | undefined
    const copy = { ...annotations }
    Object.defineProperty(copy, LAST_APPLIED, { enumerable: true, configurable: true, get: () => (redacted ??= redactedLastApplied(raw, secret, redactor)) })
    readLazily(copy, LAST_APPLIED)
    input = { ...input, metadata: { ...input.metadata, annotations: copy } }
  }
  prepared.add(input)
  return input
}

// CEL optionals (`object.?spec.paused`) are results, not values: an empty one means "missing".
function unwrapOptional(value: unknown): unknown {
  if (value instanceof Optional) return value.hasValue() ? unwrapOptional(value.value()) : MISSING
  return value
}

export function extractObject(object: KubeObject, profile: CompiledProfile, maxItemBytes: number): ExtractResult {
  const input = expressionInput(object, profile.redactor)
  const attributes: JsonObject = {}
  const errors: string[] = []
  let failedRequired = false
  const budget = valueBudget(profile.maxValueSize)
  for (const attr of profile.attributes) {
    let value: unknown
    try {
      value = attr.evaluate(input)
    } catch (err) {
      if (err instanceof ResourceLimitError) throw new ResourceLimitError(`attribute ${attr.name}: ${err.message}`)
      if (isMissingKey(err)) value = MISSING
      else {
        errors.push(`${attr.name}: ${celError(err).message}`)
        if (!attr.optional) failedRequired = true
        continue
      }
    }
    value = unwrapOptional(value)
    if (value === MISSING || value === undefined) {
      if (!attr.optional) setOwn(attributes, attr.name, null)
      continue
    }
    try {
      const json = coerce(toJson(value, budget), attr.type)
      setOwn(attributes, attr.name, profile.redactor.isSensitive(attr.name) ? REDACTED : profile.redactor.redact(json))
    } catch (err) {
      if (err instanceof ResourceLimitError) throw new ResourceLimitError(`attribute ${attr.name}: ${err.message}`)
      errors.push(`${attr.name}: ${(err as Error).message}`)
      if (!attr.optional) failedRequired = true
    }
  }
  if (failedRequired) return { errors, bytes: 0 }
  const ordered = inKeyOrder(attributes, profile)
  const json = canonicalJson(ordered)
  const size = Buffer.byteLength(json)
  if (size > maxItemBytes) return { errors: [...errors, `attributes take ${size} bytes; the limit per item is ${maxItemBytes}`], bytes: 0 }
  return { attributes: ordered, errors, bytes: size, json }
}

/** Attribute names in code-unit order, or null when the profile lists them so already. */
const sortedNames = new WeakMap<CompiledProfile, string[] | null>()

/**
 * The attributes with their keys sorted: items whose keys all come in order are hashed with one
 * native JSON.stringify (api/canonical.ts), instead of a key-by-key walk, 10,000 items a sync.
 */
function inKeyOrder(attributes: JsonObject, profile: CompiledProfile): JsonObject {
  let names = sortedNames.get(profile)
  if (names === undefined) {
    const listed = profile.attributes.map((a) => a.name)
    const sorted = [...new Set(listed)].sort()
    names = listed.every((name, i) => name === sorted[i]) ? null : sorted
    sortedNames.set(profile, names)
  }
  if (names === null) return attributes
  const out: JsonObject = {}
  for (const name of names) if (Object.hasOwn(attributes, name)) setOwn(out, name, attributes[name] as JsonValue)
  return out
}
