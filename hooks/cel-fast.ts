import { Optional } from '@marcbachmann/cel-js'
import type { ExpressionLimits } from './limits.js'

// CEL expressions in profiles are mostly field reads, has(), ternaries, comparisons, size() and
// map(). Through cel-js each one costs runtime type checks and a dispatch per node, together
// about a third of syncTarget on 10,000 objects. This compiles that subset to closures over
// plain reads for the values where the outcome is plain: a JSON map with the key, a bool where a
// bool goes, operands of one type. Anything else returns BAIL and the caller runs cel-js instead,
// so errors, missing keys, odd types and the runtime bounds all keep cel-js's outcome exactly;
// test/unit/hooks/cel-fast.test.ts holds the two to identical results over varied documents.

export const BAIL: unique symbol = Symbol('bail')

/** The fast program: the value cel-js would give, or BAIL when only cel-js can tell. */
export type FastProgram = (object: unknown) => unknown

type Node = { op: string; args: unknown }
/** Slot 0 holds `object`, later slots the macro variables in scope. */
type Step = (slots: unknown[]) => unknown

/** The fast program for a parsed expression, or null when it uses anything outside the subset. */
export function compileFast(ast: unknown, limits: ExpressionLimits): FastProgram | null {
  const step = build(ast, ['object'], limits)
  if (!step) return null
  return (object) => step([object])
}

function isNode(value: unknown): value is Node {
  return value !== null && typeof value === 'object' && typeof (value as Node).op === 'string'
}

/**
 * A JSON map: by its constructor, as cel-js types one, or by an own "constructor" key, which
 * only a JSON map has (cel.ts hands those to cel-js as Maps); Maps, Dates and the like are left
 * to cel-js.
 */
function isPlainMap(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object') return false
  const c = (v as { constructor?: unknown }).constructor
  return c === Object || c === undefined || Object.hasOwn(v, 'constructor')
}

/** Values cel-js takes as they are, within the bounds cel.ts puts on every read. */
function plain(v: unknown, limits: ExpressionLimits): boolean {
  switch (typeof v) {
    case 'string': return v.length <= limits.maxStringLength
    case 'boolean': case 'bigint': return true
    case 'number': return Number.isFinite(v)
    case 'object':
      if (v === null) return true
      if ((v as { constructor?: unknown }).constructor === Array) return (v as unknown[]).length <= limits.maxListLength
      return isPlainMap(v)
    default: return false
  }
}

function build(node: unknown, names: readonly string[], limits: ExpressionLimits): Step | null {
  if (!isNode(node)) return null
  const args = node.args as unknown[]
  switch (node.op) {
    case 'value': {
      const v = node.args
      return typeof v === 'string' || typeof v === 'bigint' || typeof v === 'boolean' ? () => v : null
    }
    case 'id': {
      const slot = names.lastIndexOf(node.args as string)
      return slot < 0 ? null : (slots) => slots[slot]
    }
    case '.': case '.?': {
      const recv = build(args[0], names, limits)
      const field = args[1]
      if (!recv || typeof field !== 'string') return null
      return node.op === '.' ? select(recv, field, limits) : optionalSelect(recv, field, limits)
    }
    case '!_': {
      const inner = build(node.args, names, limits)
      if (!inner) return null
      return (slots) => {
        const v = inner(slots)
        return typeof v === 'boolean' ? !v : BAIL
      }
    }
    case '&&': case '||': {
      const left = build(args[0], names, limits)
      const right = build(args[1], names, limits)
      if (!left || !right) return null
      const and = node.op === '&&'
      // Both sides must be bools: CEL's error absorption is cel-js's to apply.
      return (slots) => {
        const l = left(slots)
        if (typeof l !== 'boolean') return BAIL
        const r = right(slots)
        if (typeof r !== 'boolean') return BAIL
        return and ? l && r : l || r
      }
    }
    case '?:': {
      const [cond, yes, no] = [build(args[0], names, limits), build(args[1], names, limits), build(args[2], names, limits)]
      if (!cond || !yes || !no) return null
      return (slots) => {
        const c = cond(slots)
        if (typeof c !== 'boolean') return BAIL
        return c ? yes(slots) : no(slots)
      }
    }
    case '==': case '!=': {
      const left = build(args[0], names, limits)
      const right = build(args[1], names, limits)
      if (!left || !right) return null
      const negate = node.op === '!='
      return (slots) => {
        const l = left(slots)
        if (l === BAIL) return BAIL
        const r = right(slots)
        if (r === BAIL) return BAIL
        const eq = equal(l, r)
        return eq === BAIL ? BAIL : eq !== negate
      }
    }
    case 'call': return buildCall(args, names, limits)
    case 'rcall': return buildReceiverCall(args, names, limits)
    default: return null
  }
}

function select(recv: Step, field: string, limits: ExpressionLimits): Step {
  return (slots) => {
    const r = recv(slots)
    if (r instanceof Optional) {
      // Inside an optional chain a missing key is none, not an error.
      if (!r.hasValue()) return r
      const inner = r.value()
      if (!isPlainMap(inner)) return BAIL
      if (!Object.hasOwn(inner, field)) return Optional.none()
      const v = inner[field]
      return plain(v, limits) ? Optional.of(v) : BAIL
    }
    if (!isPlainMap(r) || !Object.hasOwn(r, field)) return BAIL
    const v = r[field]
    return plain(v, limits) ? v : BAIL
  }
}

function optionalSelect(recv: Step, field: string, limits: ExpressionLimits): Step {
  return (slots) => {
    const r = recv(slots)
    if (!isPlainMap(r)) return BAIL
    if (!Object.hasOwn(r, field)) return Optional.none()
    const v = r[field]
    return plain(v, limits) ? Optional.of(v) : BAIL
  }
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/** CEL equality for operands of one kind (numbers across int and double); BAIL for the rest. */
function equal(l: unknown, r: unknown): boolean | typeof BAIL {
  const tl = typeof l
  const tr = typeof r
  if (tl === tr && (tl === 'string' || tl === 'boolean' || tl === 'bigint')) return l === r
  if (tl === 'number' && tr === 'number') return l === r
  if (tl === 'number' && tr === 'bigint') return numberEqualsInt(l as number, r as bigint)
  if (tl === 'bigint' && tr === 'number') return numberEqualsInt(r as number, l as bigint)
  return BAIL
}

function numberEqualsInt(n: number, i: bigint): boolean | typeof BAIL {
  if (i > MAX_SAFE || i < -MAX_SAFE || !Number.isSafeInteger(Math.trunc(n))) return BAIL
  return n === Number(i)
}

function buildCall(args: unknown[], names: readonly string[], limits: ExpressionLimits): Step | null {
  const [name, params] = args as [string, unknown[]]
  if (!Array.isArray(params) || params.length !== 1) return null
  const param = params[0]
  if (name === 'has') {
    if (!isNode(param) || param.op !== '.') return null
    const [recvNode, field] = param.args as [unknown, unknown]
    const recv = build(recvNode, names, limits)
    if (!recv || typeof field !== 'string') return null
    return (slots) => {
      const r = recv(slots)
      return isPlainMap(r) ? Object.hasOwn(r, field) : BAIL
    }
  }
  if (name === 'size') {
    const inner = build(param, names, limits)
    return inner ? sizeOf(inner) : null
  }
  return null
}

/** size() of a list or map; strings count code points in CEL, so they go to cel-js. */
function sizeOf(inner: Step): Step {
  return (slots) => {
    const v = inner(slots)
    if (Array.isArray(v)) return BigInt(v.length)
    if (isPlainMap(v)) return BigInt(Object.keys(v).length)
    return BAIL
  }
}

function buildReceiverCall(args: unknown[], names: readonly string[], limits: ExpressionLimits): Step | null {
  const [name, recvNode, params] = args as [string, unknown, unknown[]]
  if (!Array.isArray(params)) return null
  const recv = build(recvNode, names, limits)
  if (!recv) return null
  if (name === 'size' && params.length === 0) return sizeOf(recv)
  if (name === 'map' && params.length === 2) {
    const variable = params[0]
    if (!isNode(variable) || variable.op !== 'id' || typeof variable.args !== 'string') return null
    const body = build(params[1], [...names, variable.args], limits)
    if (!body) return null
    const slot = names.length
    return (slots) => {
      const list = recv(slots)
      if (!Array.isArray(list)) return BAIL
      const out: unknown[] = new Array(list.length)
      const inner = slots.slice(0, slot)
      for (let i = 0; i < list.length; i++) {
        if (!plain(list[i], limits)) return BAIL
        inner[slot] = list[i]
        const v = body(inner)
        if (v === BAIL || v instanceof Optional) return BAIL
        out[i] = v
      }
      return out
    }
  }
  if (params.length !== 1) return null
  const arg = build(params[0], names, limits)
  if (!arg) return null
  if (name === 'orValue') {
    return (slots) => {
      const r = recv(slots)
      if (!(r instanceof Optional)) return BAIL
      return r.hasValue() ? r.value() : arg(slots)
    }
  }
  if (!Object.hasOwn(STRING_TESTS, name)) return null
  const test = STRING_TESTS[name] as (s: string, t: string) => boolean
  return (slots) => {
    const r = recv(slots)
    const a = arg(slots)
    return typeof r === 'string' && typeof a === 'string' ? test(r, a) : BAIL
  }
}

const STRING_TESTS: Record<string, (s: string, t: string) => boolean> = {
  startsWith: (s, t) => s.startsWith(t),
  endsWith: (s, t) => s.endsWith(t),
  contains: (s, t) => s.includes(t),
}
