import path from 'node:path'
import type { ResolvedSink } from '../api/types.js'
import type { SinkDescriptor } from './descriptor.js'
import { escapePathSegment } from './escape.js'
import { fileSink } from './file/index.js'
import { gitSink } from './git/index.js'
import { repositoryDir } from './git/process.js'
import { kafkaSink } from './kafka/index.js'
import { natsSink } from './nats/index.js'
import type { SinkOptions } from './options.js'
import { postgresSink } from './postgres/index.js'
import { s3Sink } from './s3/index.js'
import { SinkError, type Credentials, type Sink } from './sink.js'

export interface SinkFactoryDeps {
  dataDir: string
  /** Reads the data of a sink's secretRef; rejects when it cannot. */
  credentials(sink: ResolvedSink): Promise<Credentials>
  /** SSRF guard, after DNS; returns why an endpoint is refused. */
  checkEndpoint(url: string): Promise<string | null>
  /**
   * Set when this exporter has standbys (leader election): sinks that keep their record in the
   * pod (SinkDescriptor.inPod) and the embedded default are refused, since after a takeover the
   * record would go on in another pod's directory and this pod's part would vanish with it.
   */
  standbys?: boolean
}

/** Why a sink that keeps its record in the pod is refused beside standby exporters. */
export const IN_POD_WITH_STANDBYS =
  'keeps its record in this exporter pod\'s data directory, and this exporter runs with standbys (leader election): ' +
  'after a takeover the history would split between two pods\' directories and vanish with them. ' +
  'Give a git sink a url (or use PostgreSQL, NATS, S3 or Kafka), or run one exporter (exporter.replicas=1)'

/** Every sink type: a new sink is its folder (CONTRIBUTING.md, "Adding a sink") and its descriptor here. */
const SINKS: readonly SinkDescriptor[] = [fileSink, gitSink, postgresSink, natsSink, s3Sink, kafkaSink]

const BY_TYPE = new Map<string, SinkDescriptor>(SINKS.map((d) => [d.type, d]))

/** The embedded default: a local Git repository under the data directory. */
export function defaultSinkOptions(dataDir: string): SinkOptions {
  return { id: 'default', spec: { type: 'git', deletionPolicy: 'Retain' }, credentials: {}, dataDir: path.join(dataDir, 'repo') }
}

/** The embedded default's repository, absolute: git creates it at the default's first export. */
export function defaultRepositoryDir(dataDir: string): string {
  return repositoryDir({ url: undefined }, defaultSinkOptions(dataDir).dataDir)
}

export function createSinkFactory(deps: SinkFactoryDeps): (resolved: ResolvedSink | null) => Promise<Sink> {
  return async (resolved) => {
    if (!resolved) {
      if (deps.standbys) throw new SinkError(`the embedded default sink ${IN_POD_WITH_STANDBYS}`, { retriable: false })
      return gitSink.create(defaultSinkOptions(deps.dataDir))
    }
    const id = `${resolved.namespace}/${resolved.name}`
    const descriptor = BY_TYPE.get(resolved.spec.type)
    if (!descriptor) throw new SinkError(`sink ${id}: unknown type ${JSON.stringify(resolved.spec.type)}`, { retriable: false })
    if (deps.standbys && descriptor.inPod?.(resolved.spec)) throw new SinkError(`sink ${id} ${IN_POD_WITH_STANDBYS}`, { retriable: false })
    const credentials = resolved.spec.secretRef ? await deps.credentials(resolved) : {}
    for (const { url, what } of descriptor.endpoints(resolved.spec, credentials)) {
      const refused = await deps.checkEndpoint(url)
      if (refused) throw new SinkError(`sink ${id}: ${what ? `${what}: ` : ''}${refused}`, { retriable: false })
    }
    const dataDir = path.join(deps.dataDir, 'sinks', escapePathSegment(resolved.namespace), escapePathSegment(resolved.name))
    return descriptor.create({ id, spec: resolved.spec, credentials, dataDir, checkEndpoint: deps.checkEndpoint })
  }
}
