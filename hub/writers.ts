import path from 'node:path'
import { DEFAULT_BACKOFF, realClock, SinkDriver, type DriverContext, type Log } from '../exporter/index.js'
import type { KollectSinkSpec, ObjectRef, Snapshot } from '../api/types.js'
import { NO_FENCE } from '../sinks/fence.js'
import { createSinkFactory } from '../sinks/registry.js'
import type { Sink } from '../sinks/sink.js'
import { readSecretDir, type HubConfig } from './config.js'
import type { HubMetrics } from './metrics.js'

interface NamedSink {
  name: string
  spec: KollectSinkSpec
  sink: Sink
}

interface Drivers {
  drivers: SinkDriver[]
  /** The snapshot they were last offered: what a driver writes again. */
  offered: Snapshot | null
}

/**
 * The hub's sinks and their writers: one exporter sink driver per spoke inventory and hub sink,
 * with the exporter's retries and hold after a permanent error; no drift checks and no lease
 * (one hub per consumer).
 */
export class HubWriters {
  private sinks: NamedSink[] = []
  private readonly byInventory = new Map<string, Drivers>()
  private readonly ctx: DriverContext
  private readonly abort = new AbortController()

  constructor(private readonly config: HubConfig, metrics: HubMetrics, log: Log, backoff = DEFAULT_BACKOFF) {
    this.ctx = {
      clock: realClock,
      backoff,
      log,
      observer: { onExport: (e) => metrics.exports.inc({ sink: e.sink.name, result: e.result }) },
      mayWrite: () => true,
      fence: NO_FENCE,
    }
  }

  /** Build every hub sink from the config; the factory reads credentials from each sink's secretDir. */
  async open(): Promise<void> {
    const factory = createSinkFactory({
      dataDir: path.join(this.config.dataDir, 'sinks'),
      credentials: async (resolved) => readSecretDir(this.config.sinks.find((s) => s.name === resolved.name)?.secretDir),
      // The hub config is the operator's own file, not a tenant's resource: no SSRF guard.
      checkEndpoint: async () => null,
    })
    this.sinks = await Promise.all(this.config.sinks.map(async (s) => ({
      name: s.name,
      spec: s.spec,
      // The factory reads credentials for a secretRef only; here it names the sink's secretDir.
      sink: await factory({ namespace: 'hub', name: s.name, spec: s.secretDir ? { ...s.spec, secretRef: { name: s.name } } : s.spec }),
    })))
  }

  /** Offer the snapshot to every hub sink's driver and wait until each confirmed it (its retries and holds included). */
  async write(key: string, snapshot: Snapshot): Promise<void> {
    const entry = this.driversOf(key, snapshot.inventory)
    entry.offered = snapshot
    for (const d of entry.drivers) d.offer(snapshot)
    await Promise.all(entry.drivers.map((d) => d.written()))
  }

  /**
   * A spoke removed the inventory: the hub sinks with deletionPolicy Delete remove it, each retried
   * until it succeeds (a permanent error waits the longest backoff); then its drivers go.
   */
  async remove(key: string, inventory: ObjectRef, cluster: string): Promise<void> {
    for (const d of this.driversOf(key, inventory).drivers) {
      d.stop()
      await d.settled
      await d.finalizeUntilDone(cluster, this.abort.signal)
    }
    this.byInventory.delete(key)
  }

  /** Stop every writer: a message waiting for its export is released (rejected). */
  stop(): void {
    this.abort.abort()
    for (const { drivers } of this.byInventory.values()) for (const d of drivers) d.stop()
  }

  /** Once stopped: wait for what the writers run, then close the sinks. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.byInventory.values()].flatMap(({ drivers }) => drivers.map((d) => d.settled)))
    await Promise.allSettled(this.sinks.map((s) => s.sink.close()))
  }

  private driversOf(key: string, inventory: ObjectRef): Drivers {
    const held = this.byInventory.get(key)
    if (held) return held
    const created: Drivers = { drivers: [], offered: null }
    created.drivers = this.sinks.map(({ name, spec, sink }) => new SinkDriver(this.ctx, {
      ref: { namespace: 'hub', name },
      inventory,
      // The hub writes every spoke's cluster label as it came: a sink's own cluster would relabel them.
      resolved: { namespace: 'hub', name, spec: { ...spec, cluster: undefined } },
      desired: () => created.offered,
      open: async () => sink,
      driftChecks: false,
    }))
    this.byInventory.set(key, created)
    return created
  }
}
