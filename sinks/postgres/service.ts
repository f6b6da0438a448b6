import pg from 'pg'
import type { FencingToken } from '../fence.js'
import { during, errorChain, isTransientNetworkError } from '../errors.js'
import { quoteIdent } from '../escape.js'
import { MIGRATIONS_TABLE, type PostgresSettings } from './config.js'
import type { HeldRow, InventoryParams, SnapshotHeader, StoredRow } from './encode.js'
import { lockKey, MIGRATIONS, statements, type Statements } from './sql.js'

// SQLSTATEs after which the same statement can succeed later: connection exceptions (08),
// operator intervention such as shutdown or crash recovery (57P), insufficient resources (53),
// serialization failures and deadlocks, statement/lock timeouts and lock contention.
const RETRIABLE_SQLSTATE_PREFIXES = ['08', '57P', '53']
const RETRIABLE_SQLSTATES = new Set(['40001', '40P01', '57014', '55P03'])
// node-postgres reports a socket that closed or stalled under a query with these messages, no code.
const RETRIABLE_DRIVER_MESSAGES = /connection terminated|connection timeout|timeout exceeded when trying to connect|query read timeout|client has encountered a connection error|not queryable/i

export function isRetriable(err: unknown): boolean {
  if (isTransientNetworkError(err)) return true
  return errorChain(err).some((e) => {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
      return RETRIABLE_SQLSTATES.has(code) || RETRIABLE_SQLSTATE_PREFIXES.some((p) => code.startsWith(p))
    }
    return e instanceof Error && RETRIABLE_DRIVER_MESSAGES.test(e.message)
  })
}

/** The statements of one inventory's transaction; every value is a parameter. */
export class InventoryTx {
  constructor(
    private readonly client: pg.PoolClient,
    private readonly sql: Statements,
    private readonly inventory: InventoryParams,
  ) {}

  private get inv(): string[] {
    return [this.inventory.cluster, this.inventory.namespace, this.inventory.name]
  }

  async heldRows(): Promise<HeldRow[]> {
    return (await this.client.query<HeldRow>(this.sql.selectHeld, this.inv)).rows
  }

  async latestSnapshot(): Promise<SnapshotHeader | undefined> {
    const { rows } = await this.client.query<SnapshotHeader>(this.sql.selectLatestSnapshot, this.inv)
    return rows[0]
  }

  /** Every column Kollect writes, read through a cursor so only one batch of rows is in memory at a time. */
  async storedRows(batchSize: number, onBatch: (rows: StoredRow[]) => void): Promise<void> {
    await this.client.query(`DECLARE kollect_stored NO SCROLL CURSOR FOR ${this.sql.selectStored}`, this.inv)
    for (;;) {
      const { rows } = await this.client.query<StoredRow>(`FETCH ${batchSize} FROM kollect_stored`)
      if (rows.length === 0) break
      onBatch(rows)
    }
    await this.client.query('CLOSE kollect_stored')
  }

  async upsert(columns: string[][], snapshotChecksum: string): Promise<number> {
    const result = await this.client.query(this.sql.upsert, [...this.inv, snapshotChecksum, ...columns])
    return result.rowCount ?? 0
  }

  async deleteItems(keyColumns: string[][]): Promise<number> {
    const result = await this.client.query(this.sql.deleteItems, [...this.inv, ...keyColumns])
    return result.rowCount ?? 0
  }

  async insertSnapshot(row: {
    checksum: string; itemCount: number; added: number; changed: number; removed: number; token: FencingToken | undefined
  }): Promise<void> {
    await this.client.query(this.sql.insertSnapshot, [
      ...this.inv, row.checksum, row.itemCount, row.added, row.changed, row.removed, row.token?.lease ?? null, row.token?.epoch ?? null,
    ])
  }

  /** Delete snapshot rows beyond the retention, at most `batch`; returns how many went. */
  async pruneSnapshots(retention: { keep: number; maxAgeMillis: number; batch: number }): Promise<number> {
    if (retention.keep === 0 && retention.maxAgeMillis === 0) return 0
    const result = await this.client.query(this.sql.pruneSnapshots, [...this.inv, retention.keep, retention.maxAgeMillis, retention.batch])
    return result.rowCount ?? 0
  }

  async deleteInventory(): Promise<void> {
    await this.client.query(this.sql.deleteInventoryItems, this.inv)
    await this.client.query(this.sql.deleteInventorySnapshots, this.inv)
  }
}

/** Postgres I/O: the pool, migrations and one transaction per inventory. No diffing here. */
export class PostgresService {
  private readonly pool: pg.Pool
  private readonly sql: Statements
  private readonly names: { schema: string; items: string; snapshots: string; migrations: string }
  private migrated: Promise<void> | undefined
  private closed = false

  constructor(private readonly settings: PostgresSettings) {
    const schema = quoteIdent(settings.schema)
    this.names = {
      schema,
      items: `${schema}.${quoteIdent(settings.table)}`,
      snapshots: `${schema}.${quoteIdent(settings.snapshotsTable)}`,
      migrations: `${schema}.${quoteIdent(MIGRATIONS_TABLE)}`,
    }
    this.sql = statements(this.names.items, this.names.snapshots)
    const p = settings.pool
    this.pool = new pg.Pool({
      connectionString: settings.dsn,
      max: p.max,
      connectionTimeoutMillis: p.connectionTimeoutMillis,
      idleTimeoutMillis: p.idleTimeoutMillis,
      statement_timeout: p.statementTimeoutMillis,
      query_timeout: p.queryTimeoutMillis,
      idle_in_transaction_session_timeout: p.idleInTransactionTimeoutMillis,
      keepAlive: true,
      application_name: 'kollect',
    })
    // An idle client whose server went away emits 'error' on the pool; without a listener
    // Node would crash the exporter. The pool drops that client; the next query reconnects.
    this.pool.on('error', () => undefined)
  }

  /** Create or migrate the tables once per process; a failed attempt is retried on next use. */
  ensureSchema(): Promise<void> {
    this.migrated ??= during('creating or migrating the tables', () => this.migrate()).catch((err: unknown) => {
      this.migrated = undefined
      throw err
    })
    return this.migrated
  }

  private async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      // One lock per schema: the migrations table is shared by every Kollect table in it.
      await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [lockKey('kollect.migrate', this.settings.schema)])
      const { rowCount } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [this.settings.schema])
      // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema exists.
      if (!rowCount) await client.query(`CREATE SCHEMA ${this.names.schema}`)
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${this.names.migrations} (` +
          'table_name text NOT NULL, version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(), ' +
          'PRIMARY KEY (table_name, version))',
      )
      const applied = await client.query<{ version: number }>(
        `SELECT version FROM ${this.names.migrations} WHERE table_name = $1`,
        [this.settings.table],
      )
      const done = new Set(applied.rows.map((r) => r.version))
      for (const migration of MIGRATIONS) {
        if (done.has(migration.version)) continue
        for (const statement of migration.statements(this.names)) await client.query(statement)
        await client.query(`INSERT INTO ${this.names.migrations} (table_name, version, applied_at) VALUES ($1, $2, now())`, [
          this.settings.table,
          migration.version,
        ])
      }
    })
  }

  /**
   * Run fn in one transaction holding the inventory's advisory lock, so writers of one inventory
   * queue up and a reader under the lock never sees another writer's export half done. readOnly
   * makes PostgreSQL itself refuse any write.
   */
  async withInventory<T>(inventory: InventoryParams, fn: (tx: InventoryTx) => Promise<T>, opts: { readOnly?: boolean } = {}): Promise<T> {
    await this.ensureSchema()
    return this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [
        lockKey('kollect.inventory', this.settings.schema, this.settings.table, inventory.cluster, inventory.namespace, inventory.name),
      ])
      return fn(new InventoryTx(client, this.sql, inventory))
    }, opts.readOnly === true)
  }

  private async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>, readOnly = false): Promise<T> {
    if (this.closed) throw new Error('sink is closed')
    const client = await this.pool.connect()
    // While checked out, a client has no pool listener: a connection that dies between two
    // statements would otherwise be an unhandled 'error' event. The next query fails anyway.
    let broken: Error | undefined
    const onError = (err: Error): void => {
      broken = err
    }
    client.on('error', onError)
    try {
      await client.query(readOnly ? 'BEGIN READ ONLY' : 'BEGIN')
      const result = await fn(client)
      await client.query('COMMIT')
      return result
    } catch (err) {
      broken ??= err instanceof Error ? err : new Error(String(err))
      await client.query('ROLLBACK').catch(() => undefined)
      throw err
    } finally {
      client.off('error', onError)
      // A client that failed is discarded rather than returned in an unknown state.
      client.release(broken)
    }
  }

  async ping(): Promise<void> {
    if (this.closed) throw new Error('sink is closed')
    await this.pool.query('SELECT 1')
  }

  async end(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.pool.end()
  }
}
