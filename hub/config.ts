import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import YAML from 'yaml'
import { specProblems } from '../api/crd-schemas.js'
import { clusterLabelProblem } from '../api/names.js'
import type { KollectSinkSpec } from '../api/types.js'
import { DEFAULT_STREAM, DEFAULT_SUBJECT } from '../sinks/nats/config.js'

// The hub's configuration file (docs/operations.md#hub-mode). A file, not Kollect resources:
// docs/design.md#hub-mode says why.

interface HubSinkConfig {
  /** Names the sink in logs, metrics and its local data directory. */
  name: string
  /** A KollectSink spec, checked against the CRD schema; git and postgres only. */
  spec: KollectSinkSpec
  /** A mounted Secret: one file per key (what the sink's secretRef would hold). */
  secretDir?: string
}

export interface HubConfig {
  nats: {
    url: string
    stream: string
    subject: string
    /** The durable pull consumer's name: the hub's position in the stream. */
    durable: string
    /** How long a delivered message waits for its ack before redelivery: after a crash, how soon the next start gets it back. */
    ackWaitSeconds: number
    secretDir?: string
  }
  /** Only these cluster labels are fanned in; anything else is refused. */
  clusters: string[]
  dataDir: string
  sinks: HubSinkConfig[]
}

const DEFAULT_DURABLE = 'kollect-hub'
const DEFAULT_ACK_WAIT_SECONDS = 600
const HUB_SINK_TYPES = new Set(['git', 'postgres'])
const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/

class HubConfigError extends Error {
  constructor(file: string, problems: string[]) {
    super(`hub config ${file}: ${problems.join('; ')}`)
    this.name = 'HubConfigError'
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function optionalString(v: unknown, where: string, problems: string[]): string | undefined {
  if (v === undefined) return undefined
  if (typeof v !== 'string' || v === '') problems.push(`${where} must be a non-empty string`)
  return typeof v === 'string' && v !== '' ? v : undefined
}

/** Parse and check the whole file; every problem is reported at once. */
export function parseHubConfig(text: string, file = 'hub.yaml'): HubConfig {
  const problems: string[] = []
  let doc: unknown
  try {
    doc = YAML.parse(text)
  } catch (err) {
    throw new HubConfigError(file, [`not YAML: ${(err as Error).message}`])
  }
  if (!isRecord(doc)) throw new HubConfigError(file, ['must be a mapping'])
  const nats = isRecord(doc.nats) ? doc.nats : {}
  if (!isRecord(doc.nats)) problems.push('nats is required')
  const url = optionalString(nats.url, 'nats.url', problems)
  if (url === undefined) problems.push('nats.url is required')
  const clusters = Array.isArray(doc.clusters) ? doc.clusters : []
  if (clusters.length === 0) problems.push('clusters must list the spoke cluster labels')
  // A label becomes part of the hub's keys, paths and subjects: the rule of KollectSink.spec.cluster.
  clusters.forEach((c: unknown, i) => {
    const problem = clusterLabelProblem(c)
    if (problem) problems.push(`clusters[${i}]: ${problem}`)
  })
  const sinks: HubSinkConfig[] = []
  const rawSinks = Array.isArray(doc.sinks) ? doc.sinks : []
  if (rawSinks.length === 0) problems.push('sinks must list at least one sink')
  const names = new Set<string>()
  rawSinks.forEach((raw: unknown, i) => {
    const where = `sinks[${i}]`
    if (!isRecord(raw)) return problems.push(`${where} must be a mapping`)
    const name = typeof raw.name === 'string' ? raw.name : ''
    if (!NAME.test(name)) problems.push(`${where}.name must be a DNS label`)
    if (names.has(name)) problems.push(`${where}.name ${name} is used twice`)
    names.add(name)
    const spec = raw.spec
    const specErrors = specProblems('KollectSink', spec)
    problems.push(...specErrors.map((p) => `${where}.spec${p}`))
    if (isRecord(spec) && !HUB_SINK_TYPES.has(String(spec.type))) problems.push(`${where}.spec.type must be git or postgres`)
    if (isRecord(spec) && spec.secretRef !== undefined) problems.push(`${where}.spec.secretRef: use secretDir in a hub config`)
    const secretDir = optionalString(raw.secretDir, `${where}.secretDir`, problems)
    sinks.push({ name, spec: spec as KollectSinkSpec, ...(secretDir ? { secretDir } : {}) })
    return undefined
  })
  const natsSecretDir = optionalString(nats.secretDir, 'nats.secretDir', problems)
  const ackWait = nats.ackWaitSeconds ?? DEFAULT_ACK_WAIT_SECONDS
  if (!Number.isInteger(ackWait) || (ackWait as number) < 1) problems.push('nats.ackWaitSeconds must be a whole number of seconds, at least 1')
  const dataDir = optionalString(doc.dataDir, 'dataDir', problems) ?? '/data'
  if (problems.length > 0) throw new HubConfigError(file, problems)
  return {
    nats: {
      url: url as string,
      stream: optionalString(nats.stream, 'nats.stream', problems) ?? DEFAULT_STREAM,
      subject: optionalString(nats.subject, 'nats.subject', problems) ?? DEFAULT_SUBJECT,
      durable: optionalString(nats.durable, 'nats.durable', problems) ?? DEFAULT_DURABLE,
      ackWaitSeconds: ackWait as number,
      ...(natsSecretDir ? { secretDir: natsSecretDir } : {}),
    },
    clusters: clusters as string[],
    dataDir,
    sinks,
  }
}

export function loadHubConfig(file: string): HubConfig {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    throw new HubConfigError(file, [`cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'}); set KOLLECT_HUB_CONFIG or kollect hub --config`])
  }
  return parseHubConfig(text, file)
}

/** A mounted Secret as credentials: one regular file per key; Kubernetes' `..data` links are skipped. */
export function readSecretDir(dir: string | undefined): Record<string, string> {
  if (dir === undefined) return {}
  const out: Record<string, string> = {}
  for (const name of readdirSync(dir)) {
    if (name.startsWith('.')) continue
    const file = path.join(dir, name)
    if (statSync(file).isFile()) out[name] = readFileSync(file, 'utf8').trim()
  }
  return out
}
