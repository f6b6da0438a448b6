import { Optional } from '@marcbachmann/cel-js'
import type { JsonObject, KubeObject } from '../api/types.js'
import { celError, isMissingKey } from './cel.js'
import { MISSING } from './jsonpath.js'
import { ResourceLimitError } from './limits.js'
import type { CompiledProfile } from './profile.js'
import { REDACTED } from './redact.js'
import { coerce, setOwn, toJson, valueBudget } from './values.js'

export interface ExtractResult {
  /** Present when every required attribute evaluated; optional failures only drop their key. */
  attributes?: JsonObject
  /** Size of the attributes as JSON, for the per-sync output bound. */
  bytes: number
  /** "attribute: message" per failed attribute, in profile order. */
  errors: string[]
}

/** Secret payloads never reach an expression, so they cannot reach an export either. */
export function withoutSecretData(object: KubeObject): KubeObject {
  if (object.kind !== 'Secret' || (object.apiVersion !== 'v1' && object.apiVersion !== undefined)) return object
  const { data: _data, stringData: _stringData, ...rest } = object as KubeObject & { data?: unknown; stringData?: unknown }
  return rest
}

// CEL optionals (`object.?spec.paused`) are results, not values: an empty one means "missing".
function unwrapOptional(value: unknown): unknown {
  if (value instanceof Optional) return value.hasValue() ? unwrapOptional(value.value()) : MISSING
  return value
}

export function extractObject(object: KubeObject, profile: CompiledProfile, maxItemBytes: number): ExtractResult {
  const input = withoutSecretData(object)
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
  const size = Buffer.byteLength(JSON.stringify(attributes))
  if (size > maxItemBytes) return { errors: [...errors, `attributes take ${size} bytes; the limit per item is ${maxItemBytes}`], bytes: 0 }
  return { attributes, errors, bytes: size }
}
