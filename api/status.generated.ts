// Generated from the status schemas in manifests/crds by cli/crd-types.ts: run `npm run docs`;
// do not edit by hand. test/cli/docs.test.ts fails when this file and the CRDs differ.

/** Written by the profile sync hook through Metacontroller. */
export interface ProfileStatus {
  /** metadata.generation this status was computed from. */
  observedGeneration?: number
  /** Number of attributes in the spec. */
  attributeCount?: number
  /** Observations of the profile. Ready is False when an expression does not compile; its message names the attribute, the error and its position. */
  conditions?: StatusCondition[]
}

export interface StatusCondition {
  /** Condition type, e.g. Ready. */
  type: string
  /** Whether the condition holds. */
  status: 'True' | 'False' | 'Unknown'
  /** CamelCase machine-readable reason for the status. */
  reason: string
  /** Human-readable detail. */
  message: string
  /** metadata.generation the condition was computed from. */
  observedGeneration?: number
}

/** Written by the target sync hook through Metacontroller; summaries only. */
export interface TargetStatus {
  /** metadata.generation this status was computed from. */
  observedGeneration?: number
  /** Objects that passed the namespace, label, policy and scope filters. */
  matchedCount?: number
  /** Matched objects whose attributes were all extracted. */
  extractedCount?: number
  /** Matched objects with at least one extraction error. */
  failedCount?: number
  /** The last sync's extraction or policy error, empty when there was none. */
  lastError?: string
  /** SHA-256 (hex) of the canonical JSON of the items the last sync reported. */
  checksum?: string
  /** The resource the target resolved to, plural included. */
  resource?: TargetStatusResource
  /** Observations of the target: Ready, with reasons for scope denials, a missing or failing profile, and unresolved resources. */
  conditions?: StatusCondition[]
}

/** The resource the target resolved to, plural included. */
export interface TargetStatusResource {
  /** API group; empty for the core group. */
  group?: string
  /** API version within the group. */
  version?: string
  /** Kind of the selected objects. */
  kind?: string
  /** Resource name (lowercase plural) used to list the objects. */
  plural?: string
}

/** Written by the sink sync hook through Metacontroller. */
export interface SinkStatus {
  /** metadata.generation this status was computed from. */
  observedGeneration?: number
  /** Observations of the sink: Ready, with a reason for an invalid configuration or an unreachable destination. */
  conditions?: StatusCondition[]
}

/** Written by the inventory sync hook through Metacontroller from the exporter's recorded exports; summaries only, the items live in the sinks. */
export interface InventoryStatus {
  /** metadata.generation this status was computed from. */
  observedGeneration?: number
  /** Items in the latest snapshot. */
  itemCount?: number
  /** SHA-256 (hex) of the latest snapshot's canonical items; the same value identifies the snapshot in every sink. */
  checksum?: string
  /** When the latest snapshot was exported (RFC 3339). */
  lastExportTime?: string
  /** Targets the inventory aggregates. */
  targetCount?: number
  /** Export state per sink. */
  sinks?: InventoryStatusSink[]
  /** Observations of the inventory: Ready, Synced (every sink holds the latest snapshot) and Degraded (some sink is failing). */
  conditions?: StatusCondition[]
}

export interface InventoryStatusSink {
  /** Name of the KollectSink. */
  name: string
  /** Namespace of the KollectSink. */
  namespace: string
  /** Synced: the sink holds the latest snapshot. Pending: an export is due or running. Failing: the last attempt failed and is being retried. Drifted: the sink holds something else than the last export (edited outside Kollect) and its drift policy is Report. AwaitingReview: the sink (git in review mode) proposed the snapshot in an open request that is not merged yet. Unverified: the sink's drift check failed (its record could not be read) and is being retried. */
  state: 'Synced' | 'Pending' | 'Failing' | 'Drifted' | 'AwaitingReview' | 'Unverified'
  /** The open merge or pull request proposing the snapshot, while AwaitingReview. */
  reviewUrl?: string
  /** Checksum of the snapshot the sink holds. */
  checksum?: string
  /** Items in the snapshot the sink holds. */
  itemCount?: number
  /** When the sink last took a snapshot (RFC 3339). */
  lastExportTime?: string
  /** Detail, e.g. the last error of a failing sink. */
  message?: string
}

/** Not written by any hook; present so every Kollect kind has the same shape. */
export interface ScopeStatus {
  /** metadata.generation this status was computed from. */
  observedGeneration?: number
}
