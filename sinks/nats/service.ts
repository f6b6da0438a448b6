import { jetstream, jetstreamManager, StorageType, type JetStreamClient, type JetStreamManager, type StreamInfo } from '@nats-io/jetstream'
import { Kvm, type KV } from '@nats-io/kv'
import { connect, headers, millis, nanos, type NatsConnection } from '@nats-io/transport-node'
import { forEachBounded } from '../concurrency.js'
import { configError, errorChain, isTransientNetworkError } from '../errors.js'
import type { ItemEvent, SnapshotMarker } from '../events.js'
import { SinkError } from '../sink.js'
import { capturesEvents, STATE_BUCKET, type NatsSettings } from './config.js'
import type { OutgoingMessage } from './encode.js'
import { readStreamRange, StateReadInterrupted } from './read.js'
import type { PublishedMessage, StateEntry } from './state.js'

// Errors after which the same request can succeed: the connection, a timeout, JetStream not
// answering (no responders while a server restarts), a concurrent writer.
const RETRIABLE_NAMES = new Set([
  'ConnectionError', 'ClosedConnectionError', 'DrainingConnectionError', 'TimeoutError', 'RequestError',
  'NoResponders', 'NoRespondersError', 'JetStreamNotEnabled', 'ProtocolError', 'StateReadInterrupted',
])
// JetStream API codes that are about this moment, not about the configuration.
const RETRIABLE_API_CODES = new Set([10008 /* temporarily unavailable */, 10071, 10164 /* wrong last sequence */])

export function isRetriable(err: unknown): boolean {
  if (isTransientNetworkError(err)) return true
  return errorChain(err).some((e) => {
    if (!(e instanceof Error)) return false
    if (e.name === 'JetStreamApiError' || e.name === 'StreamNotFoundError' || e.name === 'ConsumerNotFoundError') {
      const { code, status } = e as Error & { code?: number; status?: number }
      return (code !== undefined && RETRIABLE_API_CODES.has(code)) || status === 503 || status === 408
    }
    if (e.name === 'JetStreamError') return /invalid ack|timeout/i.test(e.message)
    return RETRIABLE_NAMES.has(e.name)
  })
}

interface Connected {
  nc: NatsConnection
  js: JetStreamClient
  jsm: JetStreamManager
  kv: KV
}

/** NATS I/O: the connection, the stream, the state bucket. No diffing or encoding here. */
export class NatsService {
  private conn: Promise<Connected> | undefined
  private closed = false
  private readonly kvStream = `KV_${STATE_BUCKET}`

  constructor(private readonly settings: NatsSettings) {}

  /** Connect on first use, and again after the client gave up reconnecting. */
  private connected(): Promise<Connected> {
    if (this.closed) return Promise.reject(new Error('sink is closed'))
    if (!this.conn) {
      const attempt = this.open()
      this.conn = attempt
      attempt.then(
        ({ nc }) => {
          // closed() resolves (with the error, if any) and never rejects: nothing is left unhandled.
          void nc.closed().then(() => {
            if (this.conn === attempt) this.conn = undefined
          })
        },
        () => {
          if (this.conn === attempt) this.conn = undefined
        },
      )
    }
    return this.conn
  }

  private async open(): Promise<Connected> {
    const s = this.settings
    const nc = await connect({
      servers: s.servers,
      name: `kollect ${s.label.id}`,
      timeout: s.connectTimeoutMillis,
      reconnect: true,
      maxReconnectAttempts: s.maxReconnectAttempts,
      reconnectTimeWait: s.reconnectTimeWaitMillis,
      // A server's INFO may name other servers (connect_urls) that the client would reconnect to:
      // addresses nobody configured and the SSRF guard never saw. Only the configured ones are used.
      ignoreClusterUpdates: true,
      ...s.auth,
    })
    try {
      const js = jetstream(nc, { timeout: s.requestTimeoutMillis })
      const jsm = await jetstreamManager(nc, { timeout: s.requestTimeoutMillis })
      await this.ensureStream(jsm)
      const kv = await new Kvm(js).create(STATE_BUCKET, { history: 1, storage: StorageType.File })
      return { nc, js, jsm, kv }
    } catch (err) {
      await nc.close().catch(() => undefined)
      throw err
    }
  }

  private async ensureStream(jsm: JetStreamManager): Promise<void> {
    const { stream, subject } = this.settings
    let info: StreamInfo
    try {
      info = await jsm.streams.info(stream)
    } catch (err) {
      if (!(err instanceof Error) || err.name !== 'StreamNotFoundError') throw err
      try {
        info = await jsm.streams.add({
          name: stream,
          subjects: [`${subject}.>`],
          storage: StorageType.File,
          duplicate_window: nanos(this.settings.duplicateWindowMillis),
          ...this.limits(),
        })
      } catch (addErr) {
        // Another replica created it first.
        info = await jsm.streams.info(stream).catch(() => Promise.reject(addErr))
      }
    }
    // An existing stream may be the operator's, or an older Kollect's without limits: its limits
    // change only when the spec asks, never from a default.
    const limits = this.limits()
    if (this.settings.retention.explicit && (info.config.max_age !== limits.max_age || info.config.max_msgs !== limits.max_msgs)) {
      const window = info.config.duplicate_window ?? 0
      info = await jsm.streams.update(stream, {
        ...limits,
        ...(limits.max_age > 0 && window > limits.max_age ? { duplicate_window: limits.max_age } : {}),
      })
    }
    if (!(info.config.subjects ?? []).some((pattern) => capturesEvents(pattern, subject))) {
      throw configError(this.settings.label, `stream ${stream} does not capture subjects ${subject}.>`)
    }
    // A retry re-sends what a timed-out publish may still store: the server must drop the second copy.
    const window = millis(info.config.duplicate_window ?? 0)
    if (window < this.settings.requestTimeoutMillis) {
      throw configError(
        this.settings.label,
        `stream ${stream} drops duplicates for ${window} ms only; the sink needs a duplicate_window of at least ${this.settings.requestTimeoutMillis} ms`,
      )
    }
  }

  /** The stream limits of the spec; only the events stream, never the KV bucket of the published state. */
  private limits(): { max_age: number; max_msgs: number } {
    const { maxAgeMillis, maxMessages } = this.settings.retention
    return { max_age: nanos(maxAgeMillis), max_msgs: maxMessages > 0 ? maxMessages : -1 }
  }

  /** Publish and await every ack, `window` in flight. */
  async publish(messages: readonly OutgoingMessage[]): Promise<void> {
    const { js } = await this.connected()
    await forEachBounded(messages, this.settings.window, (m) => this.publishOne(js, m))
  }

  /** Publish one message and return its stream sequence (the original's, if the server dropped it as a duplicate). */
  async publishAt(message: OutgoingMessage): Promise<number> {
    const { js } = await this.connected()
    return this.publishOne(js, message)
  }

  private async publishOne(js: JetStreamClient, m: OutgoingMessage): Promise<number> {
    const h = headers()
    h.set('Kollect-Checksum', m.checksum)
    const ack = await js.publish(m.subject, m.payload, { msgID: m.msgID, headers: h, timeout: this.settings.requestTimeoutMillis })
    return ack.seq
  }

  /** Every message on `filter` after stream sequence `after`, in order (see readStreamRange). */
  async readPublished(filter: string, after: number): Promise<PublishedMessage[]> {
    const { js, jsm } = await this.connected()
    const { stream, window, requestTimeoutMillis } = this.settings
    const read = await readStreamRange({ js, jsm, stream, window, timeoutMs: requestTimeoutMillis }, filter, after)
    const text = new TextDecoder()
    return read.map(({ seq, data }) => ({ seq, body: JSON.parse(text.decode(data)) as ItemEvent | SnapshotMarker }))
  }

  /** Every entry under `filter` in stream order, or an error: never a silently partial list. */
  async readState(filter: string, probeKey: string): Promise<StateEntry[]> {
    const { kv } = await this.connected()
    // history() (not watch()) because it ends by itself once the initial values are delivered.
    const iter = await kv.history({ key: filter })
    const entries: StateEntry[] = []
    let pending = -1
    for await (const e of iter) {
      entries.push({ key: e.key, revision: e.revision, operation: e.operation, value: e.value })
      pending = e.delta ?? 0
    }
    if (entries.length > 0 && pending !== 0) throw new StateReadInterrupted()
    if (entries.length === 0 && (await kv.get(probeKey)) !== null) throw new StateReadInterrupted()
    return entries
  }

  /**
   * Put values and delete keys. A delete leaves a small marker per key until the inventory is
   * removed: purging keys one by one instead costs a stream scan each (18 s for 10k on 2.9),
   * while one filtered purge in clearState() removes an inventory's markers at once.
   */
  async updateState(puts: readonly [string, string][], removals: readonly string[]): Promise<void> {
    const { kv } = await this.connected()
    await forEachBounded(puts, this.settings.window, ([key, value]) => kv.put(key, value))
    await forEachBounded(removals, this.settings.window, (key) => kv.delete(key))
  }

  /** The revision of a key's last put or delete (0 if it never existed), in one lookup. */
  async stateRevision(key: string): Promise<number> {
    const { jsm } = await this.connected()
    const last = await jsm.streams.getMessage(this.kvStream, { last_by_subj: this.kvSubject(key) })
    return last?.seq ?? 0
  }

  /**
   * Put one key only if its revision is still `revision` (0: it never existed), and return its new
   * revision: a writer that recorded in between makes this one start over from what it left.
   */
  async putState(key: string, value: string, revision: number): Promise<number> {
    const { kv } = await this.connected()
    try {
      return revision === 0 ? await kv.create(key, value) : await kv.update(key, value, revision)
    } catch (err) {
      if (!errorChain(err).some((e) => e instanceof Error && /wrong last sequence|key exists/i.test(e.message))) throw err
      throw new SinkError(`${this.settings.label.kind} sink ${this.settings.label.id}: ` +
        'another writer recorded this inventory\'s state first; starting over from what it left', { retriable: true })
    }
  }

  /** Purge every key under `filter`, then leave a delete marker on `markerKey`; its revision starts the next history. */
  async clearState(filter: string, markerKey: string): Promise<void> {
    const { kv, jsm } = await this.connected()
    await jsm.streams.purge(this.kvStream, { filter: this.kvSubject(filter) })
    await kv.delete(markerKey)
  }

  async ping(): Promise<void> {
    const { nc, jsm } = await this.connected()
    await nc.flush()
    await jsm.getAccountInfo()
  }

  async close(): Promise<void> {
    this.closed = true
    const pending = this.conn
    this.conn = undefined
    if (!pending) return
    const c = await pending.catch(() => undefined)
    if (c && !c.nc.isClosed()) await c.nc.close()
  }

  private kvSubject(key: string): string {
    return `$KV.${STATE_BUCKET}.${key}`
  }
}
