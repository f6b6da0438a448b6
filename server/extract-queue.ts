/** Half-life of a namespace's slowest recent sync, which decides who may take a reserve child. */
const SLOWEST_HALF_LIFE_MS = 30_000

/** What the queue needs of a sync: the namespace that queues it, and when it started running. */
export interface QueuedSync {
  namespace: string
  started?: number
}

/**
 * The extraction pool's fair queue. Syncs queue per namespace and are taken round robin. A
 * reserve child only takes a sync from a namespace with nothing running whose slowest recent sync
 * was short, so a flood of long syncs holds at most the shared children, even in the gap between
 * two of its syncs.
 */
export class FairQueue<Job extends QueuedSync> {
  /** Per namespace, in arrival order; the Map's order is the round-robin order. */
  private readonly queues = new Map<string, Job[]>()
  private readonly running = new Map<string, number>()
  /** Each namespace's slowest recent sync (run time), halved every SLOWEST_HALF_LIFE_MS. */
  private readonly slowest = new Map<string, { ms: number; at: number }>()

  /** shortMs: a recent sync slower than this keeps its namespace off the reserve children. */
  constructor(private readonly shortMs: number) {}

  get empty(): boolean {
    return this.queues.size === 0
  }

  push(job: Job): void {
    const queue = this.queues.get(job.namespace)
    if (queue) queue.push(job)
    else this.queues.set(job.namespace, [job])
  }

  /** The next sync for a shared child, or for a reserve one; it counts as running from now on. */
  take(reserve: boolean): Job | undefined {
    const namespace = this.nextNamespace(reserve)
    if (namespace === undefined) return undefined
    const queue = this.queues.get(namespace) as Job[]
    const job = queue.shift() as Job
    // Served namespaces go to the back of the rotation.
    this.queues.delete(namespace)
    if (queue.length > 0) this.queues.set(namespace, queue)
    this.running.set(namespace, (this.running.get(namespace) ?? 0) + 1)
    return job
  }

  /** Takes a sync out of the queue before it ran; false when it is not queued (any more). */
  remove(job: Job): boolean {
    const queue = this.queues.get(job.namespace)
    const index = queue?.indexOf(job) ?? -1
    if (!queue || index < 0) return false
    queue.splice(index, 1)
    if (queue.length === 0) this.queues.delete(job.namespace)
    return true
  }

  /** Every queued sync, taken out (shutdown). */
  drain(): Job[] {
    const jobs = [...this.queues.values()].flat()
    this.queues.clear()
    return jobs
  }

  /** A taken sync ended: its run time counts towards its namespace's slowest recent sync. */
  finished(job: Job): void {
    const n = (this.running.get(job.namespace) ?? 1) - 1
    if (n > 0) this.running.set(job.namespace, n)
    else this.running.delete(job.namespace)
    const now = performance.now()
    this.slowest.set(job.namespace, { ms: Math.max(this.slowestRecent(job.namespace, now), now - (job.started ?? now)), at: now })
    // Forget namespaces whose record has decayed away, so the map stays as small as the active set.
    if (this.slowest.size > 64) for (const namespace of this.slowest.keys()) if (this.slowestRecent(namespace, now) < 1) this.slowest.delete(namespace)
  }

  private nextNamespace(reserve: boolean): string | undefined {
    if (!reserve) return this.queues.keys().next().value
    const now = performance.now()
    for (const namespace of this.queues.keys()) {
      if (!this.running.get(namespace) && this.slowestRecent(namespace, now) < this.shortMs) return namespace
    }
    return undefined
  }

  private slowestRecent(namespace: string, now: number): number {
    const s = this.slowest.get(namespace)
    return s ? s.ms * 0.5 ** ((now - s.at) / SLOWEST_HALF_LIFE_MS) : 0
  }
}
