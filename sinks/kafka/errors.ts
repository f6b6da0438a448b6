// Kafka's errors, classified: what the sink retries, and what status names.
import { errorChain, isTransientNetworkError } from '../errors.js'
import { BrokerRefused } from './connections.js'

/**
 * Retriable: the network, timeouts, and the client's own protocol errors that Kafka marks as
 * retriable (a leader moving, a coordinator loading, a broker not yet up). Authentication,
 * authorization, invalid configurations and a broker the SSRF guard refused are permanent.
 */
export function isRetriable(err: unknown): boolean {
  const chain = errorChain(err)
  if (chain.some((e) => e instanceof BrokerRefused)) return false
  if (isTransientNetworkError(err)) return true
  if (chain.some((e) => e instanceof Error && /authenticat|authoriz|sasl|InvalidConfig|InvalidReplicationFactor|PolicyViolation/i.test(`${e.name} ${e.message}`))) return false
  return chain.some((e) => {
    if (!(e instanceof Error)) return false
    const flags = e as Error & { canRetry?: boolean; code?: string }
    if (flags.canRetry === true) return true
    // A newer producer with our transactional id ("... which fences the current one"): an old
    // leader's retry registers the id again and stops once it learns it lost the lease.
    return /Timeout|NetworkError|ConnectionError|fence[sd]|coordinator|leader|CONCURRENT_TRANSACTIONS|Unknown topic|not available/i.test(`${e.name} ${flags.code ?? ''} ${e.message}`)
  })
}

/**
 * The client reports "metadata failed 4 times" or "Cannot connect to any broker" with the reason
 * inside: name it (an authentication failure first, then the innermost error) so the status says
 * what is wrong. The original stays the cause, where isRetriable looks.
 */
export async function explained<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    const chain = errorChain(err).filter((e): e is Error => e instanceof Error)
    const auth = chain.find((e) => /authentication failed/i.test(e.message))
    const inner = auth ?? chain.filter((e) => !(e instanceof AggregateError)).at(-1)
    if (!(err instanceof Error) || !inner || inner === err || err.message.includes(inner.message)) throw err
    throw new Error(`${err.message}: ${inner.message}`, { cause: err })
  }
}

/** A topic another replica created first. */
export const alreadyExists = (err: unknown): boolean => errorChain(err).some((e) => e instanceof Error && /already exists/i.test(e.message))
