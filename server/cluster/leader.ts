import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import * as k8s from '@kubernetes/client-node'
import type { FencingToken } from '../../sinks/fence.js'
import type { LeaseSettings } from '../process/config.js'
import type { Logger } from '../process/logger.js'

// Leader election over a coordination.k8s.io/v1 Lease, the algorithm of client-go's
// leaderelection (client-node 1.3 ships no helper): every write carries the resourceVersion it
// read, so two candidates never both win; a lease is free once its holder has not renewed it for
// leaseDuration, measured on the candidate's own clock from when it last saw the record change
// (no clock skew between pods enters); the holder gives up when it cannot renew for renewDeadline,
// which is shorter than leaseDuration, so it stops before anyone else may start. Durations are on
// the monotonic clock: a wall clock stepped by NTP must not stretch or shrink a lease.

export interface LeaderCallbacks {
  onStartedLeading(): void
  onStoppedLeading(): void
  /**
   * A round acquired or renewed the Lease; `at` (on the elector's monotonic clock) is when that
   * round began, not when it ended: no other candidate can have taken the Lease before then plus
   * the lease duration, whatever pause the round hit. Called before onStartedLeading. `token` is
   * the Lease's uid and its transition count as this holder wrote it: the fencing epoch.
   */
  onRenewed?(at: number, token: FencingToken | undefined): void
}

/** The Lease API calls the elector makes; the real one is leaseApi(kc). */
export interface LeaseApi {
  read(): Promise<k8s.V1Lease | null>
  /** The Lease as stored (with its uid), or null when another candidate wrote first. */
  create(lease: k8s.V1Lease): Promise<k8s.V1Lease | null>
  replace(lease: k8s.V1Lease): Promise<k8s.V1Lease | null>
}

/** A 409 (someone wrote first) or 404/422 on replace means we lost the race: null, not an error. */
export function leaseApi(kc: k8s.KubeConfig, namespace: string, name: string): LeaseApi {
  const api = kc.makeApiClient(k8s.CoordinationV1Api)
  const lostRace = (err: unknown) => {
    const code = (err as { code?: number }).code
    if (code === 409 || code === 404) return null
    throw err
  }
  return {
    read: () => api.readNamespacedLease({ name, namespace }).catch((err: unknown) => {
      if ((err as { code?: number }).code === 404) return null
      throw err
    }),
    create: (body) => api.createNamespacedLease({ namespace, body }).catch(lostRace),
    replace: (body) => api.replaceNamespacedLease({ name, namespace, body }).catch(lostRace),
  }
}

/** MicroTime as the API server parses it (RFC 3339 with exactly six fraction digits). */
function microTime(ms: number): Date {
  return new Date(ms).toISOString().replace(/Z$/, '000Z') as unknown as Date
}

export class LeaderElector {
  private leading = false
  private stopped = false
  private observedRecord = ''
  private observedAt = 0
  /** The last round saw another holder: a leader that sees this has already lost. */
  private heldByOther = false
  /** The fencing token of the last write this elector made to the Lease. */
  private token: FencingToken | undefined
  private loop: Promise<void> | null = null
  private readonly ac = new AbortController()

  constructor(
    private readonly api: LeaseApi,
    private readonly settings: LeaseSettings,
    private readonly callbacks: LeaderCallbacks,
    private readonly logger: Logger,
    /** Monotonic milliseconds: every duration the elector measures is on this clock. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  get isLeader(): boolean {
    return this.leading
  }

  /** Campaign until stop(): acquire, renew, and after a loss campaign again as a standby. */
  start(): void {
    this.loop ??= this.run().catch((err: unknown) => {
      if (!this.ac.signal.aborted) this.logger.error({ error: (err as Error).message }, 'leader election stopped')
    })
  }

  /** Stop campaigning; the holder releases the Lease so a standby takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true
    this.ac.abort()
    await this.loop
    if (!this.leading) return
    this.lose('shutting down')
    try {
      const lease = await this.api.read()
      if (lease?.spec?.holderIdentity !== this.settings.identity) return
      await this.api.replace({ ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 } })
    } catch (err) {
      this.logger.warn({ error: (err as Error).message }, 'could not release the lease; a standby takes over when it expires')
    }
  }

  private async run(): Promise<void> {
    const { retryPeriodMs, renewDeadlineMs } = this.settings
    while (!this.stopped) {
      // Acquire: one try per retry period (jittered, as client-go, so candidates do not collide).
      let lastRenew = this.now()
      while (!this.stopped && !(await this.tryAcquireOrRenew())) {
        await this.wait(retryPeriodMs * (1 + Math.random() * 0.2))
        lastRenew = this.now()
      }
      if (this.stopped) return
      this.callbacks.onRenewed?.(lastRenew, this.token)
      this.leading = true
      const lease = `${this.settings.namespace}/${this.settings.name}`
      this.logger.info({ lease, identity: this.settings.identity }, 'acquired the lease: this exporter writes to sinks')
      this.callbacks.onStartedLeading()
      // Renew: give up when a renewal has not succeeded for renewDeadline.
      while (!this.stopped) {
        await this.wait(retryPeriodMs)
        if (this.stopped) return
        const roundAt = this.now()
        const renewed = await this.tryAcquireOrRenew()
        if (renewed) {
          lastRenew = roundAt
          this.callbacks.onRenewed?.(roundAt, this.token)
        } else if (this.heldByOther) {
          this.lose('another candidate holds the lease')
          break
        } else if (this.now() - lastRenew >= renewDeadlineMs - retryPeriodMs) {
          this.lose('could not renew the lease within the renew deadline')
          break
        }
      }
    }
  }

  private lose(reason: string): void {
    if (!this.leading) return
    this.leading = false
    this.logger.warn({ lease: `${this.settings.namespace}/${this.settings.name}`, reason }, 'lost the lease: this exporter stops writing to sinks')
    this.callbacks.onStoppedLeading()
  }

  private async wait(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.ac.signal }).catch(() => undefined)
  }

  /** One round of client-go's tryAcquireOrRenew; API errors count as a failed round. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { name, namespace, identity, durationMs } = this.settings
    this.heldByOther = false
    const wallNow = Date.now()
    const spec: k8s.V1LeaseSpec = {
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(durationMs / 1000),
      acquireTime: microTime(wallNow),
      renewTime: microTime(wallNow),
      leaseTransitions: 0,
    }
    try {
      const lease = await this.api.read()
      // Observed now, after the read: a process paused before or inside the read would otherwise
      // date a fresh record to before the pause and count it expired on its next round (client-go
      // records when it observed a change, not when it asked).
      const now = this.now()
      if (!lease) return this.wrote(await this.api.create({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace }, spec }))
      const held = lease.spec ?? {}
      const record = JSON.stringify([held.holderIdentity, held.renewTime, held.leaseDurationSeconds])
      if (record !== this.observedRecord) {
        this.observedRecord = record
        this.observedAt = now
      }
      const holder = held.holderIdentity ?? ''
      const mine = holder === identity
      const heldForMs = (held.leaseDurationSeconds ?? 0) * 1000
      if (holder !== '' && !mine && this.observedAt + heldForMs > now) {
        this.heldByOther = true
        return false
      }
      if (mine) {
        spec.acquireTime = held.acquireTime ?? spec.acquireTime
        spec.leaseTransitions = held.leaseTransitions ?? 0
      } else {
        spec.leaseTransitions = (held.leaseTransitions ?? 0) + 1
      }
      // metadata carries the resourceVersion read: the API server refuses the write (409) if
      // anyone wrote in between.
      return this.wrote(await this.api.replace({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: lease.metadata ?? {}, spec }))
    } catch (err) {
      this.logger.warn({ error: (err as Error).message }, 'lease request failed')
      return false
    }
  }

  private wrote(stored: k8s.V1Lease | null): boolean {
    if (!stored) return false
    const uid = stored.metadata?.uid
    this.token = uid ? { lease: uid, epoch: stored.spec?.leaseTransitions ?? 0 } : undefined
    return true
  }
}
