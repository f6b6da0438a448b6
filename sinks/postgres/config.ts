import { Buffer } from 'node:buffer'
import { configError, secretsFromCredentials, type Secrets, type SinkLabel } from '../errors.js'
import type { SinkOptions } from '../options.js'

export const DEFAULT_SCHEMA = 'public'
export const DEFAULT_TABLE = 'kollect_items'
export const SNAPSHOTS_SUFFIX = '_snapshots'
export const MIGRATIONS_TABLE = 'kollect_schema_migrations'

/** Credential keys that may hold the connection string, in order of preference. */
export const DSN_KEYS = ['dsn', 'url', 'DATABASE_URL'] as const

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

  const key = DSN_KEYS.find((k) => (opts.credentials[k] ?? '').trim() !== '')
  if (key === undefined) {
    throw configError(label, `the secret has no connection string (one of the keys ${DSN_KEYS.join(', ')})`)
  }
  const dsn = (opts.credentials[key] ?? '').trim()
  return {
    label,
    schema,
    table,
    snapshotsTable: table + SNAPSHOTS_SUFFIX,
    dsn,
    secrets: secretsFromCredentials(opts.credentials, secretsOf(dsn)),
    chunkSize: 2000,
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
