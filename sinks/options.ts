import type { KollectSinkSpec } from '../api/types.js'
import type { Credentials } from './sink.js'

/** What every sink factory receives: the resolved KollectSink and its secret's data. */
export interface SinkOptions {
  /** "namespace/name" of the KollectSink. */
  id: string
  spec: KollectSinkSpec
  credentials: Credentials
  /** Local state directory (file and git sinks). */
  dataDir: string
  /** The SSRF guard, for endpoints a sink learns only once connected: every broker a Kafka client connects to. */
  checkEndpoint?: (url: string) => Promise<string | null>
}
