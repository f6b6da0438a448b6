import { canonicalJson, refKey, sha256 } from '../api/canonical.js'
import type { ResolvedSink, SinkCheck } from '../api/types.js'
import { SinkError, type Sink } from '../sinks/sink.js'
import type { Clock, ExporterOptions } from './options.js'
import { isPermanent } from './retry.js'

/** How long a healthcheck answer is reused, and how long one may take. */
const SINK_CHECK_TTL_MS = 30_000
const SINK_CHECK_TIMEOUT_MS = 4_000

interface PooledSink {
  /** Null once a refused grant dropped it: built again at its next use, if the grant is back. */
  sink: Promise<Sink> | null
  refs: number
}

/** One sink per KollectSink and spec, shared by the inventories that use it (refcounted). */
export class SinkPool {
  private readonly pool = new Map<string, PooledSink>()
  private readonly checks = new Map<string, { at: number; result: SinkCheck }>()

  constructor(
    private readonly createSink: (resolved: ResolvedSink | null) => Promise<Sink>,
    private readonly clock: Clock,
    private readonly checkGrant: ExporterOptions['checkGrant'] = undefined,
  ) {}

  acquire(poolKey: string, resolved: ResolvedSink | null): void {
    const pooled = this.pool.get(poolKey)
    if (pooled) {
      pooled.refs++
      return
    }
    const fresh: PooledSink = { sink: null, refs: 1 }
    this.build(fresh, resolved)
    this.pool.set(poolKey, fresh)
  }

  private build(pooled: PooledSink, resolved: ResolvedSink | null): Promise<Sink> {
    const sink = this.createSink(resolved)
    sink.catch(() => undefined) // surfaced per write, where the sink's state records it
    pooled.sink = sink
    return sink
  }

  release(poolKey: string): void {
    const pooled = this.pool.get(poolKey)
    if (!pooled || --pooled.refs > 0) return
    this.pool.delete(poolKey)
    pooled.sink?.then((s) => s.close()).catch(() => undefined)
  }

  /**
   * The pooled sink of an acquired key, once its grant is confirmed; a failed creation (missing
   * secret, bad config) is tried again next time.
   */
  async sinkFor(poolKey: string, resolved: ResolvedSink | null): Promise<Sink> {
    const pooled = this.pool.get(poolKey) as PooledSink
    await this.confirmGrant(poolKey, resolved)
    // Released while the grant was looked up: building now would leave a sink nothing closes.
    if (this.pool.get(poolKey) !== pooled) throw new SinkError('the sink was released while its grant was looked up', { retriable: true })
    const attempt = pooled.sink ?? this.build(pooled, resolved)
    try {
      return await attempt
    } catch (err) {
      // Built again at the next use, after that use's grant check: a build started now would
      // answer the next write with what the cluster said before (a grant not yet given).
      if (pooled.sink === attempt) pooled.sink = null
      throw err
    }
  }

  /**
   * A built sink holds its credentials, so the grant of a Secret in another namespace is looked
   * up again before every use, not only when the Secret is read. A refusal closes the pooled sink
   * and forgets it, credentials included; a failed lookup (retriable) keeps it.
   */
  private async confirmGrant(poolKey: string, resolved: ResolvedSink | null): Promise<void> {
    if (!resolved || !this.checkGrant) return
    try {
      await this.checkGrant(resolved)
    } catch (err) {
      const pooled = this.pool.get(poolKey)
      if (isPermanent(err) && pooled?.sink) {
        const dropped = pooled.sink
        pooled.sink = null
        dropped.then((s) => s.close()).catch(() => undefined)
      }
      throw err
    }
  }

  /**
   * Runs the sink's healthcheck, on the pooled instance when an inventory uses the sink, else on a
   * short-lived one. Answers are reused for a while: Metacontroller resyncs sinks periodically.
   */
  async check(resolved: ResolvedSink): Promise<SinkCheck> {
    const poolKey = poolKeyOf(resolved)
    try {
      await this.confirmGrant(poolKey, resolved)
    } catch (err) {
      // A refused grant outdates the answer a check with the credentials gave.
      this.checks.delete(poolKey)
      return { reachable: false, message: (err as Error).message }
    }
    const cached = this.checks.get(poolKey)
    if (cached && this.clock.now() - cached.at < SINK_CHECK_TTL_MS) return cached.result
    let temporary: Promise<Sink> | null = null
    let result: SinkCheck
    try {
      const sink = await (this.pool.get(poolKey)?.sink ?? (temporary = this.createSink(resolved)))
      await withTimeout(sink.healthcheck(), SINK_CHECK_TIMEOUT_MS, `no answer within ${SINK_CHECK_TIMEOUT_MS} ms`)
      result = { reachable: true, message: '' }
    } catch (err) {
      result = { reachable: false, message: (err as Error).message }
    }
    if (temporary) void temporary.then((s) => s.close()).catch(() => undefined)
    this.checks.set(poolKey, { at: this.clock.now(), result })
    if (this.checks.size > 1000) this.checks.delete(this.checks.keys().next().value as string)
    return result
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.pool.values()].map(async (p) => (await p.sink)?.close()))
    this.pool.clear()
  }
}

export function poolKeyOf(resolved: ResolvedSink | null): string {
  return resolved ? `${refKey(resolved)}#${sha256(canonicalJson(resolved.spec))}` : 'embedded/default'
}

function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(message)), ms) })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
