import type { KollectSinkSpec, SinkType } from '../api/types.js'
import type { SinkOptions } from './options.js'
import type { Credentials, Sink } from './sink.js'

/** An endpoint for the SSRF guard, and what in the settings it stands for when that is not obvious. */
export interface Endpoint {
  url: string
  what?: string
}

/**
 * What the registry knows of a sink type. Each sink folder's index.ts exports one, and
 * sinks/registry.ts lists them: a new sink is its folder plus one entry there.
 */
export interface SinkDescriptor {
  readonly type: SinkType
  create(opts: SinkOptions): Sink
  /**
   * Every endpoint the sink's client will open, as its own parsing of the settings decides: the
   * SSRF guard checks them all before the sink is built. Settings that do not parse give none;
   * the sink's own configuration check then fails with the reason.
   */
  endpoints(spec: KollectSinkSpec, credentials: Credentials): Endpoint[]
  /**
   * Whether the sink keeps its record in the exporter pod's own data directory (a file sink, a
   * git sink without a url) rather than on a server. Such a record cannot follow a takeover by a
   * standby exporter. Absent: it does not.
   */
  inPod?(spec: KollectSinkSpec): boolean
}
