import type { AttributeSpec } from '../api/types.js'
import { celTree } from './cel.js'

// Which parts of an object a target's expressions can read, found from the expressions alone:
// the server then leaves out of the body what none of them reads (metadata.managedFields, a
// quarter of a realistic Deployment's bytes) before an extraction child parses it. Sound, not
// exact: a read this cannot follow (the object or its metadata handed whole to a function, a
// computed key, a JSONPath wildcard, recursion or parent step) counts as reading everything below.

/** A field of the object by its names from the root; [] is the whole object. */
type FieldPath = readonly string[]

/** The object's `metadata.managedFields`. */
export const MANAGED_FIELDS: FieldPath = ['metadata', 'managedFields']

interface Node { op: string; args: unknown }

function isNode(value: unknown): value is Node {
  return value !== null && typeof value === 'object' && typeof (value as Node).op === 'string'
}

/** The field a select or a literal-key index takes (`.name`, `.?name`, `["name"]`, `[?"name"]`), or undefined. */
function stepName(node: Node): string | undefined {
  const select = node.op === '.' || node.op === '.?'
  if (!select && node.op !== '[]' && node.op !== '[?]') return undefined
  const key = (node.args as unknown[])[1]
  if (select) return typeof key === 'string' ? key : undefined
  return isNode(key) && key.op === 'value' && typeof key.args === 'string' ? key.args : undefined
}

/** The fields of `object` a CEL expression reads; null when it does not parse (then it may read anything). */
export function celReads(expression: string): FieldPath[] | null {
  const tree = celTree(expression)
  if (!isNode(tree)) return null
  const reads: FieldPath[] = []
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) return value.forEach(visit)
    if (!isNode(value) || value.op === 'value') return
    // A chain of steps down from `object` reads the field it ends at, and everything below it.
    const names: string[] = []
    let at: unknown = value
    for (let name = stepName(value); name !== undefined; name = isNode(at) ? stepName(at) : undefined) {
      names.push(name)
      at = ((at as Node).args as unknown[])[0]
    }
    if (isNode(at) && at.op === 'id' && at.args === 'object') reads.push(names.reverse())
    // A comprehension variable named object is read as the object: it only ever counts more.
    else if (value.op !== 'id') visit(value.args)
  }
  visit(tree)
  return reads
}

/** A plain name in dot or single-quoted bracket notation at the start of a JSONPath's rest (anything else stops the fields read). */
const PATH_STEP = /^(?:\.([A-Za-z_][A-Za-z0-9_]*)|\['([A-Za-z_][A-Za-z0-9_]*)'\])/

/** The field a JSONPath reads: its leading plain names. Parent (^) and property-name (~) steps reach outside it: the whole object. */
export function jsonPathReads(path: string): FieldPath[] {
  if (!path.startsWith('$') || /[\^~]/.test(path)) return [[]]
  const names: string[] = []
  let rest = path.slice(1)
  for (let m = PATH_STEP.exec(rest); m; m = PATH_STEP.exec(rest)) {
    names.push((m[1] ?? m[2]) as string)
    rest = rest.slice(m[0].length)
  }
  return [names]
}

/** Whether a read of path covers field: one is the other's prefix. */
function overlaps(path: FieldPath, field: FieldPath): boolean {
  const n = Math.min(path.length, field.length)
  for (let i = 0; i < n; i++) if (path[i] !== field[i]) return false
  return true
}

/**
 * Whether any of a target's expressions may read field of an object: the attributes of its
 * profiles (any given, not only the one the target names) and its matchPolicy.
 */
export function expressionsRead(field: FieldPath, attributes: readonly unknown[], matchPolicy?: unknown): boolean {
  const reads: (FieldPath[] | null)[] = []
  if (matchPolicy !== undefined) reads.push(typeof matchPolicy === 'string' ? celReads(matchPolicy) : null)
  for (const a of attributes) {
    const attr = a as Partial<AttributeSpec> | null
    if (typeof attr?.cel === 'string') reads.push(celReads(attr.cel))
    if (typeof attr?.jsonPath === 'string') reads.push(jsonPathReads(attr.jsonPath))
  }
  return reads.some((paths) => paths === null || paths.some((p) => overlaps(p, field)))
}
