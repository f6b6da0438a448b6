import v8 from 'node:v8'
import { Environment } from '@marcbachmann/cel-js'
import { compileCache } from './compile-cache.js'
import { DEFAULT_LIMITS, type ExpressionLimits } from './limits.js'

// cel-js implements matches() with the process-wide RegExp. These V8 flags make every regex
// that backtracks too much fall back to V8's linear-time engine, and let us test patterns for
// linear-time compatibility up front (backreferences and lookarounds are refused, as in RE2).
v8.setFlagsFromString('--enable-experimental-regexp-engine')
v8.setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks')
v8.setFlagsFromString('--regexp-backtracks-before-fallback=10000')

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

const cached = compileCache<CelCompiled>()

/** Compile once per expression text; the result (or the error) is cached. */
export function compileCel(expression: string, limits: ExpressionLimits = DEFAULT_LIMITS): CelCompiled {
  return cached(`${limits.maxExpressionLength}:${limits.maxMacroDepth}:${expression}`, () => compileUncached(expression, limits))
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
  const program: CelProgram = (context) => parsed(context)
  return { ok: true, program }
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
    return { message: `pattern ${JSON.stringify(pattern.args)} is not allowed: ${(err as Error).message.replace(/^Invalid regular expression: /, '')}`, position: pattern.start }
  }
  return null
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
