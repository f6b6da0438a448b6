import { canonicalJson, refKey, sha256 } from '../api/canonical.js'
import type { ResolvedSink, SinkCheck } from '../api/types.js'
import type { Sink } from '../sinks/sink.js'
import type { Clock } from './options.js'

/** How long a healthcheck answer is reused, and how long one may take. */
export const SINK_CHECK_TTL_MS = 30_000
export const SINK_CHECK_TIMEOUT_MS = 4_000

interface PooledSink {
  sink: Promise<Sink>
  refs: number
}

/** One sink per KollectSink and spec, shared by the inventories that use it (refcounted). */
export class SinkPool {
  private readonly pool = new Map<string, PooledSink>()
  private readonly checks = new Map<string, { at: number; result: SinkCheck }>()

  constructor(private readonly createSink: (resolved: ResolvedSink | null) => Promise<Sink>, private readonly clock: Clock) {}

  acquire(poolKey: string, resolved: ResolvedSink | null): void {
    const pooled = this.pool.get(poolKey)
    if (pooled) {
      pooled.refs++
      return
    }
    const sink = this.createSink(resolved)
    sink.catch(() => undefined) // surfaced per write, where the sink's state records it
    this.pool.set(poolKey, { sink, refs: 1 })
  }

  release(poolKey: string): void {
    const pooled = this.pool.get(poolKey)
    if (!pooled || --pooled.refs > 0) return
    this.pool.delete(poolKey)
    pooled.sink.then((s) => s.close()).catch(() => undefined)
  }

  /** The pooled sink of an acquired key; a failed creation (missing secret, bad config) is tried again next time. */
  async sinkFor(poolKey: string, resolved: ResolvedSink | null): Promise<Sink> {
    const pooled = this.pool.get(poolKey) as PooledSink
    const attempt = pooled.sink
    try {
      return await attempt
    } catch (err) {
      if (pooled.sink === attempt) {
        pooled.sink = this.createSink(resolved)
        pooled.sink.catch(() => undefined)
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
    await Promise.allSettled([...this.pool.values()].map(async (p) => (await p.sink).close()))
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
