import pRetry from 'p-retry'
import { SinkError } from '../sinks/sink.js'

export interface BackoffPolicy {
  minMs: number
  maxMs: number
  factor: number
}

export const DEFAULT_BACKOFF: BackoffPolicy = { minMs: 500, maxMs: 60_000, factor: 2 }

/** A sink said retrying cannot help (a bad configuration, a refused endpoint, wrong credentials). */
export function isPermanent(error: unknown): error is SinkError {
  return error instanceof SinkError && !error.retriable
}

/**
 * Retry until success, abort, or a permanent error: capped exponential backoff with jitter. A
 * pending snapshot is never dropped, so there is no attempt limit; the cap bounds how stale a
 * recovered sink is. A permanent error ends the loop: the caller decides when to try again.
 */
export function retryUntilDone<T>(
  attempt: () => Promise<T>,
  options: { policy: BackoffPolicy; signal: AbortSignal; onFailedAttempt: (error: Error, attemptNumber: number) => void },
): Promise<T> {
  // p-retry treats a TypeError (a sink bug, or a non-Error throw it wraps) as final before it
  // asks shouldRetry; for a sink, giving up would strand the pending snapshot.
  const guarded = async (): Promise<T> => {
    try {
      return await attempt()
    } catch (err) {
      if (err instanceof Error && !(err instanceof TypeError)) throw err
      throw new Error(err instanceof Error ? err.message : String(err), { cause: err })
    }
  }
  return pRetry(guarded, {
    retries: Number.POSITIVE_INFINITY,
    factor: options.policy.factor,
    minTimeout: options.policy.minMs,
    maxTimeout: options.policy.maxMs,
    randomize: true,
    signal: options.signal,
    onFailedAttempt: ({ error, attemptNumber }) => options.onFailedAttempt(error, attemptNumber),
    shouldRetry: ({ error }) => !options.signal.aborted && !isPermanent(error),
  })
}

/** The longest wait after the given failed attempt (jitter at most doubles the delay). */
export function maxRetryDelayMs(policy: BackoffPolicy, attemptNumber: number): number {
  return retryDelayMs(policy, attemptNumber, () => 1)
}

/** The wait after the given failed attempt, jittered as retryUntilDone waits, for retries on a timer. */
export function retryDelayMs(policy: BackoffPolicy, attemptNumber: number, random: () => number = Math.random): number {
  return Math.min(policy.maxMs, Math.round((1 + random()) * policy.minMs * policy.factor ** Math.max(0, attemptNumber - 1)))
}
