// The data contract shared by hooks/, sinks/ and server/. Nothing here does I/O.
import type { KollectSinkSpec } from './sink-spec.js'
import type { InventoryStatusSink, StatusCondition } from './status.generated.js'

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }
export type JsonObject = { [key: string]: JsonValue }

export const GROUP = 'kollect.dev'
export const VERSION = 'v1alpha1'
export const API_VERSION = `${GROUP}/${VERSION}`
export const SCHEMA_VERSION = 'kollect.dev/v1alpha1'

export interface ObjectRef {
  namespace: string
  name: string
}

/** @public Mirrors the CRDs' label selectors. */
export interface LabelSelectorRequirement {
  key: string
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'
  values?: string[]
}

export interface LabelSelector {
  matchLabels?: Record<string, string>
  matchExpressions?: LabelSelectorRequirement[]
}

/** @public Mirrors Kubernetes' object metadata. */
export interface ObjectMeta {
  name?: string
  namespace?: string
  uid?: string
  generation?: number
  labels?: Record<string, string>
  annotations?: Record<string, string>
  deletionTimestamp?: string
  [key: string]: unknown
}

export interface KubeObject {
  apiVersion?: string
  kind?: string
  metadata?: ObjectMeta
  [key: string]: unknown
}

// ---- KollectProfile ----
export type AttributeType = 'string' | 'integer' | 'number' | 'boolean' | 'list' | 'object'

export interface AttributeSpec {
  name: string
  cel?: string
  jsonPath?: string
  type?: AttributeType
  optional?: boolean
}

export interface KollectProfileSpec {
  attributes: AttributeSpec[]
  redactKeys?: string[]
}

// ---- KollectTarget ----
export interface ResourceSpec {
  group?: string
  version: string
  kind: string
  plural?: string
}

export interface KollectTargetSpec {
  resource: ResourceSpec
  namespaces?: string[]
  namespaceSelector?: LabelSelector
  labelSelector?: LabelSelector
  matchPolicy?: string
  profileRef: { name: string }
  suspend?: boolean
}

// ---- KollectSink ----
/** @public The KollectSink spec whole, every type's settings, as the CRD defines it. */
export type {
  SinkType, DeletionPolicy, GitSinkSettings, GitReviewSettings, PostgresSinkSettings, NatsSinkSettings, KafkaSinkSettings, FileSinkSettings,
  S3SinkSettings, DriftPolicy, KollectSinkSpec,
} from './sink-spec.js'

// ---- KollectInventory ----
export interface KollectInventorySpec {
  targetRefs?: { name: string }[]
  targetSelector?: LabelSelector
  sinkRefs?: { name: string; namespace?: string }[]
  debounce?: string
  maxWait?: string
  suspend?: boolean
}

// ---- KollectScope ----
export interface KollectScopeSpec {
  allowedNamespaces?: string[]
  deniedNamespaces?: string[]
  allowedResources?: { group?: string; kind: string }[]
  allowedSinks?: { namespace: string; name: string }[]
  /** Secrets in other namespaces that this namespace's sinks may use; absent: none. */
  allowedSecrets?: { namespace: string; name: string }[]
  minDebounce?: string
}

// ---- Status ----
// Generated from the CRDs' status schemas (`npm run docs`), the source the API server validates
// against and docs/crd-reference.md documents: a hook cannot write a field the CRD would prune.
/** @public Every kind's status whole, as the CRDs define it. */
export type {
  InventoryStatus, InventoryStatusSink, ProfileStatus, ScopeStatus, SinkStatus, StatusCondition as Condition, TargetStatus, TargetStatusResource,
} from './status.generated.js'

export type ConditionStatus = StatusCondition['status']

// ---- Items and snapshots ----

/** One selected object after extraction. Identity: source target + object uid. */
export interface Item {
  group: string
  version: string
  kind: string
  namespace: string
  name: string
  uid: string
  target: ObjectRef
  attributes: JsonObject
}

export interface Snapshot {
  schemaVersion: typeof SCHEMA_VERSION
  inventory: ObjectRef
  cluster: string
  itemCount: number
  /** SHA-256 (hex) of the canonical JSON of `items`. */
  checksum: string
  items: Item[]
  /** Hub exports only: when the spoke published the marker this snapshot closes, so a reader sees since when a silent spoke's data dates. */
  spoke?: {
    lastMarkerAt: string
    /** How often the hub re-read this inventory from the spoke's stream after a marker that failed its check; absent while never. */
    rereads?: number
  }
}

/** What a target sync hands to the exporter. */
export interface TargetReport {
  target: ObjectRef
  generation: number
  checksum: string
  items: Item[]
  /** Keys (see itemKey) of selected objects whose extraction failed: the exporter keeps their last good item. */
  failedKeys: string[]
  /** itemHash of each item, in order, as the hooks computed it; spares the exporter the work. */
  itemHashes?: string[]
  /**
   * The target's metadata.uid, its generation and the hooks server's arrival stamp of the sync
   * order reports (see isStaleReport). Hooks before issue 16 send none: their reports are
   * accepted unordered.
   */
  uid?: string
  /** Stamped when the sync arrived: strictly increasing per hooks process, comparable across replicas within their clock skew. */
  sequence?: number
  /** Parallel to items: each object's metadata.generation, null where it has none. */
  itemGenerations?: (number | null)[]
  /**
   * Set on a report that holds only what changed since the report whose checksum this is (of
   * the same uid): its items are the new and changed ones, removedKeys the items gone, and
   * failedKeys all of them. An exporter that does not hold that report answers BaseMismatch.
   */
  base?: string
  removedKeys?: string[]
}

/**
 * A TargetReport as JSON, serialised once by the extraction child, with what the hooks read of it
 * unparsed. It goes to an exporter over HTTP as it is; an in-process exporter parses it.
 */
export interface SerialisedReport {
  target: ObjectRef
  generation: number
  itemCount: number
  /** The TargetReport's JSON (UTF-8), `sequence` included. */
  json: Uint8Array
}

export interface ResolvedSink extends ObjectRef {
  spec: KollectSinkSpec
}

/** What an inventory sync hands to the exporter. */
export interface InventoryComposition {
  inventory: ObjectRef
  generation: number
  targets: ObjectRef[]
  sinks: ResolvedSink[]
  /** The inventory names no sinks: export to the embedded default. False when it names sinks that were all refused or missing. */
  useDefaultSink?: boolean
  debounceMs: number
  maxWaitMs: number
  suspend: boolean
}

type SinkState = InventoryStatusSink['state']

export interface SinkExportState extends ObjectRef {
  state: SinkState
  checksum: string
  itemCount: number
  lastExportTime?: string
  message: string
  reviewUrl?: string
}

/** What the exporter has recorded for an inventory; inventory status is a pure function of it. */
export interface InventoryExportState {
  /** Every target of the composition has reported since the exporter started. */
  complete: boolean
  missingTargets: ObjectRef[]
  itemCount: number
  checksum: string
  lastExportTime?: string
  sinks: SinkExportState[]
  /**
   * A change waits for the debounce: checksum and itemCount above are still the last export's.
   * The new checksum is not computed ahead of the export (that costs a full snapshot per report).
   */
  pending?: boolean
  /**
   * How soon the state changes without a new event (the debounce firing, a failing sink's next
   * attempt). It moves with the clock, so it feeds resyncAfterSeconds only, never status.
   */
  nextChangeInMs?: number
}

export interface FinalizeResult {
  finalized: boolean
  state: InventoryExportState
}

/** Whether a sink answered its healthcheck (a connect, SELECT 1, git ls-remote). */
export interface SinkCheck {
  reachable: boolean
  /** Why not, with credentials scrubbed by the sink; empty when reachable. */
  message: string
}

/**
 * The exporter's answer to a target report. A refused report changes nothing: the target keeps
 * the items last accepted (or none, so its inventories wait for it). A Stale one is older than
 * the report held; held* describe that one, so status need not move backwards.
 */
export type ReportResult =
  | { accepted: true; /** Items older (metadata.generation) than the held ones, which were kept. */ staleItems?: number }
  | { accepted: false; reason: 'ResourceLimit'; message: string }
  | { accepted: false; reason: 'Stale'; message: string; heldGeneration: number; heldChecksum: string }
  /** A report of changes only, to a report this exporter does not hold: the whole report must follow. */
  | { accepted: false; reason: 'BaseMismatch'; message: string }

/** Which report of a target: the one a resync would send again when its body did not change. */
export interface HeldReport {
  target: ObjectRef
  uid?: string
  generation: number
  checksum: string
}

/** The one seam between the hooks server and the exporter, in-process or over loopback HTTP. */
export interface ExporterClient {
  reportTarget(report: TargetReport | SerialisedReport): Promise<ReportResult>
  /** Whether reportTarget takes reports of changes only (TargetReport.base): one exporter, not peers. */
  readonly takesChanges?: boolean
  /** Whether the exporter (every replica, with peers) holds exactly that report as the target's latest. */
  holdsReport(report: HeldReport): Promise<boolean>
  /** The target was finalized; with its uid, a report of that uid arriving later is dropped as stale. */
  removeTarget(target: ObjectRef & { uid?: string }): Promise<void>
  applyInventory(composition: InventoryComposition): Promise<InventoryExportState>
  finalizeInventory(composition: InventoryComposition): Promise<FinalizeResult>
  checkSink(sink: ResolvedSink): Promise<SinkCheck>
}
