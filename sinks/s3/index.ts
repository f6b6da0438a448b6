import { hostname } from 'node:os'
import type { ObjectRef, Snapshot } from '../../api/types.js'
import type { SinkDescriptor } from '../descriptor.js'
import { diffItems, type HeldItem } from '../diff.js'
import { heldFromItems, parseSnapshotItems, renderSnapshot } from '../document.js'
import { configError, during, sinkGuard } from '../errors.js'
import type { SinkOptions } from '../options.js'
import { resultOf } from '../result.js'
import { SerialQueue } from '../serial.js'
import { NO_FENCE, refuseOlder, type WriteFence } from '../fence.js'
import { emptyResult, SinkError, type DriftMode, type DriftResult, type Sink, type WriteResult } from '../sink.js'
import { s3Endpoints, s3Settings } from './config.js'
import {
  encodePointer,
  expiredSnapshots,
  inventoryPrefix,
  itemsDir,
  parsePointer,
  planFromDiff,
  planFromListing,
  pointerFor,
  pointerKey,
  snapshotKey,
  snapshotsDir,
  type Pointer,
} from './encode.js'
import { classifyMarks, documentObjectDrift, encodeMark, inStep, markKey, marksDir, objectDrift, type Marks } from './marks.js'
import { isRetriable, PointerMoved, S3Service, type PointerCondition } from './service.js'


/** What one inventory's prefix holds, as of the pointer with ETag `etag`. */
interface Held {
  etag: string
  pointer: Pointer | undefined
  /** By item key; undefined until read (document) or listed (perResource). */
  items?: Map<string, HeldItem>
  /** perResource: the object key of every held item. */
  keys?: Map<string, string>
}

export const s3Sink: SinkDescriptor = {
  type: 's3',
  create: createS3Sink,
  endpoints: (spec) => s3Endpoints(spec).map((url) => ({ url, what: 'endpoint' })),
}

/**
 * The s3 sink: per inventory a `latest.json` pointer carrying the checksum, and either a snapshot
 * document per export (keyed by time and checksum, so the prefix lists its history) or one object
 * per item. The pointer is written last and only if it is still what this export read (If-Match,
 * or If-None-Match: * when there is none): a second writer that moved it makes this export start
 * over from what that writer left, so nothing is overwritten unread. The state is cached per
 * inventory and checked with a conditional GET (304) before each export; any failure drops it.
 * perResource trusts that cache only while no writer's mark says objects may have been written
 * behind it (marks.ts); a cold start compares every object with the snapshot before it trusts the pointer.
 * `writer` names this writer in its marks: the host name, which a restarted container keeps.
 */
export function createS3Sink(opts: SinkOptions, clock: () => Date = () => new Date(), writer: string = hostname()): Sink {
  const settings = s3Settings(opts)
  const service = new S3Service(settings)
  const cache = new Map<string, Held>()
  const queue = new SerialQueue()
  const guarded = sinkGuard(settings.label, settings.secrets, isRetriable)

  const prefixOf = (inventory: ObjectRef, cluster: string): string => {
    try {
      return inventoryPrefix(settings.prefixTemplate, { cluster, namespace: inventory.namespace, name: inventory.name })
    } catch (err) {
      throw configError(settings.label, (err as Error).message)
    }
  }

  return {
    id: opts.id,
    async write(snapshot, fence = NO_FENCE) {
      const prefix = prefixOf(snapshot.inventory, snapshot.cluster)
      return queue.run(() => guarded('write', () => write(snapshot, prefix, fence), () => cache.delete(prefix)), prefix)
    },
    async verify(snapshot, mode, fence = NO_FENCE) {
      const prefix = prefixOf(snapshot.inventory, snapshot.cluster)
      return queue.run(() => guarded(`drift check (${mode})`, () => verify(snapshot, prefix, mode, fence), () => cache.delete(prefix)), prefix)
    },
    async remove(inventory, cluster) {
      const prefix = prefixOf(inventory, cluster)
      return queue.run(() => guarded('remove', () => remove(prefix), () => cache.delete(prefix)), prefix)
    },
    healthcheck: () => guarded('healthcheck', () => service.ping()),
    close: async () => {
      await queue.drain()
      service.close()
    },
  }

  /** The pointer as the bucket holds it now; the cached state when its ETag still matches (304). */
  async function current(prefix: string): Promise<Held | undefined> {
    const cached = cache.get(prefix)
    const read = await during('reading the latest pointer', () => service.readPointer(pointerKey(prefix), cached?.etag))
    if (read.state === 'unchanged') return cached
    cache.delete(prefix)
    if (read.state === 'absent') return undefined
    return { etag: read.etag, pointer: parsePointer(read.text) }
  }

  /**
   * `trusted` false (a repair): write even when the pointer names the snapshot already. perResource
   * never trusts the pointer alone: without a cache this sink wrote, or behind a stale mark, the
   * plan comes from listing the objects, so a crashed or dead writer's objects are put back.
   */
  async function write(snapshot: Snapshot, prefix: string, fence: WriteFence, trusted = true): Promise<WriteResult> {
    // Kept across attempts: a retry after losing the pointer race reuses the document it wrote.
    let documentKey: string | undefined
    for (let attempt = 1; attempt <= settings.maxPointerAttempts; attempt++) {
      const held = await current(prefix)
      // The pointer write below is conditional on this very pointer: no later leader can slip in between.
      refuseOlder(fence, held?.pointer?.fencing, `the latest pointer of ${prefix}`)
      const same = inStep(held?.pointer, snapshot, settings.layout)
      let next: Pick<Held, 'items' | 'keys'>
      let result: WriteResult
      let marks: Marks | undefined
      if (settings.layout === 'document') {
        if (same && trusted) {
          cache.set(prefix, held!)
          return emptyResult()
        }
        const diff = diffItems(held?.items ?? (await documentItems(held)), snapshot.items)
        documentKey ??= snapshotKey(prefix, clock(), snapshot.checksum)
        const key = documentKey
        await during('writing the snapshot document', () => service.putObject(key, renderSnapshot(snapshot)))
        next = { items: diff.next }
        result = resultOf(diff)
      } else {
        marks = await otherWriters(prefix)
        const warm = trusted && marks.stale.length === 0 && held?.items && held.keys ? { items: held.items, keys: held.keys } : undefined
        if (same && warm) {
          cache.set(prefix, held!)
          return emptyResult()
        }
        const plan = warm
          ? planFromDiff(prefix, snapshot, warm, diffItems(warm.items, snapshot.items))
          : planFromListing(prefix, snapshot, await during('listing item objects', () => service.list(`${itemsDir(prefix)}/`)))
        if (same && plan.put.size === 0 && plan.delete.length === 0) {
          cache.set(prefix, { ...held!, ...plan.held })
          await during('deleting writers\' marks', () => service.deleteObjects(marks!.stale))
          return emptyResult()
        }
        await writeObjects(prefix, snapshot, plan.put)
        await during(`deleting removed item objects (${plan.delete.length})`, () => service.deleteObjects(plan.delete))
        next = plan.held
        result = plan.result
      }
      const pointer = pointerFor(snapshot, settings.layout, held?.pointer, documentKey, fence.token)
      const condition: PointerCondition = held ? { ifMatch: held.etag } : { ifNoneMatch: '*' }
      fence.check('writing the latest pointer')
      const etag = await during('writing the latest pointer', () =>
        service.putPointer(pointerKey(prefix), encodePointer(pointer), condition).catch((err: unknown) => {
          if (err instanceof PointerMoved) return undefined
          throw err
        }),
      )
      if (etag === undefined) {
        // Another writer got there first: start over from what it left, never over it unread.
        cache.delete(prefix)
        continue
      }
      cache.set(prefix, { etag, pointer, ...next })
      if (documentKey !== undefined) await expire(prefix, documentKey)
      if (marks) await settle(prefix, marks)
      return result
    }
    throw new SinkError(
      `s3 sink ${opts.id}: the latest pointer of ${prefix} was changed by another writer ${settings.maxPointerAttempts} times in a row`,
      { retriable: true },
    )
  }

  /** perResource: the marks of other writers; a fresh one is a writer still at work, so this export waits. */
  async function otherWriters(prefix: string): Promise<Marks> {
    const listed = await during('listing writers\' marks', () => service.listModified(marksDir(prefix)))
    const marks = classifyMarks(listed, markKey(prefix, writer), clock(), settings.staleWriterMillis)
    const [busy] = marks.fresh
    if (busy !== undefined) {
      cache.delete(prefix)
      throw new SinkError(
        `s3 sink ${opts.id}: another writer has been writing item objects of ${prefix} (its mark ${busy.key} was written at ${busy.at.toISOString()}); ` +
          `waiting until it finishes, or until its mark is ${Math.round(settings.staleWriterMillis / 60_000)} min old, to compare every object`,
        { retriable: true },
      )
    }
    return marks
  }

  /** The mark goes first and is refreshed as objects go out, so a live writer's mark never turns stale. */
  async function writeObjects(prefix: string, snapshot: Snapshot, put: ReadonlyMap<string, string>): Promise<void> {
    const entries = [...put]
    const key = markKey(prefix, writer)
    for (let from = 0; from === 0 || from < entries.length; from += settings.markEvery) {
      await during('marking the item objects as being written', () => service.putObject(key, encodeMark(writer, snapshot, from)))
      const chunk = new Map(entries.slice(from, from + settings.markEvery))
      await during(`writing item objects (${chunk.size} of ${put.size})`, () => service.putObjects(chunk))
    }
  }

  /**
   * After the pointer landed: this writer's mark and the stale ones it compared against go. A
   * writer that started meanwhile may have written behind this export: not done until it is checked.
   */
  async function settle(prefix: string, marks: Marks): Promise<void> {
    await during('deleting writers\' marks', () => service.deleteObjects([markKey(prefix, writer), ...marks.stale]))
    await otherWriters(prefix)
  }

  /** Reads the store, never the cache; a repair writes the snapshot back whatever the pointer says. */
  async function verify(snapshot: Snapshot, prefix: string, mode: DriftMode, fence: WriteFence): Promise<DriftResult> {
    cache.delete(prefix)
    const read = await during('reading the latest pointer', () => service.readPointer(pointerKey(prefix), undefined))
    const pointer = read.state === 'found' ? parsePointer(read.text) : undefined
    let drift: DriftResult
    if (settings.layout === 'document') {
      const key = pointer?.layout === 'document' ? pointer.snapshot : undefined
      const text = key === undefined ? undefined : await during('reading the current snapshot document', () => service.getText(key))
      drift = documentObjectDrift(prefix, snapshot, renderSnapshot(snapshot), pointer, text)
    } else {
      const listed = await during('listing item objects', () => service.list(`${itemsDir(prefix)}/`))
      drift = objectDrift(prefix, snapshot, listed, pointer)
    }
    if (mode === 'report' || drift.differences === 0) return drift
    await write(snapshot, prefix, fence, false)
    return { ...drift, repaired: true }
  }

  /** document layout, cold: the items of the document the pointer names, for the counts. */
  async function documentItems(held: Held | undefined): Promise<Map<string, HeldItem>> {
    const key = held?.pointer?.layout === 'document' ? held.pointer.snapshot : undefined
    if (key === undefined) return new Map()
    const text = await during('reading the current snapshot document', () => service.getText(key))
    return heldFromItems((text === undefined ? undefined : parseSnapshotItems(text)) ?? [])
  }

  /** Retention: keepSnapshots documents stay, the one the pointer names always among them. */
  async function expire(prefix: string, current: string): Promise<void> {
    if (settings.keepSnapshots <= 0) return
    const listed = await during('listing snapshot documents', () => service.list(snapshotsDir(prefix)))
    const expired = expiredSnapshots([...listed.keys()], settings.keepSnapshots, current)
    await during(`deleting expired snapshot documents (${expired.length})`, () => service.deleteObjects(expired))
  }

  /** deletionPolicy Delete: the pointer first, so no reader follows it to a deleted object; then the rest. */
  async function remove(prefix: string): Promise<void> {
    cache.delete(prefix)
    await during('deleting the latest pointer', () => service.deleteObjects([pointerKey(prefix)]))
    const listed = await during('listing the inventory\'s objects', () => service.list(`${prefix}/`))
    await during(`deleting objects (${listed.size})`, () => service.deleteObjects([...listed.keys()]))
  }
}
