import { formatDuration, parseDuration } from '../../api/duration.js'
import type { KollectSinkSpec } from '../../api/types.js'
import type { Endpoint } from '../descriptor.js'
import { configError, secretsFromCredentials, type Secrets, type SinkLabel } from '../errors.js'
import type { SinkOptions } from '../options.js'

export const DEFAULT_STREAM = 'KOLLECT'
export const DEFAULT_SUBJECT = 'kollect'
/** Where the last-published state lives; shared by every NATS sink on a server, keyed per stream. */
export const STATE_BUCKET = 'KOLLECT_STATE'
/**
 * Age limit of a stream the sink creates. The current state is in the KV bucket, so this bounds
 * only how long a consumer may stay away (a hub, an auditor's replay): a week, Kafka's default.
 */
const DEFAULT_MAX_AGE_MILLIS = 168 * 3_600_000
const DUPLICATE_WINDOW_MILLIS = 120_000
const REQUEST_TIMEOUT_MILLIS = 5000

// A subject prefix is literal: no wildcards, no empty tokens, nothing that needs escaping.
const SUBJECT_PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/
// JetStream stream names may not contain '.', '*', '>', whitespace or path separators.
const STREAM_NAME = /^[A-Za-z0-9_-]{1,255}$/

type NatsAuth = { token: string } | { user: string; pass: string } | Record<string, never>

export interface NatsSettings {
  label: SinkLabel
  servers: string[]
  stream: string
  subject: string
  auth: NatsAuth
  secrets: Secrets
  /** Events (and KV updates) in flight at once. */
  window: number
  /** Per request: publish ack, KV put, JetStream API call. */
  requestTimeoutMillis: number
  connectTimeoutMillis: number
  /** Then the connection closes and the next use opens a new one. */
  maxReconnectAttempts: number
  reconnectTimeWaitMillis: number
  /** JetStream dedupe window of the stream created by the sink. */
  duplicateWindowMillis: number
  /** Stream limits: applied to a stream the sink creates, and to an existing one when `explicit`. 0: no limit. */
  retention: { maxAgeMillis: number; maxMessages: number; explicit: boolean }
}

// Credentials in the URL itself (nats://user:pass@host) are secrets too.
function urlSecrets(servers: readonly string[]): Secrets {
  const values: string[] = []
  const words: string[] = []
  for (const server of servers) {
    try {
      const url = new URL(server)
      if (url.password) values.push(url.password)
      if (url.username) (url.password ? words : values).push(url.username)
    } catch {
      // host:port without a scheme carries no credentials
    }
  }
  return { values, words }
}

function authFrom(label: SinkLabel, credentials: Readonly<Record<string, string>>): NatsAuth {
  const token = credentials.token ?? ''
  const user = credentials.username ?? credentials.user ?? ''
  const pass = credentials.password ?? ''
  if (token !== '') return { token }
  if (user !== '' || pass !== '') {
    if (user === '' || pass === '') throw configError(label, 'the secret needs both username and password')
    return { user, pass }
  }
  return {}
}

/** Every server of the comma-separated url. */
export function natsEndpoints(spec: KollectSinkSpec): Endpoint[] {
  return spec.nats?.url ? spec.nats.url.split(',').map((u) => ({ url: u.trim() })) : []
}

export function natsSettings(opts: SinkOptions): NatsSettings {
  const label: SinkLabel = { kind: 'nats', id: opts.id }
  const nats = opts.spec.nats
  const url = nats?.url?.trim() ?? ''
  if (url === '') throw configError(label, 'spec.nats.url is required')
  const servers = url.split(',').map((s) => s.trim()).filter((s) => s !== '')
  for (const server of servers) {
    if (!/^(nats|tls):\/\/[^/\s]+\/?$|^[^:/\s]+(:\d+)?$/.test(server)) {
      throw configError(label, 'spec.nats.url must be nats://host:port (comma-separated for several servers)')
    }
  }
  const stream = nats?.stream || DEFAULT_STREAM
  if (!STREAM_NAME.test(stream)) throw configError(label, `stream "${stream}" must match [A-Za-z0-9_-]+`)
  const subject = nats?.subject || DEFAULT_SUBJECT
  if (!SUBJECT_PREFIX.test(subject)) {
    throw configError(label, `subject "${subject}" must be dot-separated tokens of [A-Za-z0-9_-]`)
  }
  const maxAge = nats?.maxAge === undefined ? DEFAULT_MAX_AGE_MILLIS : parseDuration(nats.maxAge)
  // The duplicate window may not outlast max_age, and must cover a publish timeout.
  if (maxAge === null || (maxAge > 0 && maxAge < REQUEST_TIMEOUT_MILLIS)) {
    throw configError(label, `maxAge must be a duration of at least ${formatDuration(REQUEST_TIMEOUT_MILLIS)}, or 0s to keep events`)
  }
  const maxMessages = nats?.maxMessages ?? 0
  if (!Number.isSafeInteger(maxMessages) || maxMessages < 0) throw configError(label, 'maxMessages must be a whole number, 0 for no limit')
  return {
    label,
    servers,
    stream,
    subject,
    auth: authFrom(label, opts.credentials),
    secrets: secretsFromCredentials(opts.credentials, urlSecrets(servers)),
    window: 256,
    requestTimeoutMillis: REQUEST_TIMEOUT_MILLIS,
    connectTimeoutMillis: 5000,
    maxReconnectAttempts: 10,
    reconnectTimeWaitMillis: 500,
    duplicateWindowMillis: maxAge > 0 ? Math.min(DUPLICATE_WINDOW_MILLIS, maxAge) : DUPLICATE_WINDOW_MILLIS,
    retention: { maxAgeMillis: maxAge, maxMessages, explicit: nats?.maxAge !== undefined || nats?.maxMessages !== undefined },
  }
}

/** Does a stream subject (possibly with wildcards) capture every `<prefix>.a.b.c.d` we publish? */
export function capturesEvents(pattern: string, prefix: string): boolean {
  const p = pattern.split('.')
  const t = prefix.split('.')
  const length = t.length + 4
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return true
    if (i >= length) return false
    if (p[i] !== '*' && (i >= t.length || p[i] !== t[i])) return false
  }
  return p.length === length
}
