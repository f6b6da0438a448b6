import { JSONPath } from 'jsonpath-plus'
import type { CompileError } from './cel.js'
import { compileCache } from './compile-cache.js'
import { DEFAULT_LIMITS, type ExpressionLimits } from './limits.js'

export const MISSING: unique symbol = Symbol('missing')

type JsonPathProgram = (object: unknown) => unknown | typeof MISSING

export type JsonPathCompiled = { ok: true; program: JsonPathProgram } | { ok: false; error: CompileError }

const cached = compileCache<JsonPathCompiled>()

// Filters and script expressions are where JSONPath engines have run code; they are refused
// before the engine sees the path, and the engine itself always runs with eval disabled.
const FORBIDDEN = [
  { re: /\?\s*\(/, why: 'filter expressions "?()" are not supported; use a CEL attribute' },
  { re: /\(/, why: 'script expressions "()" are not supported; use a CEL attribute' },
  { re: /@/, why: '"@" references are not supported; use a CEL attribute' },
  { re: /`/, why: 'backticks are not supported' },
]

export function compileJsonPath(path: string, limits: ExpressionLimits = DEFAULT_LIMITS): JsonPathCompiled {
  return cached(`${limits.maxExpressionLength}:${path}`, () => compileUncached(path, limits))
}

function compileUncached(path: string, limits: ExpressionLimits): JsonPathCompiled {
  if (typeof path !== 'string' || path.trim() === '') return fail('path is empty')
  if (path.length > limits.maxExpressionLength) {
    return fail(`path is ${path.length} characters; the limit is ${limits.maxExpressionLength}`)
  }
  if (!path.startsWith('$')) return fail('a JSONPath starts with "$"', 0)
  for (const { re, why } of FORBIDDEN) {
    const m = re.exec(path)
    if (m) return fail(why, m.index)
  }
  const unbalanced = findUnbalanced(path)
  if (unbalanced !== null) return fail('unbalanced brackets or quotes', unbalanced)
  // A definite path (names and single indexes) yields one value or none; anything that can
  // select several nodes yields a list, so an attribute's shape doesn't depend on the data.
  if (SIMPLE.test(path)) return { ok: true, program: namesProgram(path.slice(2).split('.')) }
  const definite = !/\*|\.\.|:|,/.test(path.replace(/'[^']*'|"[^"]*"/g, ''))
  const program: JsonPathProgram = (object) => {
    const result = JSONPath({ path, json: object as object, eval: false, wrap: true }) as unknown[]
    if (!definite) return result
    return result.length === 0 ? MISSING : result[0]
  }
  return { ok: true, program }
}

/** `$.a.b.c` with plain names: the most common path, and a sixth of a sync's extraction through the library. */
const SIMPLE = /^\$(?:\.[A-Za-z_][A-Za-z0-9_]*)+$/

/**
 * A plain-names path as direct property reads, by jsonpath-plus's own rule for such a step (a
 * truthy value with that own property, so a string's `length` counts too); the parity with the
 * library is tested in test/unit/hooks/jsonpath-names.test.ts.
 */
function namesProgram(names: readonly string[]): JsonPathProgram {
  return (object) => {
    let value = object
    for (const name of names) {
      if (!value || !Object.hasOwn(value, name)) return MISSING
      value = (value as Record<string, unknown>)[name]
    }
    return value
  }
}

function findUnbalanced(path: string): number | null {
  let depth = 0
  let quote: string | null = null
  for (let i = 0; i < path.length; i++) {
    const c = path[i]
    if (quote) {
      if (c === quote) quote = null
      continue
    }
    if (c === "'" || c === '"') quote = c
    else if (c === '[') depth++
    else if (c === ']' && --depth < 0) return i
  }
  return depth === 0 && quote === null ? null : path.length
}

function fail(message: string, position?: number): JsonPathCompiled {
  return { ok: false, error: position === undefined ? { message } : { message, position } }
}
