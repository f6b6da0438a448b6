import path from 'node:path'
import type { ResolvedSink } from '../api/types.js'
import { escapePathSegment } from './escape.js'
import { createFileSink } from './file/index.js'
import { createGitSink } from './git/index.js'
import { brokerUrls, parseBrokers } from './kafka/config.js'
import { createKafkaSink } from './kafka/index.js'
import { createNatsSink } from './nats/index.js'
import type { SinkOptions } from './options.js'
import { dsnOf, postgresEndpoints } from './postgres/config.js'
import { createPostgresSink } from './postgres/index.js'
import { s3Endpoints } from './s3/config.js'
import { createS3Sink } from './s3/index.js'
import { SinkError, type Credentials, type Sink } from './sink.js'

export interface SinkFactoryDeps {
  dataDir: string
  /** Reads the data of a sink's secretRef; rejects when it cannot. */
  credentials(sink: ResolvedSink): Promise<Credentials>
  /** SSRF guard, after DNS; returns why an endpoint is refused. */
  checkEndpoint(url: string): Promise<string | null>
}

const FACTORIES: Record<string, (opts: SinkOptions) => Sink> = {
  file: createFileSink,
  git: createGitSink,
  postgres: createPostgresSink,
  nats: createNatsSink,
  s3: createS3Sink,
  kafka: createKafkaSink,
}

/** The embedded default: a local Git repository under the data directory. */
export function defaultSinkOptions(dataDir: string): SinkOptions {
  return { id: 'default', spec: { type: 'git', deletionPolicy: 'Retain' }, credentials: {}, dataDir: path.join(dataDir, 'repo') }
}

export function createSinkFactory(deps: SinkFactoryDeps): (resolved: ResolvedSink | null) => Promise<Sink> {
  return async (resolved) => {
    if (!resolved) return createGitSink(defaultSinkOptions(deps.dataDir))
    const id = `${resolved.namespace}/${resolved.name}`
    const factory = FACTORIES[resolved.spec.type]
    if (!factory) throw new SinkError(`sink ${id}: unknown type ${JSON.stringify(resolved.spec.type)}`, { retriable: false })
    const credentials = resolved.spec.secretRef ? await deps.credentials(resolved) : {}
    for (const { url, what } of endpointsOf(resolved, credentials)) {
      const refused = await deps.checkEndpoint(url)
      if (refused) throw new SinkError(`sink ${id}: ${what ? `${what}: ` : ''}${refused}`, { retriable: false })
    }
    const dataDir = path.join(deps.dataDir, 'sinks', escapePathSegment(resolved.namespace), escapePathSegment(resolved.name))
    return factory({ id, spec: resolved.spec, credentials, dataDir, checkEndpoint: deps.checkEndpoint })
  }
}

/** An endpoint for the SSRF guard, and what in the settings it stands for when that is not obvious. */
interface Endpoint {
  url: string
  what?: string
}

/** Every endpoint the sink's client will open, as its own parsing of the settings decides. */
function endpointsOf(sink: ResolvedSink, credentials: Credentials): Endpoint[] {
  switch (sink.spec.type) {
    case 'git': {
      const git = sink.spec.git
      // The forge API receives the token: guarded like the remote, before the sink is built.
      const review = git?.review?.apiUrl ? [{ url: git.review.apiUrl.trim(), what: 'review.apiUrl' }] : []
      return [...(git?.url ? [{ url: git.url }] : []), ...review]
    }
    case 'nats':
      return sink.spec.nats?.url ? sink.spec.nats.url.split(',').map((u) => ({ url: u.trim() })) : []
    case 'postgres': {
      const dsn = dsnOf(credentials)
      return dsn === undefined ? [] : postgresEndpoints(dsn)
    }
    case 's3':
      return s3Endpoints(sink.spec).map((url) => ({ url, what: 'endpoint' }))
    case 'kafka': {
      // An unparsable list fails in the sink's own config check, with the reason.
      let urls: string[] = []
      try {
        urls = brokerUrls(parseBrokers({ kind: 'kafka', id: '' }, sink.spec.kafka?.brokers ?? ''))
      } catch {
        return []
      }
      return urls.map((url) => ({ url }))
    }
    default:
      return []
  }
}
