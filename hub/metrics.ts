import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'

// The hub's own registry: it runs alone in its process, with none of the hook or exporter families.
export interface HubMetrics {
  registry: Registry
  refused: Counter
  incomplete: Counter<'cluster'>
  rereads: Counter<'cluster'>
  exports: Counter<'sink' | 'result'>
  /** When each cluster's last marker was published (ms since the epoch). */
  lastMarker: Map<string, number>
}

export function createHubMetrics(now: () => number = Date.now): HubMetrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry, prefix: 'kollect_hub_' })
  const lastMarker = new Map<string, number>()
  new Gauge({
    name: 'kollect_hub_cluster_staleness_seconds',
    help: 'Seconds since each spoke cluster published its last snapshot marker.',
    labelNames: ['cluster'] as const,
    registers: [registry],
    collect() {
      this.reset()
      for (const [cluster, at] of lastMarker) this.set({ cluster }, Math.max(0, (now() - at) / 1000))
    },
  })
  return {
    registry,
    lastMarker,
    refused: new Counter({
      name: 'kollect_hub_messages_refused_total',
      help: 'Spoke messages the hub refused: a cluster not in its list, a body that does not match its subject, or not a Kollect event.',
      registers: [registry],
    }),
    incomplete: new Counter({
      name: 'kollect_hub_incomplete_snapshots_total',
      help: 'Spoke markers whose checksum the items the hub holds do not give (not exported), by cluster.',
      labelNames: ['cluster'] as const,
      registers: [registry],
    }),
    rereads: new Counter({
      name: 'kollect_hub_rereads_total',
      help: 'Spoke inventories re-read from the stream, from their last good marker, after a marker whose checksum the held items did not give, by cluster.',
      labelNames: ['cluster'] as const,
      registers: [registry],
    }),
    exports: new Counter({
      name: 'kollect_hub_exports_total',
      help: 'Hub sink write attempts, by sink and result (success|failure).',
      labelNames: ['sink', 'result'] as const,
      registers: [registry],
    }),
  }
}
