import { redact, type Secrets } from './redaction.js'
import { SinkError } from './sink.js'

// Socket-level failures: the peer is unreachable or went away, so a later attempt can succeed.
const TRANSIENT_SYSCALL_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'EHOSTDOWN',
  'ENETUNREACH', 'ENETDOWN', 'ENETRESET', 'EAI_AGAIN', 'ENOTFOUND', 'EADDRNOTAVAIL',
])

/** err, its `cause` chain and AggregateError members (Node reports a refused dual-stack connect as one). */
export function errorChain(err: unknown): unknown[] {
  const out: unknown[] = []
  const queue: unknown[] = [err]
  while (queue.length > 0 && out.length < 20) {
    const e = queue.shift()
    if (e === undefined || e === null || out.includes(e)) continue
    out.push(e)
    if (e instanceof AggregateError) queue.push(...(e.errors as unknown[]))
    if (e instanceof Error && e.cause !== undefined) queue.push(e.cause)
  }
  return out
}

/** The first string `code` in the chain: an errno name or an SQLSTATE, for instance. */
export function errorCode(err: unknown): string | undefined {
  for (const e of errorChain(err)) {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string' && code !== '') return code
  }
  return undefined
}

export function isTransientNetworkError(err: unknown): boolean {
  return errorChain(err).some((e) => {
    const code = (e as { code?: unknown }).code
    return typeof code === 'string' && TRANSIENT_SYSCALL_CODES.has(code)
  })
}

export { EXTERNAL_TEXT_LIMIT, NO_SECRETS, bounded, redact, secretsFromCredentials, type Secrets } from './redaction.js'

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err)
  const message = err.message || (err instanceof AggregateError ? describe(err.errors[0]) : err.name)
  const code = errorCode(err)
  return code && !message.includes(code) ? `${message} (${code})` : message
}

class StepError extends Error {
  constructor(step: string, cause: unknown) {
    super(`${step}: ${describe(cause)}`, { cause })
    this.name = 'StepError'
  }
}

/**
 * Run one step of a sink action so that a failure says which step failed. The original error
 * stays in the cause chain, where the classifiers look for codes.
 */
export async function during<T>(step: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    throw err instanceof SinkError || err instanceof StepError ? err : new StepError(step, err)
  }
}

export interface SinkLabel {
  /** "postgres", "nats", … */
  kind: string
  id: string
}

/**
 * A SinkError naming the sink, the action and the failure. The driver's error is not kept as
 * `cause`: driver errors carry connection parameters, and a logger would print them.
 */
export function sinkFailure(sink: SinkLabel, action: string, err: unknown, retriable: boolean, secrets: Secrets): SinkError {
  if (err instanceof SinkError) return err
  return new SinkError(`${sink.kind} sink ${sink.id}: ${action} failed: ${redact(describe(err), secrets)}`, { retriable })
}

/**
 * The error guard of a sink's actions: a failure becomes a SinkError naming the sink and the
 * action, classified by the sink's own `retriable`. `onFailure` runs first (a sink drops a cache).
 */
export function sinkGuard(sink: SinkLabel, secrets: Secrets, retriable: (err: unknown) => boolean) {
  return async function guarded<T>(action: string, fn: () => Promise<T>, onFailure?: () => void): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      onFailure?.()
      throw sinkFailure(sink, action, err, retriable(err), secrets)
    }
  }
}

/** A configuration problem: retrying cannot help until the KollectSink or its secret changes. */
export function configError(sink: SinkLabel, problem: string): SinkError {
  return new SinkError(`${sink.kind} sink ${sink.id}: invalid configuration: ${problem}`, { retriable: false })
}
