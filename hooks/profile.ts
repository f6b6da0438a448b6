import type { AttributeSpec, AttributeType, KollectProfileSpec } from '../api/types.js'
import { compileCel, type CompileError } from './cel.js'
import { compileJsonPath } from './jsonpath.js'
import { DEFAULT_LIMITS, type ExpressionLimits } from './limits.js'
import { createRedactor, type Redactor } from './redact.js'

const ATTRIBUTE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

interface CompiledAttribute {
  name: string
  type?: AttributeType
  optional: boolean
  /** Returns MISSING when the value is absent; throws on an evaluation error. */
  evaluate(object: unknown): unknown
}

export interface AttributeProblem {
  index: number
  name: string
  field: 'name' | 'cel' | 'jsonPath' | 'attributes'
  error: CompileError
}

export interface CompiledProfile {
  attributes: CompiledAttribute[]
  problems: AttributeProblem[]
  redactor: Redactor
  /** Elements plus characters the attribute values of one object may have before they are serialised. */
  maxValueSize: number
}

/** Compile every attribute; problems are data for the profile's status, never exceptions. */
export function compileProfile(spec: KollectProfileSpec, limits: ExpressionLimits = DEFAULT_LIMITS): CompiledProfile {
  const list: AttributeSpec[] = Array.isArray(spec?.attributes) ? spec.attributes : []
  const problems: AttributeProblem[] = []
  const attributes: CompiledAttribute[] = []
  if (list.length > limits.maxAttributes) {
    const message = `profile has ${list.length} attributes; the limit is ${limits.maxAttributes}`
    problems.push({ index: limits.maxAttributes, name: '', field: 'attributes', error: { message } })
  }
  const seen = new Set<string>()
  list.slice(0, limits.maxAttributes).forEach((attr, index) => {
    const name = typeof attr?.name === 'string' ? attr.name : ''
    const problem = (field: AttributeProblem['field'], error: CompileError) => problems.push({ index, name, field, error })
    if (!ATTRIBUTE_NAME.test(name)) return problem('name', { message: `name ${JSON.stringify(name)} must match ${ATTRIBUTE_NAME.source}` })
    if (seen.has(name)) return problem('name', { message: `duplicate attribute name ${JSON.stringify(name)}` })
    seen.add(name)
    const hasCel = typeof attr.cel === 'string'
    const hasPath = typeof attr.jsonPath === 'string'
    if (hasCel === hasPath) return problem(hasCel ? 'cel' : 'name', { message: 'exactly one of cel or jsonPath must be set' })
    const base = { name, type: attr.type, optional: attr.optional === true }
    if (hasCel) {
      const c = compileCel(attr.cel as string, limits)
      if (!c.ok) return problem('cel', c.error)
      attributes.push({ ...base, evaluate: (object) => c.program({ object }) })
    } else {
      const c = compileJsonPath(attr.jsonPath as string, limits)
      if (!c.ok) return problem('jsonPath', c.error)
      attributes.push({ ...base, evaluate: c.program })
    }
  })
  const redactor = createRedactor(Array.isArray(spec?.redactKeys) ? spec.redactKeys.filter((k) => typeof k === 'string') : [])
  return { attributes, problems, redactor, maxValueSize: limits.maxStringLength }
}

export function describeProblem(p: AttributeProblem): string {
  const where = p.field === 'attributes' ? 'spec.attributes' : `spec.attributes[${p.index}].${p.field}`
  const label = p.name ? ` (${p.name})` : ''
  const pos = p.error.position === undefined ? '' : ` at position ${p.error.position}`
  return `${where}${label}: ${p.error.message}${pos}`
}
