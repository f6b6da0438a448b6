import { readFileSync } from 'node:fs'
import { hostname } from 'node:os'
import path from 'node:path'
import { getHeapStatistics } from 'node:v8'
import { clusterLabelProblem } from '../../api/names.js'
import { DEFAULT_LIMITS, type ExpressionLimits } from '../../hooks/limits.js'
import type { HookAuth } from '../guards/auth.js'
import { LOG_FORMATS, type LogFormat } from './logger.js'

export interface Config {
  port: number
  host: string
  dataDir: string
  cluster: string
  /** How hooks (and the exporter API) authenticate callers. */
  hookAuth: HookAuth
  hookBodyLimit: number
  exporterPort: number
  /** Where the exporter listens: loopback (the sidecar) unless a separate exporter Deployment sets it. */
  exporterHost: string
  exporterUrl: string
  /** KOLLECT_EXPORTER_PEERS: every exporter replica (host:port list or a headless Service name); empty: off. */
  exporterPeers: string
  /** Hub mode: the hub's config file (docs/operations.md#hub-mode). */
  hubConfigFile: string
  allowPrivateSinks: boolean
  logLevel: string
  /** KOLLECT_LOG_FORMAT: pretty on a terminal (auto), JSON otherwise. */
  logFormat: LogFormat
  maxInflightRequests: number
  maxInflightBytes: number
  limits: ExpressionLimits
  secretCacheMs: number
  /** How long shutdown waits for pending exports before it saves them to the journal. */
  shutdownGraceMs: number
  /** Extraction child processes; 0 means one per CPU, at least 2. */
  extractWorkers: number
  /** More children that only take a sync from a namespace with nothing running and short recent syncs. */
  extractReserve: number
  /** Wall-clock budget of one target sync, from its arrival. */
  syncTimeoutMs: number
  /** Answers kept for target syncs whose next body may be byte for byte the same (0: none). */
  unchangedSyncs: number
  /** Bytes of object records kept for incremental target syncs (0: off), and one namespace's share of them. */
  objectCacheBytes: number
  objectCacheNamespaceShare: number
  /** Bodies of at least this many bytes whose objects all go to extraction are halved between two idle children (0: never). */
  halveSyncBytes: number
  /** Heap limit of one extraction child process. */
  workerMemoryMb: number
  /** Bytes of items (as the exporter charges them) the exporter holds at most. */
  itemBudgetBytes: number
  /** Fraction of itemBudgetBytes the targets of one namespace may hold together. */
  namespaceShare: number
  /** Active/standby exporters over a Lease; null (the default) runs one exporter without API access. */
  leaderElection: LeaseSettings | null
}

/** The Lease the exporter replicas compete for (cluster/leader.ts), as KOLLECT_LEASE_* set it. */
export interface LeaseSettings {
  name: string
  namespace: string
  identity: string
  durationMs: number
  renewDeadlineMs: number
  retryPeriodMs: number
}

/**
 * Sized for one target of 100,000 Deployments (issue 28): their example-profile items are charged
 * about 150 MB, within half of it. The chart sets smaller values for its 1 GiB exporter, and a
 * values file for large targets; the arithmetic is in docs/operations.md#sizing.
 */
const DEFAULT_ITEM_BUDGET_BYTES = 384 * 1024 * 1024
const DEFAULT_NAMESPACE_SHARE = 0.5

type Env = Record<string, string | undefined>

/**
 * A tenth of this process's heap limit, at most 256 MiB (with half for one namespace, the records
 * of a 100,000-object target, about 120 MB): the records sit in the heap next to the bodies in
 * flight (and, in one process, the exporter's items), so a small heap keeps fewer.
 */
function defaultObjectCacheBytes(): number {
  return Math.min(256 * 1024 * 1024, Math.floor(getHeapStatistics().heap_size_limit / 10))
}

function int(env: Env, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`)
  return n
}

function fraction(env: Env, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!/^\s*(0|1)?(\.\d+)?\s*$/.test(raw) || !(n > 0 && n <= 1)) throw new Error(`${name} must be a fraction above 0 and at most 1, got ${JSON.stringify(raw)}`)
  return n
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (/^(1|true|yes)$/i.test(raw)) return true
  if (/^(0|false|no)$/i.test(raw)) return false
  throw new Error(`${name} must be true or false, got ${JSON.stringify(raw)}`)
}

function logFormat(env: Env): LogFormat {
  const raw = env['KOLLECT_LOG_FORMAT'] || 'auto'
  if (!(LOG_FORMATS as readonly string[]).includes(raw)) throw new Error(`KOLLECT_LOG_FORMAT must be ${LOG_FORMATS.join(', ')}, got ${JSON.stringify(raw)}`)
  return raw as LogFormat
}

/** client-go's defaults (15s, 10s, 2s) and its constraint: duration > renew deadline > retry period. */
function leaderElection(env: Env): LeaseSettings | null {
  if (!bool(env, 'KOLLECT_LEADER_ELECTION', false)) return null
  const settings: LeaseSettings = {
    name: env['KOLLECT_LEASE_NAME'] || 'kollect-exporter',
    namespace: env['KOLLECT_LEASE_NAMESPACE'] || env['POD_NAMESPACE'] || 'kollect-system',
    identity: env['KOLLECT_LEASE_IDENTITY'] || env['POD_NAME'] || hostname(),
    durationMs: int(env, 'KOLLECT_LEASE_DURATION_MS', 15_000),
    renewDeadlineMs: int(env, 'KOLLECT_LEASE_RENEW_DEADLINE_MS', 10_000),
    retryPeriodMs: int(env, 'KOLLECT_LEASE_RETRY_PERIOD_MS', 2_000),
  }
  if (settings.durationMs % 1000 !== 0 || settings.durationMs === 0) {
    throw new Error(`KOLLECT_LEASE_DURATION_MS must be a positive whole number of seconds (the Lease holds seconds), got ${settings.durationMs}`)
  }
  if (!(settings.durationMs > settings.renewDeadlineMs && settings.renewDeadlineMs > settings.retryPeriodMs * 1.2 && settings.retryPeriodMs > 0)) {
    throw new Error('the lease settings need KOLLECT_LEASE_DURATION_MS > KOLLECT_LEASE_RENEW_DEADLINE_MS > 1.2 × KOLLECT_LEASE_RETRY_PERIOD_MS > 0, ' +
      `got ${settings.durationMs}, ${settings.renewDeadlineMs}, ${settings.retryPeriodMs}`)
  }
  return settings
}

/** An error as one log line: a message with a code frame (a YAML error's) keeps its text, not its lines. */
export function configErrorLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' ').trim()
}

const TO_RUN_OPEN = 'or KOLLECT_HOOK_AUTH=none to run without authentication'

/** The token from KOLLECT_HOOK_TOKEN or the file KOLLECT_HOOK_TOKEN_FILE (a mounted Secret); null when neither is set. */
function configuredToken(env: Env): string | null {
  const value = env['KOLLECT_HOOK_TOKEN']
  const file = env['KOLLECT_HOOK_TOKEN_FILE']
  if (value !== undefined && file !== undefined) throw new Error('KOLLECT_HOOK_TOKEN and KOLLECT_HOOK_TOKEN_FILE are both set; set one')
  if (value !== undefined) {
    if (value.trim() === '') throw new Error(`KOLLECT_HOOK_TOKEN is set but blank; set a token, ${TO_RUN_OPEN}`)
    return value.trim()
  }
  if (file === undefined) return null
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    throw new Error(`KOLLECT_HOOK_TOKEN_FILE ${JSON.stringify(file)} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  if (text.trim() === '') throw new Error(`KOLLECT_HOOK_TOKEN_FILE ${JSON.stringify(file)} is empty; put a token in it, ${TO_RUN_OPEN}`)
  return text.trim()
}

function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host)
}

/**
 * KOLLECT_HOOK_AUTH: `token` (the default) needs a non-blank token; `none` is explicit. An entry
 * point may offer `none` as its default (npm start, the demo), which holds only on loopback.
 */
function hookAuth(env: Env, host: string, loopbackDefault: 'none' | undefined): HookAuth {
  const mode = env['KOLLECT_HOOK_AUTH']
  if (mode !== undefined && mode !== 'token' && mode !== 'none') throw new Error(`KOLLECT_HOOK_AUTH must be token or none, got ${JSON.stringify(mode)}`)
  const token = configuredToken(env)
  if (mode === 'none') {
    if (token !== null) throw new Error('KOLLECT_HOOK_AUTH=none, but a hook token is set too; unset one')
    return { mode: 'none', reason: 'KOLLECT_HOOK_AUTH=none' }
  }
  if (token !== null) return { mode: 'token', token }
  if (mode === undefined && loopbackDefault === 'none' && isLoopbackHost(host)) {
    return { mode: 'none', reason: `the default for a local run listening on ${host} only` }
  }
  throw new Error(`no hook token: set KOLLECT_HOOK_TOKEN or KOLLECT_HOOK_TOKEN_FILE, ${TO_RUN_OPEN}`)
}

export interface ConfigDefaults extends Partial<Config> {
  /** The auth mode when no token and no KOLLECT_HOOK_AUTH are set, used only when listening on loopback. */
  loopbackAuth?: 'none'
}

/** The label is stamped into keys, paths, rows and subjects: KollectSink.spec.cluster's rule. */
function clusterLabel(value: string): string {
  const problem = clusterLabelProblem(value)
  if (problem) throw new Error(`KOLLECT_CLUSTER: ${problem}`)
  return value
}

export function loadConfig(env: Env = process.env, defaults: ConfigDefaults = {}): Config {
  const exporterPort = int(env, 'KOLLECT_EXPORTER_PORT', defaults.exporterPort ?? 8081)
  const host = env['HOST'] ?? defaults.host ?? '0.0.0.0'
  const auth = hookAuth(env, host, defaults.loopbackAuth)
  const exporterHost = env['KOLLECT_EXPORTER_HOST'] ?? '127.0.0.1'
  // Off loopback the token is the exporter API's only guard (docs/security.md).
  if (!isLoopbackHost(exporterHost) && auth.mode !== 'token') {
    throw new Error(`KOLLECT_EXPORTER_HOST=${exporterHost} is beyond loopback: the exporter API then needs a hook token, KOLLECT_HOOK_AUTH=none is refused`)
  }
  return {
    port: int(env, 'PORT', defaults.port ?? 8080),
    host,
    dataDir: path.resolve(env['KOLLECT_DATA_DIR'] ?? defaults.dataDir ?? '.data'),
    cluster: clusterLabel(env['KOLLECT_CLUSTER'] ?? defaults.cluster ?? 'default'),
    hookAuth: auth,
    // A target of 100,000 realistic Deployments with managedFields is a 250 MiB body; a child
    // extracts a body within 8 times its size in heap (KOLLECT_WORKER_MEMORY_MB).
    hookBodyLimit: int(env, 'KOLLECT_HOOK_BODY_LIMIT', 320 * 1024 * 1024),
    exporterPort,
    exporterHost,
    exporterUrl: env['KOLLECT_EXPORTER_URL'] ?? `http://127.0.0.1:${exporterPort}`,
    exporterPeers: (env['KOLLECT_EXPORTER_PEERS'] ?? '').trim(),
    hubConfigFile: env['KOLLECT_HUB_CONFIG'] ?? '/etc/kollect/hub.yaml',
    allowPrivateSinks: bool(env, 'KOLLECT_ALLOW_PRIVATE_SINKS', defaults.allowPrivateSinks ?? false),
    logLevel: env['KOLLECT_LOG_LEVEL'] ?? defaults.logLevel ?? 'info',
    logFormat: logFormat(env),
    // Metacontroller runs 5 workers per controller and Kollect has 4 controllers: an ordinary
    // resync never has more than 20 hooks in flight.
    maxInflightRequests: int(env, 'KOLLECT_MAX_INFLIGHT_REQUESTS', 20),
    // Past one body at the limit, so that a largest target's sync does not turn every other hook away.
    maxInflightBytes: int(env, 'KOLLECT_MAX_INFLIGHT_BYTES', 512 * 1024 * 1024),
    secretCacheMs: int(env, 'KOLLECT_SECRET_CACHE_MS', 30_000),
    shutdownGraceMs: int(env, 'KOLLECT_SHUTDOWN_GRACE_MS', 20_000),
    extractWorkers: int(env, 'KOLLECT_EXTRACT_WORKERS', 0),
    extractReserve: int(env, 'KOLLECT_EXTRACT_RESERVE', 1),
    syncTimeoutMs: int(env, 'KOLLECT_SYNC_TIMEOUT_MS', 8000),
    unchangedSyncs: int(env, 'KOLLECT_UNCHANGED_SYNCS', 1000),
    objectCacheBytes: int(env, 'KOLLECT_OBJECT_CACHE_BYTES', defaultObjectCacheBytes()),
    objectCacheNamespaceShare: fraction(env, 'KOLLECT_OBJECT_CACHE_NAMESPACE_SHARE', 0.5),
    // Smaller bodies go to one child whole: two children's own costs would take what halving saves.
    halveSyncBytes: int(env, 'KOLLECT_HALVE_SYNC_BYTES', 4 * 1024 * 1024),
    workerMemoryMb: int(env, 'KOLLECT_WORKER_MEMORY_MB', 2560),
    itemBudgetBytes: int(env, 'KOLLECT_EXPORTER_ITEM_BUDGET_BYTES', DEFAULT_ITEM_BUDGET_BYTES),
    namespaceShare: fraction(env, 'KOLLECT_EXPORTER_NAMESPACE_SHARE', DEFAULT_NAMESPACE_SHARE),
    leaderElection: leaderElection(env),
    limits: {
      maxExpressionLength: int(env, 'KOLLECT_MAX_EXPRESSION_LENGTH', DEFAULT_LIMITS.maxExpressionLength),
      maxAttributes: int(env, 'KOLLECT_MAX_ATTRIBUTES', DEFAULT_LIMITS.maxAttributes),
      maxMacroDepth: int(env, 'KOLLECT_MAX_MACRO_DEPTH', DEFAULT_LIMITS.maxMacroDepth),
      maxAstNodes: DEFAULT_LIMITS.maxAstNodes,
      maxItemBytes: int(env, 'KOLLECT_MAX_ITEM_BYTES', DEFAULT_LIMITS.maxItemBytes),
      maxRequestItemBytes: int(env, 'KOLLECT_MAX_SYNC_OUTPUT_BYTES', DEFAULT_LIMITS.maxRequestItemBytes),
      maxJsonDepth: int(env, 'KOLLECT_MAX_JSON_DEPTH', DEFAULT_LIMITS.maxJsonDepth),
      maxStringLength: int(env, 'KOLLECT_MAX_STRING_LENGTH', DEFAULT_LIMITS.maxStringLength),
      maxListLength: int(env, 'KOLLECT_MAX_LIST_LENGTH', DEFAULT_LIMITS.maxListLength),
    },
  }
}
