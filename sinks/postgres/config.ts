import { Buffer } from 'node:buffer'
import { parse } from 'pg-connection-string'
import { parseDuration } from '../../api/duration.js'
import { configError, secretsFromCredentials, type Secrets, type SinkLabel } from '../errors.js'
import type { SinkOptions } from '../options.js'
import type { Credentials } from '../sink.js'

const DEFAULT_SCHEMA = 'public'
const DEFAULT_TABLE = 'kollect_items'
const SNAPSHOTS_SUFFIX = '_snapshots'
export const MIGRATIONS_TABLE = 'kollect_schema_migrations'
/**
 * Snapshot rows kept per inventory. A row is ~150 bytes and records one export's counts: a
 * thousand is months of history for a quiet inventory, hours for one changing at every debounce.
 */
export const DEFAULT_KEEP_SNAPSHOTS = 1000

/** Credential keys that may hold the connection string, in order of preference. */
const DSN_KEYS = ['dsn', 'url', 'DATABASE_URL'] as const

// Postgres silently truncates identifiers longer than NAMEDATALEN-1 bytes; two long table
// names could then share "<table>_snapshots", so refuse them instead.
const MAX_IDENTIFIER_BYTES = 63

export interface PostgresSettings {
  label: SinkLabel
  schema: string
  table: string
  snapshotsTable: string
  dsn: string
  secrets: Secrets
  /** Rows per upsert statement. */
  chunkSize: number
  /** Snapshot rows beyond the newest `keep` or older than `maxAgeMillis` are pruned; 0: no limit. */
  retention: { keep: number; maxAgeMillis: number; batch: number }
  pool: {
    max: number
    connectionTimeoutMillis: number
    idleTimeoutMillis: number
    statementTimeoutMillis: number
    /** Client-side bound for a server that stops answering without closing the socket. */
    queryTimeoutMillis: number
    /** Frees the inventory lock if this process vanishes mid-transaction. */
    idleInTransactionTimeoutMillis: number
  }
}

/** The connection string: the first of DSN_KEYS that is not blank. */
export function dsnOf(credentials: Credentials): string | undefined {
  const key = DSN_KEYS.find((k) => (credentials[k] ?? '').trim() !== '')
  return key === undefined ? undefined : (credentials[key] ?? '').trim()
}

// pg-connection-string reads these as local file paths while it parses the DSN.
const SSL_FILE_PARAMS = ['sslcert', 'sslkey', 'sslrootcert'] as const

/** Percent-decoded until nothing changes, so an encoded parameter name is found too. */
function decoded(text: string): string {
  for (let i = 0; i < 4; i++) {
    const next = text.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    if (next === text) break
    text = next
  }
  return text
}

/** The certificate-file parameters a DSN names (percent-encoded too): parsing it would read them. */
function sslFileParams(dsn: string): string[] {
  const text = decoded(dsn)
  return SSL_FILE_PARAMS.filter((p) => text.includes(p))
}

/**
 * Where node-postgres will connect, decided by its own parser (pg-connection-string): a `host`
 * parameter wins over the URL's host; a host starting with "/" (also percent-encoded, or from a
 * `socket:` or bare-path DSN) is a unix socket directory; no host means PGHOST, then localhost.
 * The driver connects to that one host (a comma list is one name, which never resolves). A DSN
 * naming certificate files is not parsed at all, since parsing it reads them.
 */
export function postgresEndpoints(dsn: string, env: Record<string, string | undefined> = process.env): { url: string; what?: string }[] {
  const files = sslFileParams(dsn)
  if (files.length > 0) return files.map((p) => ({ url: 'file:', what: `DSN parameter ${p}` }))
  let host: string
  try {
    host = parse(dsn).host || env['PGHOST'] || 'localhost'
  } catch {
    return [{ url: '', what: 'DSN' }] // the driver cannot parse it either
  }
  if (host.startsWith('/')) return [{ url: host, what: `unix socket ${host}` }]
  // Only plain names and addresses become a URL; anything else could parse differently there.
  if (!/^[A-Za-z0-9._~-]+$/.test(host) && !/^[0-9A-Fa-f:.]+$/.test(host)) return [{ url: '', what: `host ${JSON.stringify(host)}` }]
  return [{ url: `postgres://${host.includes(':') ? `[${host}]` : host}/` }]
}

function secretsOf(dsn: string): Secrets {
  const values = [dsn]
  const words: string[] = []
  try {
    const url = new URL(dsn)
    if (url.password) values.push(url.password)
    if (url.username) words.push(url.username)
    const queryPassword = url.searchParams.get('password')
    if (queryPassword) values.push(queryPassword)
    const queryUser = url.searchParams.get('user')
    if (queryUser) words.push(queryUser)
  } catch {
    // key=value form: mask the pairs that carry credentials
    for (const m of dsn.matchAll(/\b(password|user)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)/g)) {
      const value = (m[2] ?? '').replace(/^'|'$/g, '')
      if (value === '') continue
      if (m[1] === 'password') values.push(value)
      else words.push(value)
    }
  }
  return { values, words }
}

function checkIdentifier(label: SinkLabel, what: string, name: string, reserveBytes = 0): void {
  if (name === '' || name.includes('\0')) throw configError(label, `${what} must be a non-empty name without NUL`)
  if (Buffer.byteLength(name, 'utf8') + reserveBytes > MAX_IDENTIFIER_BYTES) {
    throw configError(label, `${what} "${name}" is longer than ${MAX_IDENTIFIER_BYTES - reserveBytes} bytes`)
  }
}

/** Settings from spec.postgres and the secret; a missing DSN or a bad name is a permanent SinkError. */
export function postgresSettings(opts: SinkOptions): PostgresSettings {
  const label: SinkLabel = { kind: 'postgres', id: opts.id }
  const schema = opts.spec.postgres?.schema || DEFAULT_SCHEMA
  const table = opts.spec.postgres?.table || DEFAULT_TABLE
  checkIdentifier(label, 'schema', schema)
  checkIdentifier(label, 'table', table, SNAPSHOTS_SUFFIX.length)

  const dsn = dsnOf(opts.credentials)
  if (dsn === undefined) {
    throw configError(label, `the secret has no connection string (one of the keys ${DSN_KEYS.join(', ')})`)
  }
  // Whatever the SSRF guard allows (KOLLECT_ALLOW_PRIVATE_SINKS is about addresses): a tenant's
  // Secret never makes the exporter read its own files. A private CA is the chart's extraCACerts.
  const [file] = sslFileParams(dsn)
  if (file) throw configError(label, `DSN parameter ${file} names a local file, which a sink may not read; trust a private CA with extraCACerts instead`)
  const keep = opts.spec.postgres?.keepSnapshots ?? DEFAULT_KEEP_SNAPSHOTS
  if (!Number.isSafeInteger(keep) || keep < 0) throw configError(label, 'keepSnapshots must be a whole number, 0 to keep all')
  const age = opts.spec.postgres?.snapshotMaxAge
  const maxAgeMillis = age === undefined ? 0 : parseDuration(age)
  if (maxAgeMillis === null) throw configError(label, `snapshotMaxAge "${age}" is not a duration such as 2160h`)
  return {
    label,
    schema,
    table,
    snapshotsTable: table + SNAPSHOTS_SUFFIX,
    dsn,
    secrets: secretsFromCredentials(opts.credentials, secretsOf(dsn)),
    chunkSize: 2000,
    // Rows deleted per export at most, so a first prune of a long history cannot hold the lock for long.
    retention: { keep, maxAgeMillis, batch: 1000 },
    pool: {
      max: 4,
      connectionTimeoutMillis: 10_000,
      idleTimeoutMillis: 30_000,
      statementTimeoutMillis: 60_000,
      queryTimeoutMillis: 90_000,
      idleInTransactionTimeoutMillis: 60_000,
    },
  }
}
