import type { KubeObject, ObjectRef } from '../api/types.js'

// Getters over Metacontroller's requests (hook version v2). They never return undefined, so
// each hook reads as a straight script: observed parent → related objects → desired status.

export type ObjectMap = Record<string, KubeObject>

export interface SyncRequest {
  controller: KubeObject
  parent: KubeObject
  children: Record<string, ObjectMap>
  related: Record<string, ObjectMap>
  finalizing: boolean
}

export interface CustomizeRequest {
  controller: KubeObject
  parent: KubeObject
}

export interface RelatedRule {
  apiVersion: string
  resource: string
  namespace?: string
  names?: string[]
  labelSelector?: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] }
  namespaceSelector?: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] }
}

export interface CustomizeResponse {
  relatedResources: RelatedRule[]
}

/** A sync or finalize answer; S is the kind's status type from api/types.ts (TargetStatus, …). */
export interface SyncResponse<S extends object> {
  status: S
  children: KubeObject[]
  resyncAfterSeconds?: number
  finalized?: boolean
}

/** Metacontroller's map key for a type: "Kind.version" for core, "Kind.group/version" otherwise. */
/** A validated sync body as a SyncRequest: Metacontroller always sends every key; curl users may not. Absent maps are empty. */
export function syncRequest(body: unknown): SyncRequest {
  const b = body as Partial<SyncRequest>
  return {
    controller: b.controller ?? {}, parent: b.parent as SyncRequest['parent'],
    children: b.children ?? {}, related: b.related ?? {}, finalizing: b.finalizing === true,
  }
}

export function typeKey(group: string | undefined, version: string, kind: string): string {
  return group ? `${kind}.${group}/${version}` : `${kind}.${version}`
}

export function apiVersionOf(group: string | undefined, version: string): string {
  return group ? `${group}/${version}` : version
}

export function parentRef(parent: KubeObject): ObjectRef {
  return { namespace: parent.metadata?.namespace ?? '', name: parent.metadata?.name ?? '' }
}

export function parentGeneration(parent: KubeObject): number {
  return typeof parent.metadata?.generation === 'number' ? parent.metadata.generation : 0
}

export function parentSpec<T>(parent: KubeObject): T {
  const spec = parent['spec']
  return (spec !== null && typeof spec === 'object' ? spec : {}) as T
}

/** The status the API server holds (it validated it against the CRD); empty before the first sync. */
export function parentStatus<S extends object>(parent: KubeObject): Partial<S> {
  const status = parent['status']
  return (status !== null && typeof status === 'object' ? status : {}) as Partial<S>
}

/** Related objects of one type, in key order so every derived value is deterministic. */
export function related(req: SyncRequest, key: string): { key: string; object: KubeObject }[] {
  const map = req.related?.[key] ?? {}
  return Object.keys(map)
    .sort()
    .map((k) => ({ key: k, object: map[k] as KubeObject }))
}

/** One related object by "namespace/name" (v2 keys). */
export function relatedOne(req: SyncRequest, key: string, ref: ObjectRef): KubeObject | undefined {
  return req.related?.[key]?.[`${ref.namespace}/${ref.name}`]
}
