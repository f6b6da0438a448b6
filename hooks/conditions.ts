import type { Condition, ConditionStatus } from '../api/types.js'

// No lastTransitionTime: status must be a pure function of the request, or Metacontroller
// rewrites it on every sync and loops.

const MESSAGE_LIMIT = 1024

export function truncate(text: string, limit = MESSAGE_LIMIT): string {
  return text.length <= limit ? text : text.slice(0, limit - 1) + '…'
}

export function condition(
  type: string,
  status: ConditionStatus | boolean,
  reason: string,
  message: string,
  observedGeneration: number,
): Condition {
  const s: ConditionStatus = typeof status === 'boolean' ? (status ? 'True' : 'False') : status
  return { type, status: s, reason, message: truncate(message), observedGeneration }
}

export function sortConditions(conditions: Condition[]): Condition[] {
  return [...conditions].sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0))
}
