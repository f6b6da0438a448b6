import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { ExporterObserver } from '../../exporter/index.js'

// Metric names and labels are documented in docs/operations.md; a test keeps them in step.
export interface Metrics {
  registry: Registry
  hookDuration: Histogram<'kind' | 'hook' | 'code'>
  itemsExtracted: Counter<'target'>
  extractionErrors: Counter<'target'>
  hookShed: Counter<'reason'>
  staleReports: Counter<'target' | 'dropped'>
  /** Target syncs whose body was byte for byte one already answered: reused, or run again because the exporter lacked its report. */
  unchangedSyncs: Counter<'result'>
  /** Objects of incremental target syncs: given their kept record again, or extracted. */
  syncObjects: Counter<'result'>
  /** Large first syncs extracted by two children at once: joined, or sent to one child whole after all. */
  halvedSyncs: Counter<'result'>
  /** Bytes of objects' metadata.managedFields that extraction children were not given, as no expression of the target reads them. */
  skippedBytes: Counter
  /** What the kept object records are charged, read when scraped. */
  setObjectCacheBytes(read: () => number): void
  /** KOLLECT_EXPORTER_PEERS: calls a peer failed, by call and the role the peer last answered with. */
  exporterPeerFailures: Counter<'call' | 'role'>
  exporterObserver: ExporterObserver
  /** The exporter's item budget and namespace share, in bytes. */
  setItemBudget(bytes: { exporter: number; namespace: number }): void
  /** Whether this exporter writes to sinks: it holds the Lease, or leader election is off. */
  setLeader(leading: boolean): void
}

export type MetricsRole = 'all' | 'hooks' | 'exporter'

/**
 * One registry per process. In a pod the hooks container serves its own metrics plus the
 * exporter's (which listens on loopback only), so each side registers only its own families,
 * and the exporter's process metrics are kollect_exporter_process_*.
 */
export function createMetrics(role: MetricsRole = 'all'): Metrics {
  const registry = new Registry()
  const hooks = new Registry()
  const exporter = new Registry()
  collectDefaultMetrics({ register: registry, prefix: role === 'exporter' ? 'kollect_exporter_' : 'kollect_' })
  const hookDuration = new Histogram({
    name: 'kollect_hook_duration_seconds',
    help: 'Time to answer a Metacontroller hook, by parent kind, hook and HTTP status.',
    labelNames: ['kind', 'hook', 'code'] as const,
    buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [hooks],
  })
  const itemsExtracted = new Counter({
    name: 'kollect_items_extracted_total',
    help: 'Items extracted by target syncs, by target (namespace/name).',
    labelNames: ['target'] as const,
    registers: [hooks],
  })
  const extractionErrors = new Counter({
    name: 'kollect_extraction_errors_total',
    help: 'Objects whose extraction had errors, by target (namespace/name).',
    labelNames: ['target'] as const,
    registers: [hooks],
  })
  const hookShed = new Counter({
    name: 'kollect_hook_shed_total',
    help: 'Hook requests refused with 429 (reason requests|bytes|queue|busy) or target syncs stopped by their budget (EvaluationTimeout|ResourceLimit).',
    labelNames: ['reason'] as const,
    registers: [hooks],
  })
  const staleReports = new Counter({
    name: 'kollect_stale_reports_total',
    help: 'Target reports the exporter found older than what it holds, by target (namespace/name): ' +
      'dropped whole (dropped=report) or items kept at their newer generation (dropped=items, counted per item).',
    labelNames: ['target', 'dropped'] as const,
    registers: [hooks],
  })
  const exporterPeerFailures = new Counter({
    name: 'kollect_exporter_peer_failures_total',
    help: 'Calls to one exporter replica (KOLLECT_EXPORTER_PEERS) that failed or timed out, by call ' +
      '(reportTarget|removeTarget|applyInventory|finalizeInventory) and the role the replica last answered with (active|standby|unknown).',
    labelNames: ['call', 'role'] as const,
    registers: [hooks],
  })
  const exports = new Counter({
    name: 'kollect_exports_total',
    help: 'Sink write attempts, by sink (namespace/name) and result (success|failure).',
    labelNames: ['sink', 'result'] as const,
    registers: [exporter],
  })
  const exportDuration = new Histogram({
    name: 'kollect_export_duration_seconds',
    help: 'Time of successful sink writes, by sink.',
    labelNames: ['sink'] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60],
    registers: [exporter],
  })
  const driftChecks = new Counter({
    name: 'kollect_drift_checks_total',
    help: 'Drift checks of sinks of record, by sink and result (in-step|drifted|repaired|error).',
    labelNames: ['sink', 'result'] as const,
    registers: [exporter],
  })
  const pending = new Gauge({
    name: 'kollect_exports_pending',
    help: 'Sink snapshots waiting to be written (debounced, in flight or retrying).',
    registers: [exporter],
  })
  // Per sink, so that KollectSinkStale joins a sink's age with that sink's own pending exports.
  const pendingBySink = new Gauge({
    name: 'kollect_exports_pending_by_sink',
    help: 'Snapshots each sink owes (in flight or retrying), by sink (namespace/name); 0 for a sink with nothing owed.',
    labelNames: ['sink'] as const,
    registers: [exporter],
  })
  const lastSuccess = new Map<string, number>()
  new Gauge({
    name: 'kollect_sink_last_success_age_seconds',
    help: 'Seconds since each sink last confirmed a write.',
    labelNames: ['sink'] as const,
    registers: [exporter],
    collect() {
      this.reset()
      const now = Date.now()
      for (const [sink, at] of lastSuccess) this.set({ sink }, (now - at) / 1000)
    },
  })
  const heldTotal = new Gauge({
    name: 'kollect_exporter_held_bytes',
    help: 'Bytes of items the exporter holds, as charged to its item budget.',
    registers: [exporter],
  })
  const heldByNamespace = new Gauge({
    name: 'kollect_namespace_held_bytes',
    help: 'Bytes of items the exporter holds for the targets of each namespace, as charged to its share.',
    labelNames: ['namespace'] as const,
    registers: [exporter],
  })
  const budget = new Gauge({
    name: 'kollect_item_budget_bytes',
    help: 'The item budget (scope exporter) and the share of one namespace (scope namespace), in bytes.',
    labelNames: ['scope'] as const,
    registers: [exporter],
  })
  const leader = new Gauge({
    name: 'kollect_exporter_leader',
    help: '1 when this exporter writes to sinks (it holds the Lease, or leader election is off), 0 for a standby.',
    registers: [exporter],
  })
  const refused = new Counter({
    name: 'kollect_reports_refused_total',
    help: 'Target reports the exporter refused, by target (namespace/name) and the limit they would break (namespace|exporter).',
    labelNames: ['target', 'limit'] as const,
    registers: [exporter],
  })
  const journalDropped = new Counter({
    name: 'kollect_journal_entries_dropped_total',
    help: 'Pending-journal entries not resumed at start, by reason: ' +
      'superseded (the targets\' fresh reports built another snapshot, which is written instead) or unreadable.',
    labelNames: ['reason'] as const,
    registers: [exporter],
  })
  const unchangedSyncs = new Counter({
    name: 'kollect_unchanged_syncs_total',
    help: 'Target syncs whose body was byte for byte one already answered: answered again without extraction (result=reused), ' +
      'or run again because the exporter no longer held its report (result=exporter-lacks).',
    labelNames: ['result'] as const,
    registers: [hooks],
  })
  const syncObjects = new Counter({
    name: 'kollect_sync_objects_total',
    help: 'Objects of target syncs read incrementally: given the record their identical bytes gave in the target\'s last sync (result=reused), ' +
      'or sent to extraction (result=extracted).',
    labelNames: ['result'] as const,
    registers: [hooks],
  })
  const halvedSyncs = new Counter({
    name: 'kollect_halved_syncs_total',
    help: 'Target syncs whose objects all went to extraction, large enough to be halved between two idle extraction children: ' +
      'answered from the two halves (result=joined), or extracted whole by one child after a half could not be joined (result=whole).',
    labelNames: ['result'] as const,
    registers: [hooks],
  })
  const skippedBytes = new Counter({
    name: 'kollect_sync_skipped_bytes_total',
    help: 'Bytes of objects\' metadata.managedFields left out of target sync bodies before extraction, ' +
      'as neither the target\'s matchPolicy nor any attribute of its profile reads them.',
    registers: [hooks],
  })
  let objectCacheBytes = () => 0
  new Gauge({
    name: 'kollect_object_cache_bytes',
    help: 'Bytes charged for the object records this hooks replica keeps for incremental target syncs (KOLLECT_OBJECT_CACHE_BYTES).',
    registers: [hooks],
    collect() {
      this.set(objectCacheBytes())
    },
  })
  const merged = Registry.merge([registry, ...(role === 'exporter' ? [] : [hooks]), ...(role === 'hooks' ? [] : [exporter])])
  const sinkLabel = (s: { namespace: string; name: string }) => (s.namespace ? `${s.namespace}/${s.name}` : s.name)
  return {
    registry: merged,
    hookDuration,
    itemsExtracted,
    extractionErrors,
    hookShed,
    staleReports,
    unchangedSyncs,
    syncObjects,
    halvedSyncs,
    skippedBytes,
    setObjectCacheBytes(read) {
      objectCacheBytes = read
    },
    exporterPeerFailures,
    exporterObserver: {
      onExport(e) {
        const sink = sinkLabel(e.sink)
        exports.inc({ sink, result: e.result })
        if (e.result === 'success') {
          exportDuration.observe({ sink }, e.durationMs / 1000)
          lastSuccess.set(sink, Date.now())
        }
      },
      onDrift(e) {
        driftChecks.inc({ sink: sinkLabel(e.sink), result: e.result })
      },
      onPendingChange(n, bySink) {
        pending.set(n)
        pendingBySink.reset()
        for (const s of bySink) pendingBySink.set({ sink: sinkLabel(s.sink) }, s.pending)
      },
      onHeldChange(namespace, namespaceBytes, totalBytes) {
        if (namespaceBytes === 0) heldByNamespace.remove({ namespace })
        else heldByNamespace.set({ namespace }, namespaceBytes)
        heldTotal.set(totalBytes)
      },
      onReportRefused(target, limit) {
        refused.inc({ target: `${target.namespace}/${target.name}`, limit })
      },
      onJournalDropped(reason) {
        journalDropped.inc({ reason })
      },
    },
    setItemBudget(bytes) {
      budget.set({ scope: 'exporter' }, bytes.exporter)
      budget.set({ scope: 'namespace' }, bytes.namespace)
    },
    setLeader(leading) {
      leader.set(leading ? 1 : 0)
    },
  }
}
