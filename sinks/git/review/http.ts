import { errorCode, isTransientNetworkError, redact, type Secrets } from '../../errors.js'
import { ReviewError, type ReviewEndpoint } from './provider.js'

// The forge HTTP client the review providers share: one JSON request, guarded and classified, so a
// provider only says which request it sends and what an answer means.

export interface ForgeRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  /** Below the endpoint's apiUrl, already URL-encoded, e.g. /projects/group%2Fproject/merge_requests. */
  path: string
  query?: Record<string, string>
  body?: unknown
  /** Auth and any forge-specific headers. */
  headers?: Record<string, string>
  /** Statuses the caller interprets itself (a 409 on merge, a 404 on delete): returned, not thrown. */
  handled?: readonly number[]
}

export interface ForgeResponse {
  status: number
  /** The parsed JSON body; undefined when the answer has none. */
  body: unknown
}

/** Far above any merge request or page of them; a larger answer is not a forge's. */
export const BODY_LIMIT = 4 * 1024 * 1024

/** A forge's own `message` (or `error`) is echoed to status, cut so a long page cannot flood it. */
const MESSAGE_LIMIT = 200

const endpointSecrets = new WeakMap<ReviewEndpoint, Secrets>()

/** The endpoint's token, which a forge may echo back in any of its forms. */
export function secretsOf(endpoint: ReviewEndpoint): Secrets {
  let secrets = endpointSecrets.get(endpoint)
  if (!secrets) endpointSecrets.set(endpoint, (secrets = { values: [endpoint.token] }))
  return secrets
}

/** A ReviewError about request `what`; the token may also be what a forge echoes back, so every message passes through redact. */
export function forgeError(endpoint: ReviewEndpoint, what: string, kind: ReviewError['kind'], problem: string, status?: number): ReviewError {
  return new ReviewError(kind, redact(`${what}: ${problem}`, secretsOf(endpoint)), status)
}

export async function forgeRequest(endpoint: ReviewEndpoint, req: ForgeRequest): Promise<ForgeResponse> {
  const what = `${req.method} ${req.path}`
  const fail = (kind: ReviewError['kind'], problem: string, status?: number): never => {
    throw forgeError(endpoint, what, kind, problem, status)
  }
  const url = endpoint.apiUrl.replace(/\/+$/, '') + req.path + queryString(req.query)
  const refused = await endpoint.checkEndpoint(url)
  if (refused) fail('invalid', refused)

  let res: Response
  try {
    res = await fetch(url, {
      method: req.method,
      redirect: 'manual',
      signal: AbortSignal.timeout(endpoint.timeoutMs),
      headers: {
        accept: 'application/json',
        ...(req.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...req.headers,
      },
      ...(req.body === undefined ? {} : { body: JSON.stringify(req.body) }),
    })
  } catch (err) {
    return fail('transient', networkProblem(err, endpoint.timeoutMs))
  }

  let text: string
  try {
    text = await readLimited(res)
  } catch (err) {
    if (err instanceof OversizeError) return fail('invalid', err.message, res.status)
    return fail('transient', `reading the answer: ${networkProblem(err, endpoint.timeoutMs)}`)
  }
  const body = parseJson(text)

  if (res.status >= 300 && res.status < 400) {
    // Following would send the token to wherever the Location points, past the SSRF guard.
    fail('invalid', `answered ${res.status}, a redirect to ${locationHost(res.headers.get('location'), url)}; ` +
      'redirects are not followed, set apiUrl to the final address', res.status)
  }
  if ((res.status >= 200 && res.status < 300) || req.handled?.includes(res.status)) {
    if (res.status < 300 && text.trim() !== '' && body === undefined) fail('transient', `answered ${res.status} with a body that is not JSON`, res.status)
    return { status: res.status, body }
  }
  const detail = `answered ${res.status}${forgeMessage(body, secretsOf(endpoint))}`
  return fail(kindOf(res.status), detail, res.status)
}

export function kindOf(status: number): ReviewError['kind'] {
  if (status === 401) return 'auth'
  if (status === 403) return 'forbidden'
  if (status === 404) return 'not-found'
  if (status === 408 || status === 429 || status >= 500) return 'transient'
  return 'invalid'
}

/**
 * ": <the forge's message>" cut to MESSAGE_LIMIT and redacted, or '' when the body has none. Cut
 * by redact, which knows the secrets a cut could split, before anything else reads it.
 */
export function forgeMessage(body: unknown, secrets: Secrets): string {
  if (typeof body !== 'object' || body === null) return ''
  const record = body as Record<string, unknown>
  const raw = record.message ?? record.error
  if (raw === undefined || raw === null || raw === '') return ''
  const text = redact(typeof raw === 'string' ? raw : JSON.stringify(raw), secrets, MESSAGE_LIMIT).replace(/\s+/g, ' ').trim()
  return `: ${text}`
}

class OversizeError extends Error {}

async function readLimited(res: Response): Promise<string> {
  if (!res.body) return ''
  const reader = res.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > BODY_LIMIT) {
      await reader.cancel()
      throw new OversizeError(`answered with more than ${BODY_LIMIT} bytes`)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks).toString('utf8')
}

function queryString(query: Record<string, string> | undefined): string {
  if (!query || Object.keys(query).length === 0) return ''
  return `?${new URLSearchParams(query).toString()}`
}

function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

function locationHost(location: string | null, base: string): string {
  if (!location) return 'an unnamed location'
  try {
    return `host ${new URL(location, base).host}`
  } catch {
    return 'an unparsable location'
  }
}

function networkProblem(err: unknown, timeoutMs: number): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return `no answer within ${timeoutMs}ms`
  const code = errorCode(err)
  if (isTransientNetworkError(err) && code) return `unreachable (${code})`
  return err instanceof Error ? `${err.message}${code ? ` (${code})` : ''}` : String(err)
}
