// Shared builders for the hook unit tests. No test cases live here.
import type { AttributeSpec, Condition, KollectScopeSpec, KubeObject } from '../../../api/types.js'
import { compileProfile, describeProblem, type CompiledProfile } from '../../../hooks/profile.js'
import type { SyncRequest } from '../../../hooks/request.js'

/** A value as it arrives over the wire: what Metacontroller sends is JSON, not a JS object graph. */
export function wire<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T
}

/** A request built by test/support, parsed the way the Fastify route parses it. */
export function asSyncRequest(request: Record<string, unknown>): SyncRequest {
  return wire(request) as unknown as SyncRequest
}

export function scopeCr(name: string, spec: KollectScopeSpec, namespace = 'team-a'): KubeObject {
  return { apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectScope', metadata: { name, namespace, uid: `uid-${name}`, generation: 1 }, spec }
}

export function cond(type: string, status: Condition['status'], reason: string, message: string, observedGeneration = 1): Condition {
  return { type, status, reason, message, observedGeneration }
}

/** Compile a profile that must compile: a silent compile problem would make every extraction look empty. */
export function profileOf(attributes: AttributeSpec[], redactKeys?: string[]): CompiledProfile {
  const profile = compileProfile(redactKeys ? { attributes, redactKeys } : { attributes })
  if (profile.problems.length > 0) throw new Error(`test profile does not compile: ${profile.problems.map(describeProblem).join('; ')}`)
  return profile
}
