// The KollectSink spec: one settings block per sink type. Re-exported by api/types.ts.

export type SinkType = 'file' | 'git' | 'postgres' | 'nats' | 's3' | 'kafka'
export type DeletionPolicy = 'Retain' | 'Delete'

export interface GitSinkSettings {
  /** Remote URL; empty means a local repository under the data directory (the embedded default). */
  url?: string
  branch?: string
  /** Path template; placeholders {cluster} {namespace} {name}. */
  path?: string
  layout?: 'document' | 'perResource'
  author?: { name?: string; email?: string }
}

export interface PostgresSinkSettings {
  schema?: string
  table?: string
  /** Snapshot rows kept per inventory, the newest first; 0 keeps all. Default 1000. */
  keepSnapshots?: number
  /** Snapshot rows older than this go too, e.g. 2160h; absent keeps them whatever their age. */
  snapshotMaxAge?: string
}

export interface NatsSinkSettings {
  url: string
  stream?: string
  subject?: string
  /** Events older than this leave the stream, e.g. 168h (the default on a stream the sink creates); 0s keeps them. */
  maxAge?: string
  /** Events kept on the stream, the oldest go first; 0 (the default) sets no count limit. */
  maxMessages?: number
}

export interface KafkaSinkSettings {
  /** Bootstrap brokers, comma-separated host:port. */
  brokers: string
  topic?: string
  /** Compacted topic holding what was last published; default `<topic>.kollect-state`. */
  stateTopic?: string
  /** Settings of topics the sink creates; existing topics are used as they are. */
  partitions?: number
  replicationFactor?: number
  cleanupPolicy?: 'compact' | 'delete' | 'compact,delete'
  /** SASL mechanism for the username/password of the secret; default PLAIN. */
  saslMechanism?: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512'
  /** TLS to the brokers; ca.crt, tls.crt and tls.key from the secret when present. */
  tls?: boolean
}

export interface FileSinkSettings {
  /** Path template relative to the data directory; placeholders {cluster} {namespace} {name}. */
  path?: string
  format?: 'json' | 'yaml'
}

export interface S3SinkSettings {
  bucket: string
  /** S3 API endpoint (MinIO, Ceph, https://storage.googleapis.com); absent: AWS S3 of the region. */
  endpoint?: string
  region?: string
  /** Path-style addressing (endpoint/bucket/key) instead of bucket.endpoint/key. */
  pathStyle?: boolean
  /** Key prefix template; placeholders {cluster} {namespace} {name}. */
  prefix?: string
  layout?: 'document' | 'perResource'
  /** Snapshot documents kept per inventory; 0 keeps all (leave it to a bucket lifecycle rule). */
  keepSnapshots?: number
}

export type DriftPolicy = 'Repair' | 'Report' | 'Off'

export interface KollectSinkSpec {
  type: SinkType
  cluster?: string
  deletionPolicy?: DeletionPolicy
  drift?: { policy?: DriftPolicy; interval?: string }
  secretRef?: { name: string; namespace?: string }
  git?: GitSinkSettings
  postgres?: PostgresSinkSettings
  nats?: NatsSinkSettings
  file?: FileSinkSettings
  s3?: S3SinkSettings
  kafka?: KafkaSinkSettings
}
