import { Environment } from '@marcbachmann/cel-js'
import { BAIL, compileFast } from './cel-fast.js'
import { celView } from './cel-view.js'
import { compileCache } from './compile-cache.js'
import { DEFAULT_LIMITS, ResourceLimitError, type ExpressionLimits } from './limits.js'

// cel-js implements matches() with the process-wide RegExp. The process's entry point switches
// on V8's linear-time engine (server/process/regexp-engine.ts): patterns are tested for it up front
// (backreferences and lookarounds are refused, as in RE2), and a regex that backtracks too much
// falls back to it. Importing this module changes nothing in the process.

export interface CompileError {
  message: string
  /** Zero-based character offset in the expression, when known. */
  position?: number
}

export type CelProgram = (context: { object: unknown }) => unknown

export type CelCompiled = { ok: true; program: CelProgram } | { ok: false; error: CompileError }

const env = new Environment({
  enableOptionalTypes: true,
  homogeneousAggregateLiterals: false,
  limits: { maxAstNodes: DEFAULT_LIMITS.maxAstNodes, maxDepth: 64, maxListElements: 1000, maxMapEntries: 1000, maxCallArguments: 32 },
}).registerVariable('object', 'dyn')

const MACROS = new Set(['map', 'filter', 'all', 'exists', 'exists_one'])

interface AstNode {
  op: string
  args: unknown
  start?: number
}

type Evaluate = (ev: unknown, ast: unknown, ctx: unknown) => unknown

/** cel-js's ASTNode as the runtime bounds use it: evaluate is an own, replaceable method. */
interface RuntimeNode extends AstNode {
  /** The operator's own offset (the '.', '+' or method name); start is the whole node's. */
  pos?: number
  evaluate: Evaluate
  readonly meta: { evaluate: Evaluate; alternate?: RuntimeNode; macro?: { evaluate: Evaluate } }
}

const cached = compileCache<CelCompiled>()

/** Compile once per expression text; the result (or the error) is cached. */
export function compileCel(expression: string, limits: ExpressionLimits = DEFAULT_LIMITS): CelCompiled {
  const key = `${limits.maxExpressionLength}:${limits.maxMacroDepth}:${limits.maxStringLength}:${limits.maxListLength}:${expression}`
  return cached(key, () => compileUncached(expression, limits))
}

function compileUncached(expression: string, limits: ExpressionLimits): CelCompiled {
  if (typeof expression !== 'string' || expression.trim() === '') {
    return { ok: false, error: { message: 'expression is empty' } }
  }
  if (expression.length > limits.maxExpressionLength) {
    return { ok: false, error: { message: `expression is ${expression.length} characters; the limit is ${limits.maxExpressionLength}` } }
  }
  let parsed: ReturnType<typeof env.parse>
  try {
    parsed = env.parse(expression)
  } catch (err) {
    return { ok: false, error: celError(err) }
  }
  const problem = checkAst(parsed.ast as unknown as AstNode, limits)
  if (problem) return { ok: false, error: problem }
  boundValues(parsed.ast as unknown as RuntimeNode, limits)
  const fast = compileFast(parsed.ast, limits)
  const slow: CelProgram = (context) => withConstructorKeys(parsed, context)
  const program: CelProgram = fast
    ? (context) => {
        const value = fast(context.object)
        return value === BAIL ? slow(context) : value
      }
    : slow
  return { ok: true, program }
}

// cel-js tells a map from other values by its constructor property, so a map with an own key
// "constructor" (a label, an annotation, a ConfigMap's data) is an "Unsupported type" there:
// an error, or, where CEL absorbs errors (`?.`, ||, exists), a silently wrong answer. Every such
// case passes through the evaluator's createError, which is watched: an evaluation that met one
// runs again on a copy of the object where those maps are Maps. The copy is made only for such
// objects, once each; the fast path reads these maps as they are.

let unsupportedSeen = false

function watchUnsupported(): void {
  const probe = env.parse('object')
  const root = probe.ast as unknown as RuntimeNode
  let evaluator: { createError: (code: string, ...rest: unknown[]) => unknown } | undefined
  const evaluate = root.evaluate
  root.evaluate = function (ev, ast, ctx) {
    evaluator = ev as typeof evaluator
    return evaluate.call(this, ev, ast, ctx)
  }
  probe({ object: null })
  if (!evaluator || typeof evaluator.createError !== 'function') throw new Error('cel-js: cannot reach the evaluator to watch for unsupported types')
  const create = evaluator.createError
  evaluator.createError = function (code, ...rest) {
    if (code === 'unsupported_type') unsupportedSeen = true
    return create.call(this, code, ...rest)
  }
}
watchUnsupported()

function withConstructorKeys(parsed: (context: { object: unknown }) => unknown, context: { object: unknown }): unknown {
  unsupportedSeen = false
  let value: unknown
  try {
    value = parsed(context)
  } catch (err) {
    if (!unsupportedSeen) throw err
  }
  if (!unsupportedSeen) return value
  const view = celView(context.object)
  return view === context.object ? parsed(context) : parsed({ object: view })
}

/** The parsed tree of an expression (cel-js's nodes: op and args), or null when it does not parse. */
export function celTree(expression: string): unknown {
  try {
    return env.parse(expression).ast
  } catch {
    return null
  }
}

/** Walk the tree once: bound macro nesting, and require linear-time literal regex patterns. */
function checkAst(root: AstNode, limits: ExpressionLimits): CompileError | null {
  const stack: { node: unknown; depth: number }[] = [{ node: root, depth: 0 }]
  while (stack.length > 0) {
    const { node, depth } = stack.pop() as { node: unknown; depth: number }
    if (Array.isArray(node)) {
      for (const n of node) stack.push({ node: n, depth })
      continue
    }
    if (!isNode(node)) continue
    if ((node.op === 'rcall' || node.op === 'call') && Array.isArray(node.args)) {
      const name = node.args[0]
      if (name === 'matches') {
        const problem = checkPattern(node)
        if (problem) return problem
      }
      if (node.op === 'rcall' && typeof name === 'string' && MACROS.has(name)) {
        // Only the macro's arguments run once per element; a chained receiver runs once.
        if (depth + 1 > limits.maxMacroDepth) {
          return { message: `comprehension macros nest ${depth + 1} deep; the limit is ${limits.maxMacroDepth}`, position: node.start }
        }
        stack.push({ node: node.args[1], depth })
        stack.push({ node: node.args[2], depth: depth + 1 })
        continue
      }
    }
    stack.push({ node: node.args, depth })
  }
  return null
}

// Nodes whose value can be larger than their inputs ('+', functions, macros, cel.bind) or that
// read a value from the object ('.', '[]'). Checking each of their values bounds every
// intermediate: a doubling stops within a step of the limit, and split() or a list '+' never
// sees an operand past it, so V8 never reaches its fatal "invalid size" or heap-limit paths.
const BOUNDED_OPS = new Set(['+', 'call', 'rcall', '.', '[]'])

/**
 * cel-js 8 has no runtime size limits (its `limits` are parse-time only), and its built-in
 * overloads cannot be replaced. Its evaluator calls `node.evaluate(ev, node, ctx)` for every
 * node, so each bounded node gets an own evaluate that dispatches as ASTNode.evaluate does
 * (alternate for macros like map, macro for cel.bind and has, else the operator) and then
 * checks the value. test/unit/hooks/cel-bounds.test.ts pins this against the library.
 */
function boundValues(root: RuntimeNode, limits: ExpressionLimits): void {
  const stack: unknown[] = [root]
  while (stack.length > 0) {
    const node = stack.pop()
    if (Array.isArray(node)) {
      stack.push(...node)
      continue
    }
    if (!isNode(node)) continue
    stack.push(node.args)
    if (!BOUNDED_OPS.has(node.op)) continue
    const n = node as RuntimeNode
    const position = n.pos ?? n.start
    let inner: Evaluate | undefined
    n.evaluate = function bounded(ev, ast, ctx) {
      // Resolved at the first call, after cel-js has type-checked the tree (which may set meta).
      inner ??= dispatch(n)
      return checkSize(inner(ev, ast, ctx), position, limits)
    }
  }
}

function dispatch(n: RuntimeNode): Evaluate {
  const { alternate, macro, evaluate } = n.meta
  if (alternate) return (ev, _ast, ctx) => alternate.evaluate(ev, alternate, ctx)
  if (macro) return (ev, _ast, ctx) => macro.evaluate(ev, macro, ctx)
  return (ev, ast, ctx) => evaluate.call(n, ev, ast, ctx)
}

function checkSize(value: unknown, position: number | undefined, limits: ExpressionLimits): unknown {
  const at = position === undefined ? '' : ` at position ${position}`
  if (typeof value === 'string') {
    if (value.length > limits.maxStringLength) {
      throw new ResourceLimitError(`a CEL string${at} has ${value.length} characters; the limit is ${limits.maxStringLength}`)
    }
  } else if (Array.isArray(value)) {
    if (value.length > limits.maxListLength) throw new ResourceLimitError(`a CEL list${at} has ${value.length} elements; the limit is ${limits.maxListLength}`)
  } else if (value instanceof Uint8Array && value.length > limits.maxStringLength) {
    throw new ResourceLimitError(`CEL bytes${at} have ${value.length} bytes; the limit is ${limits.maxStringLength}`)
  }
  return value
}

function checkPattern(call: AstNode): CompileError | null {
  const args = call.args as unknown[]
  const params = (call.op === 'rcall' ? args[2] : args[1]) as unknown[]
  const pattern = call.op === 'rcall' ? params?.[0] : params?.[1]
  if (!isNode(pattern) || pattern.op !== 'value' || typeof pattern.args !== 'string') {
    return { message: 'matches() needs a string literal pattern, so it can be checked before it runs', position: call.start }
  }
  try {
    new RegExp(pattern.args, 'l')
  } catch (err) {
    if (!linearEngineEnabled()) {
      throw new Error('the linear-time RegExp engine is off in this process: ' +
        'its entry point must call enableLinearRegExps() (server/process/regexp-engine.ts)')
    }
    return { message: `pattern ${JSON.stringify(pattern.args)} is not allowed: ${(err as Error).message.replace(/^Invalid regular expression: /, '')}`, position: pattern.start }
  }
  return null
}

/** The 'l' flag exists only once the engine is on; without it every pattern would be refused. */
function linearEngineEnabled(): boolean {
  try {
    new RegExp('', 'l')
    return true
  } catch {
    return false
  }
}

function isNode(value: unknown): value is AstNode {
  return value !== null && typeof value === 'object' && typeof (value as AstNode).op === 'string'
}

/** A CEL error as message + position; never the evaluated object (cel-js keeps errors short). */
export function celError(err: unknown): CompileError {
  const e = err as { summary?: string; message?: string; range?: { start?: number } }
  const message = e.summary ?? String(e.message ?? err).split('\n')[0] ?? 'CEL error'
  return e.range?.start === undefined ? { message } : { message, position: e.range.start }
}

/** cel-js reports a missing map key as this code; extraction treats it as "missing", not an error. */
export function isMissingKey(err: unknown): boolean {
  return (err as { code?: string })?.code === 'no_such_key'
}
