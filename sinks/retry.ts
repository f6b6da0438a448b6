import pRetry from 'p-retry'

export interface BackoffPolicy {
  minMs: number
  maxMs: number
  factor: number
}

export const DEFAULT_BACKOFF: BackoffPolicy = { minMs: 500, maxMs: 60_000, factor: 2 }

/**
 * Retry until success or abort: capped exponential backoff with jitter. A pending snapshot is
 * never dropped, so there is no attempt limit; the cap bounds how stale a recovered sink is.
 */
export function retryUntilDone<T>(
  attempt: () => Promise<T>,
  options: { policy: BackoffPolicy; signal: AbortSignal; onFailedAttempt: (error: Error, attemptNumber: number) => void },
): Promise<T> {
  return pRetry(attempt, {
    retries: Number.POSITIVE_INFINITY,
    factor: options.policy.factor,
    minTimeout: options.policy.minMs,
    maxTimeout: options.policy.maxMs,
    randomize: true,
    signal: options.signal,
    onFailedAttempt: ({ error, attemptNumber }) => options.onFailedAttempt(error, attemptNumber),
    // p-retry gives up on TypeError by default; for a sink any failure is worth another try.
    shouldRetry: () => !options.signal.aborted,
  })
}
