import type { ObjectRef, Snapshot } from '../../api/types.js'
import type { SinkDescriptor } from '../descriptor.js'
import { diffItems, publishedDrift } from '../diff.js'
import { during, sinkGuard } from '../errors.js'
import { EMPTY_CHECKSUM, type InventoryAddress } from '../events.js'
import type { SinkOptions } from '../options.js'
import { resultOf } from '../result.js'
import { SerialQueue } from '../serial.js'
import { NO_FENCE, refuseOlder, type WriteFence } from '../fence.js'
import { emptyResult, type DriftMode, type DriftResult, type Sink, type WriteResult } from '../sink.js'
import { natsEndpoints, natsSettings } from './config.js'
import { encodeExport, encodeRemoval, subjectFor } from './encode.js'
import { isRetriable, NatsService } from './service.js'
import {
  decodeState,
  encodeHeldSnapshot,
  inventoryStateFilter,
  inventoryToken,
  itemsStateFilter,
  replay,
  replayFrom,
  snapshotStateKey,
  stateUpdates,
  transitionFrom,
  type InventoryState,
} from './state.js'


export const natsSink: SinkDescriptor = { type: 'nats', create: createNatsSink, endpoints: natsEndpoints }

/**
 * The NATS sink: one JetStream event per added, changed or removed item, then a snapshot marker.
 * What was last published lives in a KV bucket, written after the events; an export interrupted
 * in between left events the bucket does not know, so a cold start also reads the stream after
 * the recorded marker and diffs against what consumers have seen. The state is cached per
 * inventory and dropped on any failure, so the next attempt starts again from the bucket and the
 * stream. Throws a permanent SinkError when the configuration is unusable.
 */
export function createNatsSink(opts: SinkOptions): Sink {
  const settings = natsSettings(opts)
  const service = new NatsService(settings)
  const cache = new Map<string, InventoryState>()
  // Exports of one inventory run one after another: each starts from the state the last one left.
  const queue = new SerialQueue()
  // A failure drops the inventory's cached state: the next attempt starts again from the bucket and the stream.
  const guarded = sinkGuard(settings.label, settings.secrets, isRetriable)

  function tokenOf(at: InventoryAddress): string {
    return inventoryToken(settings.stream, settings.subject, at)
  }

  async function held(token: string, at: InventoryAddress): Promise<InventoryState> {
    const cached = cache.get(token)
    // Another writer (an old leader in a brief split brain) may have recorded an export since
    // ours: a diff from our cache would then publish wrong events and record a mix of both.
    if (cached && cached.revision === (await during('reading the state revision', () => service.stateRevision(snapshotStateKey(token))))) return cached
    const entries = await during('reading the published state', () =>
      service.readState(inventoryStateFilter(token), snapshotStateKey(token)),
    )
    const recorded = decodeState(token, entries)
    const from = replayFrom(recorded)
    const unrecorded = from === undefined ? [] : await during('reading unrecorded events', () =>
      service.readPublished(subjectFor(settings.subject, at, '*'), from),
    )
    const state = replay(recorded, unrecorded)
    cache.set(token, state)
    return state
  }

  return {
    id: opts.id,
    write(snapshot, fence = NO_FENCE) {
      const token = tokenOf(snapshot)
      return queue.run(() => guarded('write', () => write(snapshot, token, fence), () => cache.delete(token)), token)
    },
    verify(snapshot, mode, fence = NO_FENCE) {
      const token = tokenOf(snapshot)
      return queue.run(() => guarded(`drift check (${mode})`, () => verify(snapshot, mode, token, fence), () => cache.delete(token)), token)
    },
    remove(inventory: ObjectRef, cluster: string) {
      const token = tokenOf({ cluster, inventory })
      return queue.run(() => guarded('remove', () => remove({ cluster, inventory }, token), () => cache.delete(token)), token)
    },
    healthcheck: () => guarded('healthcheck', () => service.ping()),
    close: () => guarded('close', () => service.close()),
  }

  async function write(snapshot: Snapshot, token: string, fence: WriteFence): Promise<WriteResult> {
    const state = await held(token, snapshot)
    refuseOlder(fence, state.fencing, 'the published state')
    if (!state.unrecorded && state.snapshot?.checksum === snapshot.checksum) return emptyResult()
    const diff = diffItems(state.items, snapshot.items, true)
    const transition = transitionFrom(token, snapshot, state, snapshot.checksum)
    const { events, marker } = encodeExport(settings.subject, transition, diff, snapshot.itemCount, state.sinceMarker)
    fence.check('publishing events')
    await during(`publishing events (${events.length})`, () => service.publish(events))
    // Consumers take an export at its marker: a writer past its lease leaves at most unmarked events.
    fence.check('publishing the snapshot marker')
    // An interrupted export may have published this very marker with nothing after it: keep that one.
    const markerPublished = events.length === 0 && state.snapshot?.checksum === snapshot.checksum && isEmpty(state.sinceMarker)
    const sequence = markerPublished
      ? state.markerSequence
      : await during('publishing the snapshot marker', () => service.publishAt(marker))
    const { puts, removals } = stateUpdates(token, state.unrecorded ? diffItems(state.recorded, snapshot.items) : diff)
    await during('recording the published state', () => service.updateState(puts, removals))
    // Last: until this put lands, a retry starts from the same revision and replays the stream after the same marker.
    const record = { checksum: snapshot.checksum, itemCount: snapshot.itemCount, sequence, ...(fence.token ? { fencing: fence.token } : {}) }
    fence.check('recording the published snapshot')
    const revision = await during('recording the published snapshot',
      () => service.putState(snapshotStateKey(token), encodeHeldSnapshot(record), state.revision))
    cache.set(token, {
      revision,
      snapshot: record,
      items: diff.next,
      recorded: diff.next,
      unrecorded: false,
      markerSequence: sequence,
      positions: new Map(),
      sinceMarker: emptyResult(),
      fencing: record.fencing,
    })
    return resultOf(diff)
  }

  /**
   * What consumers were last told (read from the bucket and the stream, never the cache) against
   * the export the exporter confirmed. They differ when another writer published after it: an
   * old leader in a brief split brain. The exporter's checksum shortcut would never write again
   * until the items change; a repair publishes the way back.
   */
  async function verify(snapshot: Snapshot, mode: DriftMode, token: string, fence: WriteFence): Promise<DriftResult> {
    cache.delete(token)
    const state = await held(token, snapshot)
    const result = publishedDrift(state.items, state.snapshot?.checksum, snapshot, subjectFor(settings.subject, snapshot, 'snapshot'))
    if (mode === 'report' || result.differences === 0) return result
    await write(snapshot, token, fence)
    return { ...result, repaired: true }
  }

  async function remove(at: InventoryAddress, token: string): Promise<void> {
    const state = await held(token, at)
    cache.delete(token)
    if (state.snapshot === undefined && state.items.size === 0) {
      // Consumers hold nothing of it (a tombstone, or events that cancel out); only the bucket may.
      if (state.unrecorded) await during('clearing the published state', () => service.clearState(itemsStateFilter(token), snapshotStateKey(token)))
      return
    }
    const transition = transitionFrom(token, at, state, EMPTY_CHECKSUM)
    const { events, marker } = encodeRemoval(settings.subject, transition, state)
    await during(`publishing removed events (${events.length})`, () => service.publish(events))
    await during('publishing the tombstone', () => service.publish([marker]))
    await during('clearing the published state', () => service.clearState(itemsStateFilter(token), snapshotStateKey(token)))
  }
}

function isEmpty(counts: WriteResult): boolean {
  return counts.added === 0 && counts.changed === 0 && counts.removed === 0
}
