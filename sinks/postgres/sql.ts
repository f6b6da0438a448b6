import { createHash } from 'node:crypto'
import { ITEM_COLUMNS, KEY_COLUMNS } from './encode.js'

// Pure: the SQL the sink runs (the migrations and one inventory's statements) and its lock keys.
// Every value is a parameter; only quoted identifiers are spliced in.

/** A 64-bit advisory lock key from names; distinct tables and inventories get distinct locks. */
export function lockKey(...parts: string[]): string {
  const digest = createHash('sha256').update(JSON.stringify(parts)).digest()
  return digest.readBigInt64BE(0).toString()
}

export interface Migration {
  version: number
  statements: (t: { items: string; snapshots: string }) => string[]
}

// Append only: a released migration never changes, a new one gets the next version.
export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    statements: ({ items, snapshots }) => [
      `CREATE TABLE ${items} (
        cluster text NOT NULL,
        inventory_namespace text NOT NULL,
        inventory_name text NOT NULL,
        target_namespace text NOT NULL,
        target_name text NOT NULL,
        uid text NOT NULL,
        api_group text NOT NULL,
        api_version text NOT NULL,
        kind text NOT NULL,
        namespace text NOT NULL,
        name text NOT NULL,
        attributes jsonb NOT NULL,
        content_hash text NOT NULL,
        snapshot_checksum text NOT NULL,
        exported_at timestamptz NOT NULL,
        PRIMARY KEY (cluster, inventory_namespace, inventory_name, target_namespace, target_name, uid)
      )`,
      `CREATE TABLE ${snapshots} (
        id bigserial PRIMARY KEY,
        cluster text NOT NULL,
        inventory_namespace text NOT NULL,
        inventory_name text NOT NULL,
        checksum text NOT NULL,
        item_count integer NOT NULL,
        added integer NOT NULL,
        changed integer NOT NULL,
        removed integer NOT NULL,
        exported_at timestamptz NOT NULL
      )`,
      `CREATE INDEX ON ${snapshots} (cluster, inventory_namespace, inventory_name, id)`,
    ],
  },
  {
    // Fencing: the Lease and epoch of the leader that wrote each export (null without leader election).
    version: 2,
    statements: ({ snapshots }) => [`ALTER TABLE ${snapshots} ADD COLUMN lease text, ADD COLUMN epoch bigint`],
  },
]

export interface Statements {
  selectHeld: string
  selectLatestSnapshot: string
  selectStored: string
  upsert: string
  deleteItems: string
  insertSnapshot: string
  deleteInventoryItems: string
  deleteInventorySnapshots: string
  pruneSnapshots: string
}

export function statements(items: string, snapshots: string): Statements {
  const inventoryWhere = 'cluster = $1 AND inventory_namespace = $2 AND inventory_name = $3'
  const itemColumns = ITEM_COLUMNS.map(([name]) => name)
  // $1..$3 inventory, $4 snapshot checksum, then one array per item column
  const arrays = ITEM_COLUMNS.map(([, type], i) => `$${i + 5}::${type}[]`).join(', ')
  const updates = [...itemColumns.filter((c) => !(KEY_COLUMNS as readonly string[]).includes(c)), 'snapshot_checksum', 'exported_at']
    .map((c) => `${c} = excluded.${c}`)
    .join(', ')
  const keyArrays = KEY_COLUMNS.map((_, i) => `$${i + 4}::text[]`).join(', ')
  return {
    selectHeld: `SELECT target_namespace, target_name, uid, content_hash FROM ${items} WHERE ${inventoryWhere}`,
    selectLatestSnapshot: `SELECT checksum, item_count, lease, epoch FROM ${snapshots} WHERE ${inventoryWhere} ORDER BY id DESC LIMIT 1`,
    // "stamped": the row's (snapshot_checksum, exported_at) are those of an export of this
    // inventory; an export stamps its rows and its snapshot row with one now().
    selectStored:
      `SELECT ${itemColumns.join(', ')}, (snapshot_checksum, exported_at) IN ` +
      `(SELECT checksum, exported_at FROM ${snapshots} WHERE ${inventoryWhere}) AS stamped ` +
      `FROM ${items} WHERE ${inventoryWhere}`,
    // Every row passed was diffed under the inventory lock in this transaction, so each one is
    // written; a repair must overwrite a row whose hand edit left content_hash as it was.
    upsert:
      `INSERT INTO ${items} (cluster, inventory_namespace, inventory_name, ${itemColumns.join(', ')}, snapshot_checksum, exported_at) ` +
      `SELECT $1, $2, $3, u.*, $4, now() FROM unnest(${arrays}) AS u ` +
      `ON CONFLICT (cluster, inventory_namespace, inventory_name, ${KEY_COLUMNS.join(', ')}) DO UPDATE SET ${updates}`,
    deleteItems:
      `DELETE FROM ${items} WHERE ${inventoryWhere} AND (${KEY_COLUMNS.join(', ')}) IN ` +
      `(SELECT * FROM unnest(${keyArrays}))`,
    insertSnapshot:
      `INSERT INTO ${snapshots} (cluster, inventory_namespace, inventory_name, checksum, item_count, added, changed, removed, lease, epoch, exported_at) ` +
      `VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now())`,
    deleteInventoryItems: `DELETE FROM ${items} WHERE ${inventoryWhere}`,
    deleteInventorySnapshots: `DELETE FROM ${snapshots} WHERE ${inventoryWhere}`,
    // $4 rows to keep, $5 max age in ms (0: none for either), $6 rows to delete at most. Never the
    // newest row, never a row stamping a current item: drift checks would take its items for hand edits.
    pruneSnapshots:
      `DELETE FROM ${snapshots} WHERE id IN (SELECT s.id FROM ${snapshots} s ` +
      `WHERE s.cluster = $1 AND s.inventory_namespace = $2 AND s.inventory_name = $3 ` +
      `AND s.id < (SELECT max(id) FROM ${snapshots} WHERE ${inventoryWhere}) ` +
      `AND (($4::integer > 0 AND s.id <= (SELECT id FROM ${snapshots} WHERE ${inventoryWhere} ORDER BY id DESC OFFSET $4 LIMIT 1)) ` +
      `OR ($5::bigint > 0 AND s.exported_at < now() - $5::bigint * interval '1 millisecond')) ` +
      `AND NOT EXISTS (SELECT 1 FROM ${items} i WHERE i.cluster = $1 AND i.inventory_namespace = $2 AND i.inventory_name = $3 ` +
      `AND i.snapshot_checksum = s.checksum AND i.exported_at = s.exported_at) ` +
      'ORDER BY s.id LIMIT $6)',
  }
}
