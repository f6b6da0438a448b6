import type { ObjectRef, Snapshot } from '../../api/types.js'
import { diffItems, isEmptyDiff } from '../diff.js'
import { during, sinkFailure } from '../errors.js'
import type { SinkOptions } from '../options.js'
import { resultOf } from '../result.js'
import { emptyResult, type Sink, type WriteResult } from '../sink.js'
import { postgresSettings, type PostgresSettings } from './config.js'
import { heldFromRows, inventoryParams, removedKeys, upsertChunks } from './encode.js'
import { isRetriable, PostgresService } from './service.js'

export { postgresSettings } from './config.js'

/**
 * The Postgres sink: one transaction per export. The diff is computed against the rows the
 * table holds, read inside the transaction under the inventory's advisory lock, so a retry,
 * a restarted exporter or a second replica writes nothing new. Throws a permanent SinkError
 * when the configuration is unusable (no DSN, bad table name).
 */
export function createPostgresSink(opts: SinkOptions): Sink {
  const settings = postgresSettings(opts)
  const service = new PostgresService(settings)

  async function guarded<T>(action: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      throw sinkFailure(settings.label, action, err, isRetriable(err), settings.secrets)
    }
  }

  return {
    id: opts.id,
    write: (snapshot) => guarded('write', () => write(service, settings, snapshot)),
    remove: (inventory: ObjectRef, cluster: string) =>
      guarded('remove', () =>
        service.withInventory({ cluster, namespace: inventory.namespace, name: inventory.name }, (tx) => tx.deleteInventory()),
      ),
    healthcheck: () => guarded('healthcheck', () => service.ping()),
    close: () => guarded('close', () => service.end()),
  }
}

async function write(service: PostgresService, settings: PostgresSettings, snapshot: Snapshot): Promise<WriteResult> {
  return service.withInventory(inventoryParams(snapshot), async (tx) => {
    const held = heldFromRows(await during('reading the held rows', () => tx.heldRows()))
    const diff = diffItems(held.hashes, snapshot.items)
    // A retry of an export that already committed: the rows and the snapshot row are there.
    if (isEmptyDiff(diff) && (await tx.latestChecksum()) === snapshot.checksum) return emptyResult()

    await during(`upserting rows (${diff.added.length + diff.changed.length})`, async () => {
      for (const columns of upsertChunks(diff, settings.chunkSize)) await tx.upsert(columns, snapshot.checksum)
    })
    if (diff.removed.length > 0) await during(`deleting rows (${diff.removed.length})`, () => tx.deleteItems(removedKeys(diff, held)))
    const result = resultOf(diff)
    await tx.insertSnapshot({ checksum: snapshot.checksum, itemCount: snapshot.itemCount, ...result })
    return result
  })
}
