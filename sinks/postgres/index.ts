import { itemKey } from '../../api/canonical.js'
import type { ObjectRef, Snapshot } from '../../api/types.js'
import type { SinkDescriptor } from '../descriptor.js'
import { diffItems, isEmptyDiff, type ItemDiff } from '../diff.js'
import { during, sinkGuard } from '../errors.js'
import type { SinkOptions } from '../options.js'
import { resultOf } from '../result.js'
import { NO_FENCE, refuseOlder, type WriteFence } from '../fence.js'
import { emptyResult, type DriftMode, type DriftResult, type Sink, type WriteResult } from '../sink.js'
import { dsnOf, postgresEndpoints, postgresSettings, type PostgresSettings } from './config.js'
import {
  addStoredRows, emptyHeld, headerInStep, heldFromRows, inventoryParams, removedKeys, upsertChunks,
  type HeldState, type InventoryParams, type SnapshotHeader,
} from './encode.js'
import { isRetriable, type InventoryTx, PostgresService } from './service.js'


const DRIFT_EXAMPLES = 5

export const postgresSink: SinkDescriptor = {
  type: 'postgres',
  create: createPostgresSink,
  endpoints: (_spec, credentials) => {
    const dsn = dsnOf(credentials)
    return dsn === undefined ? [] : postgresEndpoints(dsn)
  },
}

/**
 * The Postgres sink: one transaction per export. The diff is computed against the rows the
 * table holds, read inside the transaction under the inventory's advisory lock, so a retry,
 * a restarted exporter or a second replica writes nothing new. Throws a permanent SinkError
 * when the configuration is unusable (no DSN, bad table name).
 */
export function createPostgresSink(opts: SinkOptions): Sink {
  const settings = postgresSettings(opts)
  const service = new PostgresService(settings)
  // Inventories whose last drift check found differences that no write has put back since. A
  // write trusts the content_hash column, which a hand edit of the attributes leaves as it was;
  // for these inventories it compares what the rows hold instead, so it cannot skip the repair.
  const drifted = new Set<string>()

  const guarded = sinkGuard(settings.label, settings.secrets, isRetriable)

  return {
    id: opts.id,
    write: (snapshot, fence = NO_FENCE) =>
      guarded('write', async () => {
        const key = inventoryKey(inventoryParams(snapshot))
        const result = await write(service, settings, snapshot, drifted.has(key), fence)
        drifted.delete(key)
        return result
      }),
    verify: (snapshot, mode, fence = NO_FENCE) =>
      guarded(`drift check (${mode})`, async () => {
        const key = inventoryKey(inventoryParams(snapshot))
        const result = await verify(service, settings, snapshot, mode, fence)
        if (result.differences > 0 && !result.repaired) drifted.add(key)
        else drifted.delete(key)
        return result
      }),
    remove: (inventory: ObjectRef, cluster: string) =>
      guarded('remove', () =>
        service.withInventory({ cluster, namespace: inventory.namespace, name: inventory.name }, (tx) => tx.deleteInventory()),
      ),
    healthcheck: () => guarded('healthcheck', () => service.ping()),
    close: () => guarded('close', () => service.end()),
  }
}

function inventoryKey(inventory: InventoryParams): string {
  return JSON.stringify([inventory.cluster, inventory.namespace, inventory.name])
}

async function write(service: PostgresService, settings: PostgresSettings, snapshot: Snapshot, byContent: boolean, fence: WriteFence): Promise<WriteResult> {
  return service.withInventory(inventoryParams(snapshot), async (tx) => {
    // Under the inventory's lock: a later leader's export committed before this one is seen here.
    const latest = await fenced(tx, fence)
    const held = byContent ? await storedState(tx, settings) : heldFromRows(await during('reading the held rows', () => tx.heldRows()))
    const diff = diffItems(held.hashes, snapshot.items)
    // A retry of an export that already committed: the rows and the snapshot row are there.
    if (isEmptyDiff(diff) && headerInStep(latest, snapshot)) return emptyResult()
    return apply(tx, settings, snapshot, held, diff, fence)
  })
}

/** The latest snapshot row, after refusing to write over a later leader's. */
async function fenced(tx: InventoryTx, fence: WriteFence): Promise<SnapshotHeader | undefined> {
  const latest = await tx.latestSnapshot()
  refuseOlder(fence, latest?.lease ? { lease: latest.lease, epoch: Number(latest.epoch) } : undefined, 'the snapshot table')
  return latest
}

/**
 * Compares what the table holds for the inventory now with the snapshot: every row by its
 * content, rows missing or extra, and the snapshot row. Under the write's lock, so an export in
 * flight is never mistaken for drift; 'report' runs read-only, 'repair' puts the differences
 * back in the same transaction, so readers see the whole repair at once or none of it.
 */
async function verify(service: PostgresService, settings: PostgresSettings, snapshot: Snapshot, mode: DriftMode, fence: WriteFence): Promise<DriftResult> {
  return service.withInventory(
    inventoryParams(snapshot),
    async (tx) => {
      const latest = mode === 'repair' ? await fenced(tx, fence) : await tx.latestSnapshot()
      const held = await storedState(tx, settings)
      const diff = diffItems(held.hashes, snapshot.items)
      const headerDrifted = !headerInStep(latest, snapshot)
      const keys = [...diff.added.map(itemKey), ...diff.changed.map((c) => itemKey(c.after)), ...diff.removed.map((r) => r.key)]
      // Sorted, so the same drift gives the same examples (they reach status). The snapshot row
      // comes first: editing it also unstamps every row its export wrote.
      const examples = [...(headerDrifted ? [settings.snapshotsTable] : []), ...keys.sort()].slice(0, DRIFT_EXAMPLES)
      const result: DriftResult = { differences: keys.length + (headerDrifted ? 1 : 0), examples, repaired: false }
      if (mode === 'report' || result.differences === 0) return result
      await apply(tx, settings, snapshot, held, diff, fence)
      return { ...result, repaired: true }
    },
    { readOnly: mode === 'report' },
  )
}

/** What the rows hold, hashed from their stored content: one SELECT, fetched in batches. */
async function storedState(tx: InventoryTx, settings: PostgresSettings): Promise<HeldState> {
  const held = emptyHeld()
  await during('reading the stored rows', () => tx.storedRows(settings.chunkSize, (rows) => addStoredRows(held, rows)))
  return held
}

/** Upserts added and changed rows, deletes removed ones and records the snapshot row. */
async function apply(
  tx: InventoryTx, settings: PostgresSettings, snapshot: Snapshot, held: HeldState, diff: ItemDiff, fence: WriteFence,
): Promise<WriteResult> {
  await during(`upserting rows (${diff.added.length + diff.changed.length})`, async () => {
    for (const columns of upsertChunks(diff, settings.chunkSize)) await tx.upsert(columns, snapshot.checksum)
  })
  if (diff.removed.length > 0) await during(`deleting rows (${diff.removed.length})`, () => tx.deleteItems(removedKeys(diff, held)))
  const result = resultOf(diff)
  await tx.insertSnapshot({ checksum: snapshot.checksum, itemCount: snapshot.itemCount, ...result, token: fence.token })
  // In the export's transaction: readers never see a history pruned for an export that rolled back.
  await during('pruning old snapshot rows', () => tx.pruneSnapshots(settings.retention))
  // The commit point: a pause since the lock was taken may have outlasted the lease.
  fence.check('committing the transaction')
  return result
}
