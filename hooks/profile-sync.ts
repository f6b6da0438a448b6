import { specProblems } from '../api/crd-schemas.js'
import type { KollectProfileSpec, ProfileStatus } from '../api/types.js'
import { condition } from './conditions.js'
import type { ExpressionLimits } from './limits.js'
import { compileProfile, describeProblem } from './profile.js'
import { parentGeneration, parentSpec, type SyncRequest, type SyncResponse } from './request.js'

/** Compile every expression; each failing attribute is named with its error and position. */
export function syncProfile(req: SyncRequest, limits?: ExpressionLimits): SyncResponse<ProfileStatus> {
  const generation = parentGeneration(req.parent)
  const spec = parentSpec<KollectProfileSpec>(req.parent)
  const schema = specProblems('KollectProfile', spec)
  const compiled = compileProfile(spec, limits)
  const unique = [...new Set([...schema, ...compiled.problems.map(describeProblem)])]
  const ready = unique.length === 0
    ? condition('Ready', true, 'Compiled', `${compiled.attributes.length} attributes compiled`, generation)
    : condition('Ready', false, schema.length === 0 ? 'InvalidExpression' : 'InvalidSpec', unique.join('; '), generation)
  return {
    status: { observedGeneration: generation, attributeCount: Array.isArray(spec.attributes) ? spec.attributes.length : 0, conditions: [ready] },
    children: [],
  }
}
