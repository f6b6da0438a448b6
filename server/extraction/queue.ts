/** Half-life of a namespace's slowest recent sync, which decides who may take a reserve child. */
const SLOWEST_HALF_LIFE_MS = 30_000
/**
 * Namespaces whose record is kept. Any name can be claimed in a body, so the records are bounded;
 * past the bound the namespace that synced least recently is forgotten and is a newcomer again.
 */
const MAX_RECORDS = 1024

/** What the queue needs of a sync: the namespace that queues it, and when it started running. */
export interface QueuedSync {
  namespace: string
  started?: number
  /** Set by take(): a newcomer's sync on a reserve child, which a known namespace may take back. */
  probation?: boolean
}

/**
 * The extraction pool's fair queue. Syncs queue per namespace and are taken round robin, so the
 * lanes are the namespaces with queued syncs: at most the hooks' in-flight requests.
 *
 * A reserve child only takes a sync from a namespace with nothing running whose slowest recent
 * sync was short, so a flood of long syncs holds at most the shared children, even in the gap
 * between two of its syncs. A namespace with a record of short syncs comes first. A newcomer (no
 * record: new, forgotten, or a name made up for the occasion) gets the benefit of the doubt, but
 * only one newcomer at a time, and on probation: the pool takes the child back for a known
 * namespace that needs it (reserveWanted). So fresh names, one per body, buy one round-robin turn
 * each on the shared children and never the reserve from a namespace with a record.
 */
export class FairQueue<Job extends QueuedSync> {
  /** Per namespace, in arrival order; the Map's order is the round-robin order. */
  private readonly queues = new Map<string, Job[]>()
  private readonly running = new Map<string, number>()
  /** Each namespace's slowest recent sync (run time), halved every SLOWEST_HALF_LIFE_MS; least recently updated first. */
  private readonly slowest = new Map<string, { ms: number; at: number }>()
  private onProbation = 0

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
    const namespace = reserve ? this.nextForReserve() : this.queues.keys().next().value
    if (namespace === undefined) return undefined
    const queue = this.queues.get(namespace) as Job[]
    const job = queue.shift() as Job
    // Served namespaces go to the back of the rotation.
    this.queues.delete(namespace)
    if (queue.length > 0) this.queues.set(namespace, queue)
    this.running.set(namespace, (this.running.get(namespace) ?? 0) + 1)
    job.probation = reserve && !this.slowest.has(namespace)
    if (job.probation) this.onProbation++
    return job
  }

  /** Whether a namespace with a record of short syncs waits for a reserve child. */
  reserveWanted(): boolean {
    return this.known(performance.now()) !== undefined
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

  /**
   * A taken sync ended. Its run time counts towards its namespace's slowest recent sync, unless
   * `record` is false: a sync taken back or refused before extraction says nothing of its namespace.
   */
  finished(job: Job, record = true): void {
    const n = (this.running.get(job.namespace) ?? 1) - 1
    if (n > 0) this.running.set(job.namespace, n)
    else this.running.delete(job.namespace)
    if (job.probation) this.onProbation--
    job.probation = false
    const now = performance.now()
    if (record) this.charge(job.namespace, now - (job.started ?? now), now)
  }

  /** Counts a sync of `ms` towards the namespace's record (a lie about a namespace is charged the whole budget). */
  charge(namespace: string, ms: number, now = performance.now()): void {
    const ms0 = this.slowestRecent(namespace, now)
    this.slowest.delete(namespace)
    this.slowest.set(namespace, { ms: Math.max(ms0, ms), at: now })
    if (this.slowest.size > MAX_RECORDS) this.slowest.delete(this.slowest.keys().next().value as string)
  }

  /** A known namespace with a short record first, else one newcomer at a time. */
  private nextForReserve(): string | undefined {
    const now = performance.now()
    const known = this.known(now)
    if (known !== undefined || this.onProbation > 0) return known
    for (const namespace of this.queues.keys()) if (!this.running.get(namespace) && !this.slowest.has(namespace)) return namespace
    return undefined
  }

  private known(now: number): string | undefined {
    for (const namespace of this.queues.keys()) {
      if (!this.running.get(namespace) && this.slowest.has(namespace) && this.slowestRecent(namespace, now) < this.shortMs) return namespace
    }
    return undefined
  }

  private slowestRecent(namespace: string, now: number): number {
    const s = this.slowest.get(namespace)
    return s ? s.ms * 0.5 ** ((now - s.at) / SLOWEST_HALF_LIFE_MS) : 0
  }
}
