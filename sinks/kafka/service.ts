import {
  Admin,
  Consumer,
  FetchIsolationLevels,
  Producer,
  stringSerializers,
  type ClusterMetadata,
  type ConnectionOptions,
} from '@platformatic/kafka'
import { configError } from '../errors.js'
import { alreadyExists, isRetriable } from './errors.js'
import type { KafkaSettings } from './config.js'
import { guardConnections } from './connections.js'
import { committedRecords } from './read.js'
import { chunks, type OutgoingRecord, type ReadRecord, type StateRecord, type Topics } from './encode.js'

// Control batches (transaction commit/abort markers) carry this attribute bit.
const FETCH_MAX_BYTES = 16 * 1024 * 1024
const SEND_MAX_BYTES = 256 * 1024

interface Clients {
  producer: Producer<string, string, string, string>
  admin: Admin
  consumer: Consumer
  topics: Topics
}

/** Kafka I/O: the clients, the topics, one transaction per export, reading the state topic back. No encoding here. */
export class KafkaService {
  private clients: Promise<Clients> | undefined
  private probe: Admin | undefined
  private closed = false

  constructor(
    private readonly settings: KafkaSettings,
    private readonly checkEndpoint: (url: string) => Promise<string | null> = async () => null,
  ) {}

  private connection(): ConnectionOptions & { bootstrapBrokers: string[]; clientId: string; retries: number; timeout: number } {
    const s = this.settings
    return {
      clientId: `kollect ${s.label.id}`,
      bootstrapBrokers: s.brokers.map((b) => `${b.host.includes(':') ? `[${b.host}]` : b.host}:${b.port}`),
      connectTimeout: s.connectTimeoutMillis,
      requestTimeout: s.requestTimeoutMillis,
      timeout: s.requestTimeoutMillis,
      retries: s.retries,
      ...(s.sasl ? { sasl: { mechanism: s.sasl.mechanism, username: s.sasl.username, password: s.sasl.password } } : {}),
      ...(s.tls ? { tls: { ...s.tls } } : {}),
    }
  }

  /** Connect on first use, and again after reset(). */
  private connected(): Promise<Clients> {
    if (this.closed) return Promise.reject(new Error('sink is closed'))
    if (!this.clients) {
      const attempt = this.open()
      this.clients = attempt
      attempt.catch(() => {
        if (this.clients === attempt) this.clients = undefined
      })
    }
    return this.clients
  }

  /** Every client the sink makes: its connections pass the SSRF guard, and their errors have a listener. */
  private guarded<C extends Admin | Consumer | Producer<string, string, string, string>>(client: C): C {
    guardConnections(client.connections, this.settings.brokers, this.checkEndpoint)
    return client
  }

  private async open(): Promise<Clients> {
    const base = this.connection()
    const admin = this.guarded(new Admin(base))
    const consumer = this.guarded(new Consumer({ ...base, groupId: `kollect-state-reader` }))
    // Transactional, hence idempotent: a retried produce is written once, and a new producer
    // with the same transactional id aborts whatever its predecessor left open.
    const producer = this.guarded(new Producer<string, string, string, string>({
      ...base,
      // This client sends its operation timeout as the transaction timeout of InitProducerId.
      timeout: this.settings.transactionTimeoutMillis,
      idempotent: true,
      acks: -1,
      transactionalId: this.settings.transactionalId,
      autocreateTopics: false,
      serializers: stringSerializers,
    }))
    try {
      const topics = await this.ensureTopics(admin)
      // Register the transactional id before anything reads the state topic: this aborts what a
      // predecessor left open, or waits for a commit it had started, so the read sees its outcome.
      // -1/-1 asks for the current producer id of the transactional id, as Kafka's own clients do;
      // the client's default (0/0) is refused as fenced once the id has a history.
      const init = await producer.beginTransaction({ producerId: -1n, producerEpoch: -1 })
      await init.cancel()
      return { producer, admin, consumer, topics }
    } catch (err) {
      await closeAll([producer, admin, consumer])
      throw err
    }
  }

  private async ensureTopics(admin: Admin): Promise<Topics> {
    const s = this.settings
    const existing = new Set(await admin.listTopics())
    const create = async (topic: string, partitions: number | undefined, cleanupPolicy: string): Promise<void> => {
      if (existing.has(topic)) return
      try {
        await admin.createTopics({
          topics: [topic],
          ...(partitions !== undefined ? { partitions } : {}),
          ...(s.replicationFactor !== undefined ? { replicas: s.replicationFactor } : {}),
          configs: [{ name: 'cleanup.policy', value: cleanupPolicy }],
        })
      } catch (err) {
        // Another replica created it first; while its creation is in flight the listing may not show it yet.
        if (alreadyExists(err)) return
        if (!(await admin.listTopics()).includes(topic)) throw err
      }
    }
    await create(s.topic, s.partitions, s.cleanupPolicy)
    // The state topic is read whole, in order: one partition, compacted to the latest record per key.
    await create(s.stateTopic, 1, 'compact')
    const metadata = await withLeaders(admin, [s.topic, s.stateTopic])
    const partitions = metadata.topics.get(s.topic)?.partitionsCount ?? 0
    if (partitions < 1) throw new Error(`topic ${s.topic} has no partitions yet`)
    const state = metadata.topics.get(s.stateTopic)?.partitionsCount ?? 0
    if (state !== 1) throw configError(s.label, `state topic ${s.stateTopic} must have exactly one partition (it has ${state})`)
    return { topic: s.topic, stateTopic: s.stateTopic, partitions }
  }

  async topics(): Promise<Topics> {
    return (await this.connected()).topics
  }

  /**
   * Produce the records in one transaction: all of them become visible to read_committed consumers,
   * or none. `beforeCommit` may throw to abort instead of committing.
   */
  async transact(records: readonly OutgoingRecord[], beforeCommit: () => void = () => undefined): Promise<void> {
    const { producer } = await this.connected()
    const tx = await producer.beginTransaction()
    try {
      // Several sends in one transaction: one send becomes one record batch per partition, and a
      // batch must stay below the broker's message.max.bytes (1 MiB by default).
      for (const chunk of chunks(records, SEND_MAX_BYTES)) {
        await tx.send({
          messages: chunk.map((r) => ({
            topic: r.topic,
            partition: r.partition,
            key: r.key,
            ...(r.value === null ? {} : { value: r.value }),
            headers: r.headers,
          })),
        })
      }
      beforeCommit()
      await tx.commit()
    } catch (err) {
      await tx.abort().catch(() => undefined)
      throw err
    }
  }

  /** Every committed record of the state topic, in offset order. */
  async readState(): Promise<StateRecord[]> {
    const { topics } = await this.connected()
    return this.readCommitted(topics.stateTopic, 0)
  }

  /**
   * Every committed record of one partition, in offset order, or an error: never a silently
   * partial list. Records of aborted transactions (an export interrupted by a broker restart)
   * are left out, as a read_committed consumer leaves them out.
   */
  async readCommitted(topic: string, partition: number): Promise<ReadRecord[]> {
    const { consumer, admin } = await this.connected()
    const offsets = await consumer.listOffsets({ topics: [topic], isolationLevel: FetchIsolationLevels.READ_COMMITTED })
    const end = offsets.get(topic)?.[partition] ?? 0n
    const out: ReadRecord[] = []
    if (end === 0n) return out
    const metadata: ClusterMetadata = await admin.metadata({ topics: [topic], forceUpdate: true })
    const info = metadata.topics.get(topic)
    const leader = info?.partitions[partition]?.leader
    if (!info || leader === undefined || leader < 0) throw new Error(`topic ${topic} partition ${partition} has no leader`)
    let offset = 0n
    let maxBytes = FETCH_MAX_BYTES
    while (offset < end) {
      const response = await consumer.fetch({
        node: leader,
        topics: [{
          topicId: info.id,
          partitions: [{ partition, currentLeaderEpoch: -1, fetchOffset: offset, lastFetchedEpoch: -1, partitionMaxBytes: maxBytes }],
        }],
        isolationLevel: FetchIsolationLevels.READ_COMMITTED,
        maxBytes,
        minBytes: 1,
        maxWaitTime: 500,
      })
      const fetched = response.responses[0]?.partitions[0]
      if (!fetched || fetched.errorCode !== 0) throw new Error(`reading topic ${topic}: fetch error ${fetched?.errorCode ?? 'no partition'}`)
      const { records, next } = committedRecords(fetched.records ?? [], fetched.abortedTransactions ?? [], offset, end)
      out.push(...records)
      if (next === offset) {
        // Nothing usable: an aborted transaction larger than one response. Ask for more.
        if (maxBytes >= 256 * 1024 * 1024) throw new Error(`reading topic ${topic}: no progress at offset ${offset}`)
        maxBytes *= 2
      }
      offset = next
    }
    return out
  }

  /**
   * Wait until no transaction is open on the partition (its last stable offset reached the log
   * end). A commit returns before the broker has written its markers to every partition, so a
   * reader that must see a just-committed export waits for this first.
   */
  async settled(topic: string, partition: number, timeoutMs = 30_000): Promise<void> {
    const { consumer } = await this.connected()
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const [stable, end] = await Promise.all([FetchIsolationLevels.READ_COMMITTED, FetchIsolationLevels.READ_UNCOMMITTED].map(async (isolationLevel) =>
        (await consumer.listOffsets({ topics: [topic], isolationLevel })).get(topic)?.[partition] ?? 0n))
      if (stable === end) return
      if (Date.now() > deadline) throw new Error(`topic ${topic} partition ${partition}: a transaction is still open after ${timeoutMs} ms`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  /**
   * Reachability and credentials only: a metadata request on a client of its own. Not the
   * transactional producer: registering the transactional id would fence an exporting instance.
   */
  async ping(): Promise<void> {
    if (this.closed) throw new Error('sink is closed')
    const probe = (this.probe ??= this.guarded(new Admin(this.connection())))
    try {
      // One attempt first: refused credentials are permanent, and the client's retries (a second
      // apart) would outlast the exporter's 4 s check and read as a timeout. Only what may pass
      // on its own (the network, a broker starting) is tried again.
      await probe.metadata({ topics: [], forceUpdate: true, retries: 0 }).catch((err: unknown) => {
        if (!isRetriable(err)) throw err
        return probe.metadata({ topics: [], forceUpdate: true })
      })
    } catch (err) {
      this.probe = undefined
      await closeAll([probe])
      throw err
    }
  }

  /** Drop the clients; the next use connects again (a new producer fences and aborts an open transaction). */
  async reset(): Promise<void> {
    const pending = this.clients
    this.clients = undefined
    const c = await pending?.catch(() => undefined)
    if (c) await closeAll([c.producer, c.admin, c.consumer])
  }

  async close(): Promise<void> {
    this.closed = true
    const probe = this.probe
    this.probe = undefined
    await Promise.all([this.reset(), probe && closeAll([probe])])
  }
}

/** Metadata once every partition of the topics has a leader: a topic just created takes a moment. */
async function withLeaders(admin: Admin, topics: string[]): Promise<ClusterMetadata> {
  for (let attempt = 0; ; attempt++) {
    const metadata = await admin.metadata({ topics, forceUpdate: true })
    const ready = topics.every((t) => {
      const info = metadata.topics.get(t)
      return info !== undefined && info.partitions.length > 0 && info.partitions.every((p) => p.leader >= 0)
    })
    if (ready || attempt >= 20) return metadata
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

async function closeAll(clients: readonly { close(): Promise<void> }[]): Promise<void> {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)))
}
