import type { ObjectRef, Snapshot } from '../../api/types.js'
import type { SinkDescriptor } from '../descriptor.js'
import { diffItems, publishedDrift } from '../diff.js'
import { during, sinkGuard } from '../errors.js'
import type { InventoryAddress } from '../events.js'
import type { SinkOptions } from '../options.js'
import { resultOf } from '../result.js'
import { SerialQueue } from '../serial.js'
import { NO_FENCE, type WriteFence } from '../fence.js'
import { emptyResult, type DriftMode, type DriftResult, type Sink, type WriteResult } from '../sink.js'
import { kafkaEndpoints, kafkaSettings } from './config.js'
import { decodeStates, encodeExport, encodeRemoval, inventoryKey, inventoryToken, type HeldState } from './encode.js'
import { explained, isRetriable } from './errors.js'
import { KafkaService } from './service.js'


export const kafkaSink: SinkDescriptor = { type: 'kafka', create: createKafkaSink, endpoints: kafkaEndpoints }

/**
 * The Kafka sink: one event per added, changed or removed item, keyed by the item's identity,
 * then a snapshot marker. What was last published lives in a compacted state topic, written in
 * the same transaction as the events: an export is committed whole or not at all, so a restarted
 * exporter reads the state topic back and publishes exactly what consumers have not seen. The
 * state is cached and dropped, with the clients, on any failure.
 */
export function createKafkaSink(opts: SinkOptions): Sink {
  const settings = kafkaSettings(opts)
  const service = new KafkaService(settings, opts.checkEndpoint)
  let cache: Map<string, HeldState> | undefined
  // One transactional producer runs one transaction at a time: every export of the sink queues.
  const queue = new SerialQueue()
  const guarded = sinkGuard(settings.label, settings.secrets, isRetriable)
  const dropState = (): void => {
    cache = undefined
    void service.reset()
  }

  async function held(token: string): Promise<HeldState> {
    cache ??= decodeStates(await during('reading the published state', () => service.readState()))
    return cache.get(token) ?? { items: new Map() }
  }

  return {
    id: opts.id,
    write: (snapshot, fence = NO_FENCE) => queue.run(() => guarded('write', () => explained(() => write(snapshot, fence)), dropState)),
    verify: (snapshot, mode, fence = NO_FENCE) =>
      queue.run(() => guarded(`drift check (${mode})`, () => explained(() => verify(snapshot, mode, fence)), dropState)),
    remove: (inventory: ObjectRef, cluster: string) => queue.run(() => guarded('remove', () => explained(() => remove({ cluster, inventory })), dropState)),
    healthcheck: () => guarded('healthcheck', () => explained(() => service.ping())),
    close: () => guarded('close', () => service.close()),
  }

  async function write(snapshot: Snapshot, fence: WriteFence): Promise<WriteResult> {
    const token = inventoryToken(settings.topic, snapshot)
    const state = await held(token)
    if (state.snapshot?.checksum === snapshot.checksum) return emptyResult()
    const topics = await during('preparing the topics', () => service.topics())
    const diff = diffItems(state.items, snapshot.items, true)
    const { records, events, next } = encodeExport(topics, snapshot, state, diff)
    // Kafka fences a later leader's stale predecessor itself (the transactional id's producer epoch);
    // the lease is asked again for the window before a new leader's producer has registered.
    await during(`publishing events (${events}) and the snapshot marker`, () => service.transact(records, () => fence.check('committing the transaction')))
    cache?.set(token, next)
    return resultOf(diff)
  }

  /**
   * What consumers were last told against the export the exporter confirmed: another instance of
   * this sink (an old leader in a brief split brain) may have committed after it, and the
   * exporter's checksum shortcut would not write the same snapshot again. The read starts from a
   * fresh registration of the transactional id, which fences such an instance.
   */
  async function verify(snapshot: Snapshot, mode: DriftMode, fence: WriteFence): Promise<DriftResult> {
    dropState()
    const state = await held(inventoryToken(settings.topic, snapshot))
    const result = publishedDrift(state.items, state.snapshot?.checksum, snapshot, `${settings.topic}:${inventoryKey(snapshot)}`)
    if (mode === 'report' || result.differences === 0) return result
    await write(snapshot, fence)
    return { ...result, repaired: true }
  }

  async function remove(at: InventoryAddress): Promise<void> {
    const token = inventoryToken(settings.topic, at)
    const state = await held(token)
    if (state.snapshot === undefined && state.items.size === 0) return
    const topics = await during('preparing the topics', () => service.topics())
    const { records, events, next } = encodeRemoval(topics, at, state)
    await during(`publishing tombstones (${events})`, () => service.transact(records))
    cache?.set(token, next)
  }
}
