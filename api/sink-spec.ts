// The KollectSink spec: one settings block per sink type. Re-exported by api/types.ts.

export type SinkType = 'file' | 'git' | 'postgres' | 'nats' | 's3' | 'kafka'
export type DeletionPolicy = 'Retain' | 'Delete'

export interface GitSinkSettings {
  /** Remote URL; empty means a local repository under the data directory (the embedded default). */
  url?: string
  branch?: string
  /** Path template; placeholders {cluster} {namespace} {name}. */
  path?: string
  layout?: 'document' | 'perResource' | 'sharded'
  /** sharded layout: how many files share an inventory's items (default 16). */
  shards?: number
  author?: { name?: string; email?: string }
  /** Review mode: exports are proposed as merge or pull requests instead of pushed to the branch. */
  review?: GitReviewSettings
}

export interface GitReviewSettings {
  provider: 'gitlab' | 'gitea' | 'github'
  /** API base, e.g. https://gitlab.example/api/v4, https://gitea.example/api/v1, https://api.github.com. */
  apiUrl: string
  /** owner/repo (Gitea, GitHub) or the project's numeric id or full path (GitLab). */
  project: string
  /** Branch the requests merge into; default the sink's git.branch. */
  targetBranch?: string
  /** Review branch; placeholders {cluster} {namespace} {name}. Default kollect/{namespace}/{name}. */
  branchTemplate?: string
  /** Placeholders {cluster} {namespace} {name}. Default "kollect: {namespace}/{name} on {cluster}". */
  titleTemplate?: string
  /** Placeholders {cluster} {namespace} {name} {added} {changed} {removed} {checksum}. */
  descriptionTemplate?: string
  /** never (the default): a person merges; whenChecksPass: Kollect merges once the forge allows it. */
  autoMerge?: 'never' | 'whenChecksPass'
  /** How often an open request is checked for a merge, e.g. 1m; at least 5s. Default 1m. */
  pollInterval?: string
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
