// Bounded concurrency for sinks that send many small requests (NATS publishes, S3 objects): a
// window of them in flight, never the whole export at once.

/** Run fn over items with at most `limit` in flight; stop starting new ones after a failure, settle all, throw the first. */
export async function forEachBounded<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0
  let failure: { err: unknown } | undefined
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const item = items[next++] as T
      try {
        await fn(item)
      } catch (err) {
        failure ??= { err }
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  if (failure !== undefined) throw failure.err
}
