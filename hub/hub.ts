import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages, type JetStreamManager, type JsMsg } from '@nats-io/jetstream'
import { connect, nanos, type NatsConnection } from '@nats-io/transport-node'
import { DEFAULT_BACKOFF, retryUntilDone, type BackoffPolicy, type Log } from '../exporter/index.js'
import { natsSettings } from '../sinks/nats/config.js'
import { subjectFor } from '../sinks/nats/encode.js'
import { readStreamRange } from '../sinks/nats/read.js'
import type { Snapshot } from '../api/types.js'
import { applyMessage, type FleetState, type HeldInventory, type StreamMessage, type Verdict } from './fleet.js'
import { readSecretDir, type HubConfig } from './config.js'
import type { HubMetrics } from './metrics.js'
import { HubStore } from './store.js'
import { HubWriters } from './writers.js'

// Hub mode: one durable pull consumer over the spokes' stream. Messages are applied in stream
// order to the picture of each spoke inventory (fleet.ts); a marker exports that inventory to
// every hub sink, saves it, and only then acknowledges its messages, so a crash anywhere
// redelivers what the sinks did not confirm, and the sinks skip what they already hold. The
// writes go through the exporter's sink drivers (writers.ts).

export interface HubOptions {
  config: HubConfig
  metrics: HubMetrics
  log: Log
  backoff?: BackoffPolicy
}

export class Hub {
  private nc: NatsConnection | undefined
  private jsm: JetStreamManager | undefined
  private messages: ConsumerMessages | undefined
  private readonly writers: HubWriters
  private state: FleetState = {}
  private readonly store: HubStore
  private readonly allowed: ReadonlySet<string>
  /** Messages applied but not yet acknowledged, per spoke inventory: they wait for its marker. */
  private readonly unacked = new Map<string, JsMsg[]>()
  private readonly abort = new AbortController()
  private loop: Promise<void> | undefined

  constructor(private readonly options: HubOptions) {
    this.store = new HubStore(options.config.dataDir)
    this.allowed = new Set(options.config.clusters)
    this.writers = new HubWriters(options.config, options.metrics, options.log, options.backoff)
  }

  /** Connect, find or create the durable consumer, load what the hub holds, and start consuming. */
  async start(): Promise<void> {
    const { config, log } = this.options
    const settings = natsSettings({
      id: 'hub/nats',
      spec: { type: 'nats', nats: { url: config.nats.url, stream: config.nats.stream, subject: config.nats.subject } },
      credentials: readSecretDir(config.nats.secretDir),
      dataDir: config.dataDir,
    })
    await this.writers.open()
    this.nc = await connect({ servers: settings.servers, ...settings.auth, maxReconnectAttempts: -1, name: 'kollect-hub' })
    const jsm = await jetstreamManager(this.nc)
    this.jsm = jsm
    const { stream, subject, durable, ackWaitSeconds } = config.nats
    // Longer than one export's retries should take; after a crash, how soon unacknowledged messages come back.
    const ackWait = nanos(ackWaitSeconds * 1000)
    // The spokes' sinks create the stream; a hub started first waits for it.
    await retryUntilDone(() => jsm.streams.info(stream), {
      policy: { minMs: 500, maxMs: 5_000, factor: 2 }, signal: this.abort.signal,
      onFailedAttempt: (err) => log('info', 'waiting for the spokes\' stream', { stream, error: err.message }),
    })
    const existing = await jsm.consumers.info(stream, durable).catch(() => null)
    if (existing && existing.created === await this.store.consumer()) {
      this.state = await this.store.load()
      if (existing.config.ack_wait !== ackWait) await jsm.consumers.update(stream, durable, { ack_wait: ackWait })
    } else {
      // Held inventories that do not follow this consumer would skip or repeat messages: start over from the stream's first message.
      if (existing) await jsm.consumers.delete(stream, durable)
      const created = await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        filter_subject: `${subject}.>`,
        max_ack_pending: -1,
        ack_wait: ackWait,
      })
      await this.store.reset(created.created)
      this.state = {}
      log('info', 'hub consumer created; replaying the stream', { stream, durable, previous: existing ? 'replaced' : 'none' })
    }
    for (const held of Object.values(this.state)) this.noteMarker(held.cluster, held.lastMarkerAt)
    const consumer = await jetstream(this.nc).consumers.get(stream, durable)
    this.messages = await consumer.consume({ max_messages: 1024 })
    const messages = this.messages
    this.loop = (async () => {
      for await (const m of messages) {
        if (this.abort.signal.aborted) break
        await this.handle(m)
      }
    })()
  }

  /** Settles when consuming ends: rejects if a message could not be handled (the process should restart). */
  get finished(): Promise<void> {
    return this.loop ?? Promise.resolve()
  }

  /** Stop consuming; what is not acknowledged comes back to the next start. */
  async stop(): Promise<void> {
    this.abort.abort()
    // First: a message waiting for its export would otherwise hold the loop.
    this.writers.stop()
    await this.messages?.close().catch(() => undefined)
    await this.loop?.catch(() => undefined)
    await this.nc?.drain().catch(() => undefined)
    await this.writers.close()
  }

  private async handle(m: JsMsg): Promise<void> {
    const body = parseBody(m.string())
    const msg: StreamMessage = { subject: m.subject, seq: m.seq, time: m.time.toISOString(), body }
    try {
      let verdict = applyMessage(this.state, this.options.config.nats.subject, this.allowed, msg)
      if (verdict.kind === 'incomplete') verdict = await this.reread(verdict.key, msg)
      await this.act(verdict, m)
    } catch (err) {
      // Stopped mid-export: nothing of it is acknowledged.
      if (!this.abort.signal.aborted) throw err
    }
  }

  private async act(v: Verdict, m: JsMsg): Promise<void> {
    const { log, metrics } = this.options
    switch (v.kind) {
      case 'refused':
        metrics.refused.inc()
        log('warn', 'refused a spoke message', { subject: m.subject, seq: m.seq, reason: v.reason })
        // Handled, by refusing it: acknowledged, so it is never redelivered (and counts as done).
        m.ack()
        return
      case 'seen':
        // A redelivery whose effect a newer message (unacknowledged, or saved) already holds.
        // While its inventory is not saved yet, it waits with the rest: acknowledged now, a crash
        // before the marker's save would lose it.
        if (this.unacked.has(v.key)) this.pending(v.key).push(m)
        else m.ack()
        return
      case 'event':
        this.pending(v.key).push(m)
        return
      case 'incomplete': {
        const held = this.state[v.key]
        metrics.incomplete.inc({ cluster: held?.cluster ?? '' })
        log('warn', 'a spoke marker does not match the items the hub holds, even read again from the stream; not exported', {
          inventory: v.key, expected: v.expected, held: v.got,
        })
        // Acknowledged but not saved: the saved picture stays the last good marker, which the next re-read starts from.
        this.ackPending(v.key)
        await m.ackAck()
        return
      }
      case 'snapshot':
        // Catching up (a replay, or a hub that was stopped): only an inventory's newest marker is exported, so the sinks never go back in time.
        if (await this.newerMarker(m)) break
        await this.writers.write(v.key, { ...v.snapshot, spoke: spokeOf(v.lastMarkerAt, this.state[v.key]?.rereads) })
        this.noteMarker(v.snapshot.cluster, v.lastMarkerAt)
        break
      case 'tombstone':
        await this.writers.remove(v.key, v.inventory, v.cluster)
        this.options.metrics.lastMarker.delete(v.cluster)
        break
    }
    await this.store.save(v.key, this.state[v.key])
    this.ackPending(v.key)
    await m.ackAck()
  }

  private ackPending(key: string): void {
    for (const earlier of this.unacked.get(key) ?? []) earlier.ack()
    this.unacked.delete(key)
  }

  /**
   * The spoke's stream is the record, not the order the hub got it in (redeliveries after a
   * crash come after newer messages): a marker the held items do not give is checked again on
   * that inventory's messages read back in stream order, from the last marker whose checksum
   * held (as saved) up to this one.
   */
  private async reread(key: string, msg: StreamMessage): Promise<Verdict> {
    const { config, log, metrics } = this.options
    const held = this.state[key] as HeldInventory
    const base = await this.store.loadOne(key)
    const picture: FleetState = base ? { [key]: base } : {}
    const after = base?.markerSeq ?? 0
    const reader = { js: jetstream(this.nc as NatsConnection), jsm: this.jsm as JetStreamManager, stream: config.nats.stream, window: 1024, timeoutMs: 10_000 }
    const read = await retryUntilDone(() => readStreamRange(reader, subjectFor(config.nats.subject, held, '*'), after, msg.seq - 1), {
      policy: this.options.backoff ?? DEFAULT_BACKOFF, signal: this.abort.signal,
      onFailedAttempt: (err) => log('warn', 'reading a spoke inventory back from the stream failed; retrying', { inventory: key, error: err.message }),
    })
    const text = new TextDecoder()
    for (const r of read) {
      applyMessage(picture, config.nats.subject, this.allowed, { subject: r.subject, seq: r.seq, time: r.time, body: parseBody(text.decode(r.data)) })
    }
    const verdict = applyMessage(picture, config.nats.subject, this.allowed, msg)
    // Counted in the saved picture, so the hub's document says so after a restart too.
    this.state[key] = { ...(picture[key] as HeldInventory), rereads: Math.max(held.rereads ?? 0, base?.rereads ?? 0) + 1 }
    metrics.rereads.inc({ cluster: held.cluster })
    log('info', 'a spoke marker did not match the items the hub held; re-read the inventory from its last good marker', {
      inventory: key, from: after + 1, to: msg.seq, messages: read.length, result: verdict.kind,
    })
    return verdict
  }

  private async newerMarker(m: JsMsg): Promise<boolean> {
    const last = await this.jsm?.streams.getMessage(this.options.config.nats.stream, { last_by_subj: m.subject }).catch(() => null)
    return last !== null && last !== undefined && last.seq > m.seq
  }

  private pending(key: string): JsMsg[] {
    let list = this.unacked.get(key)
    if (!list) this.unacked.set(key, (list = []))
    return list
  }

  private noteMarker(cluster: string, at: string | null): void {
    if (at === null) return
    const ms = Date.parse(at)
    if (ms > (this.options.metrics.lastMarker.get(cluster) ?? 0)) this.options.metrics.lastMarker.set(cluster, ms)
  }
}

function spokeOf(lastMarkerAt: string, rereads: number | undefined): NonNullable<Snapshot['spoke']> {
  return rereads ? { lastMarkerAt, rereads } : { lastMarkerAt }
}

function parseBody(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}
