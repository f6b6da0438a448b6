import { BROKER_RULE, parseBroker, type KafkaBroker } from '../../api/kafka-brokers.js'
import type { KollectSinkSpec } from '../../api/types.js'
import type { Endpoint } from '../descriptor.js'
import { configError, secretsFromCredentials, type Secrets, type SinkLabel } from '../errors.js'
import type { SinkOptions } from '../options.js'

const DEFAULT_TOPIC = 'kollect'
/** Suffix of the default state topic: `<topic>.kollect-state`. */
const STATE_TOPIC_SUFFIX = '.kollect-state'

type CleanupPolicy = 'compact' | 'delete' | 'compact,delete'
type SaslMechanism = 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512'

const SASL_MECHANISMS = new Set<string>(['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'])
const CLEANUP_POLICIES = new Set<string>(['compact', 'delete', 'compact,delete'])
// Kafka's own rule for topic names.
const TOPIC_NAME = /^[A-Za-z0-9._-]{1,249}$/

export type { KafkaBroker }

interface KafkaTls {
  ca?: string
  cert?: string
  key?: string
}

export interface KafkaSettings {
  label: SinkLabel
  brokers: KafkaBroker[]
  topic: string
  stateTopic: string
  /** Used only when the sink creates a topic; undefined leaves it to the broker's default. */
  partitions: number | undefined
  replicationFactor: number | undefined
  cleanupPolicy: CleanupPolicy
  /** One per KollectSink: a second exporter with the same id fences the first (one writer). */
  transactionalId: string
  sasl: { mechanism: SaslMechanism; username: string; password: string } | undefined
  tls: KafkaTls | undefined
  secrets: Secrets
  connectTimeoutMillis: number
  requestTimeoutMillis: number
  /**
   * How long the broker lets one export's transaction stay open before it aborts it: room for a
   * large first export; at most the broker's transaction.max.timeout.ms (15 min by default).
   */
  transactionTimeoutMillis: number
  /** Client-level retries of one request (metadata refresh, a leader moving) before the export fails and backs off. */
  retries: number
}

function parseBrokers(label: SinkLabel, text: string): KafkaBroker[] {
  const brokers = text.split(',').map((s) => s.trim()).filter((s) => s !== '')
  if (brokers.length === 0) throw configError(label, 'spec.kafka.brokers is required')
  return brokers.map((b) => {
    const broker = parseBroker(b)
    if (!broker) throw configError(label, `broker "${b}" ${BROKER_RULE} (comma-separated for several)`)
    return broker
  })
}

/** Every endpoint the client opens first, as URLs for the SSRF guard. */
export function brokerUrls(brokers: readonly KafkaBroker[]): string[] {
  return brokers.map((b) => `kafka://${b.host.includes(':') ? `[${b.host}]` : b.host}:${b.port}/`)
}

/** The bootstrap brokers; the brokers they name are checked as the client connects (connections.ts). */
export function kafkaEndpoints(spec: KollectSinkSpec): Endpoint[] {
  // An unparsable list fails in the sink's own config check, with the reason.
  let urls: string[] = []
  try {
    urls = brokerUrls(parseBrokers({ kind: 'kafka', id: '' }, spec.kafka?.brokers ?? ''))
  } catch {
    return []
  }
  return urls.map((url) => ({ url }))
}

function topicName(label: SinkLabel, field: string, name: string): string {
  if (!TOPIC_NAME.test(name) || name === '.' || name === '..') {
    throw configError(label, `${field} "${name}" must be 1 to 249 characters of [A-Za-z0-9._-]`)
  }
  return name
}

function positive(label: SinkLabel, field: string, value: number | undefined): number | undefined {
  if (value === undefined) return undefined
  if (!Number.isInteger(value) || value < 1 || value > 10_000) throw configError(label, `${field} must be an integer from 1 to 10000`)
  return value
}

function saslFrom(label: SinkLabel, mechanism: string | undefined, credentials: Readonly<Record<string, string>>): KafkaSettings['sasl'] {
  const username = credentials.username ?? credentials.user ?? ''
  const password = credentials.password ?? ''
  if (username === '' && password === '') {
    if (mechanism !== undefined) throw configError(label, `saslMechanism ${mechanism} needs username and password in the secret`)
    return undefined
  }
  if (username === '' || password === '') throw configError(label, 'the secret needs both username and password')
  const m = mechanism ?? 'PLAIN'
  if (!SASL_MECHANISMS.has(m)) throw configError(label, `saslMechanism must be one of ${[...SASL_MECHANISMS].join(', ')}`)
  return { mechanism: m as SaslMechanism, username, password }
}

// Secret keys as a kubernetes.io/tls Secret names them, plus the CA.
function tlsFrom(enabled: boolean | undefined, credentials: Readonly<Record<string, string>>): KafkaTls | undefined {
  if (!enabled) return undefined
  // Locally, secrets come from environment variables, where "ca.crt" is spelled ca_crt.
  const key = (name: string): string | undefined => credentials[name] || credentials[name.replace('.', '_')] || undefined
  const tls: KafkaTls = {}
  const [ca, cert, privateKey] = [key('ca.crt'), key('tls.crt'), key('tls.key')]
  if (ca) tls.ca = ca
  if (cert) tls.cert = cert
  if (privateKey) tls.key = privateKey
  return tls
}

export function kafkaSettings(opts: SinkOptions): KafkaSettings {
  const label: SinkLabel = { kind: 'kafka', id: opts.id }
  const kafka = opts.spec.kafka
  const brokers = parseBrokers(label, kafka?.brokers ?? '')
  const topic = topicName(label, 'topic', kafka?.topic || DEFAULT_TOPIC)
  const stateTopic = topicName(label, 'stateTopic', kafka?.stateTopic || `${topic}${STATE_TOPIC_SUFFIX}`)
  if (stateTopic === topic) throw configError(label, 'stateTopic must differ from topic')
  const cleanupPolicy = kafka?.cleanupPolicy ?? 'compact'
  if (!CLEANUP_POLICIES.has(cleanupPolicy)) throw configError(label, `cleanupPolicy must be one of ${[...CLEANUP_POLICIES].join(', ')}`)
  const tls = tlsFrom(kafka?.tls, opts.credentials)
  if (tls && (tls.cert === undefined) !== (tls.key === undefined)) throw configError(label, 'a client certificate needs both tls.crt and tls.key in the secret')
  return {
    label,
    brokers,
    topic,
    stateTopic,
    partitions: positive(label, 'partitions', kafka?.partitions),
    replicationFactor: positive(label, 'replicationFactor', kafka?.replicationFactor),
    cleanupPolicy: cleanupPolicy as CleanupPolicy,
    transactionalId: `kollect/${opts.id}`,
    sasl: saslFrom(label, kafka?.saslMechanism, opts.credentials),
    tls,
    secrets: secretsFromCredentials(opts.credentials),
    connectTimeoutMillis: 5000,
    requestTimeoutMillis: 10_000,
    transactionTimeoutMillis: 120_000,
    retries: 3,
  }
}
