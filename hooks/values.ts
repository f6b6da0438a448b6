import type { AttributeType, JsonValue } from '../api/types.js'
import { ResourceLimitError } from './limits.js'

class CoercionError extends Error {}

/** Deeper values are refused: nobody reads them, and they break structured clone and YAML. */
const MAX_VALUE_DEPTH = 64

/** Elements plus characters the values of one item may still have, shared by its attributes. */
export interface ValueBudget {
  left: number
  readonly max: number
}

export function valueBudget(max: number): ValueBudget {
  return { left: max, max }
}

/**
 * CEL and JSONPath results as plain JSON: bigint → number, Date → RFC 3339, bytes → base64.
 * The budget bounds the elements plus characters visited: a CEL value may share one list or
 * string many times over (cel.bind, or map() returning the same list), small in memory but huge
 * once serialised, so the walk stops before JSON.stringify would. Every value costs at least
 * one, whatever its type, and every map key its characters: a walk over shared numbers, bools
 * or nulls is as long as one over shared strings.
 */
export function toJson(value: unknown, budget: ValueBudget = valueBudget(Number.POSITIVE_INFINITY)): JsonValue {
  return convert(value, 0, budget)
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)
const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER)

function spend(budget: ValueBudget, n: number): void {
  budget.left -= n
  if (budget.left < 0) throw new ResourceLimitError(`the attribute values of one object have more than ${budget.max} elements and characters`)
}

function convert(value: unknown, depth: number, budget: ValueBudget): JsonValue {
  if (value === null || value === undefined) {
    spend(budget, 1)
    return null
  }
  switch (typeof value) {
    case 'string':
      spend(budget, value.length + 1)
      return value
    case 'boolean':
      spend(budget, 1)
      return value
    case 'number':
      spend(budget, 1)
      if (!Number.isFinite(value)) throw new CoercionError(`value ${value} is not a finite number`)
      return value
    case 'bigint':
      spend(budget, 1)
      if (value > MAX_SAFE || value < MIN_SAFE) return value.toString()
      return Number(value)
    case 'object':
      if (depth >= MAX_VALUE_DEPTH) throw new CoercionError(`value nests deeper than ${MAX_VALUE_DEPTH} levels`)
      spend(budget, 1)
      break
    default:
      throw new CoercionError(`value of type ${typeof value} cannot be exported`)
  }
  // Copy-on-write: values that are already plain JSON (most of them) are returned as they are.
  if (Array.isArray(value)) {
    let out: JsonValue[] | null = null
    for (let i = 0; i < value.length; i++) {
      const v = convert(value[i], depth + 1, budget)
      if (v !== value[i]) (out ??= value.slice())[i] = v
    }
    return out ?? (value as JsonValue[])
  }
  if (value instanceof Date) return value.toISOString()
  if (value instanceof Uint8Array) {
    spend(budget, value.length)
    return Buffer.from(value).toString('base64')
  }
  if (value instanceof Map) {
    const out: Record<string, JsonValue> = {}
    for (const [k, v] of value) {
      const key = String(k)
      spend(budget, key.length)
      setOwn(out, key, convert(v, depth + 1, budget))
    }
    return out
  }
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) {
    const v = value as { valueOf?: () => unknown }
    const prim = typeof v.valueOf === 'function' ? v.valueOf() : value
    if (prim !== value) return convert(prim, depth, budget)
  }
  const obj = value as Record<string, unknown>
  let out: Record<string, JsonValue> | null = null
  for (const k of Object.keys(obj)) {
    spend(budget, k.length)
    const v = convert(obj[k], depth + 1, budget)
    if (v === obj[k]) continue
    if (!out) {
      out = {}
      for (const kk of Object.keys(obj)) setOwn(out, kk, obj[kk] as JsonValue)
    }
    setOwn(out, k, v)
  }
  return out ?? (obj as Record<string, JsonValue>)
}

// Plain assignment of "__proto__" would set the prototype instead of a key.
// Every other key Object.prototype has is a writable data property, so assignment makes an own
// key for those, and assignment is several times cheaper than defineProperty on this hot path.
export function setOwn(obj: Record<string, JsonValue>, key: string, value: JsonValue): void {
  if (key === '__proto__') Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true })
  else obj[key] = value
}

/** Apply a profile's type hint. null passes through: "missing" is decided before this. */
export function coerce(value: JsonValue, type: AttributeType | undefined): JsonValue {
  if (type === undefined || value === null) return value
  switch (type) {
    case 'string':
      if (typeof value === 'string') return value
      if (typeof value === 'number' || typeof value === 'boolean') return String(value)
      throw new CoercionError(`expected string, got ${describe(value)}`)
    case 'integer': {
      const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value
      if (typeof n === 'number' && Number.isInteger(n)) return n
      throw new CoercionError(`expected integer, got ${describe(value)}`)
    }
    case 'number': {
      const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value
      if (typeof n === 'number' && Number.isFinite(n)) return n
      throw new CoercionError(`expected number, got ${describe(value)}`)
    }
    case 'boolean':
      if (typeof value === 'boolean') return value
      if (value === 'true' || value === 'false') return value === 'true'
      throw new CoercionError(`expected boolean, got ${describe(value)}`)
    case 'list':
      return Array.isArray(value) ? value : [value]
    case 'object':
      if (typeof value === 'object' && !Array.isArray(value)) return value
      throw new CoercionError(`expected object, got ${describe(value)}`)
  }
}

function describe(value: JsonValue): string {
  if (Array.isArray(value)) return 'list'
  if (value === null) return 'null'
  if (typeof value === 'object') return 'object'
  const text = JSON.stringify(value)
  return `${typeof value} ${text.length > 40 ? text.slice(0, 40) + '…' : text}`
}
