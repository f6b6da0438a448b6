import { readFileSync } from 'node:fs'
import path from 'node:path'
import { DEFAULT_LIMITS, type ExpressionLimits } from '../hooks/limits.js'

export interface Config {
  port: number
  host: string
  dataDir: string
  cluster: string
  /** Bearer token the hooks (and the exporter API) require; empty means no auth. */
  hookToken: string
  hookBodyLimit: number
  exporterPort: number
  exporterUrl: string
  allowPrivateSinks: boolean
  logLevel: string
  maxInflightRequests: number
  maxInflightBytes: number
  limits: ExpressionLimits
  secretCacheMs: number
  /** Extraction child processes; 0 means one per CPU, at least 2. */
  extractWorkers: number
  /** More children that only take a sync from a namespace with nothing running and short recent syncs. */
  extractReserve: number
  /** Wall-clock budget of one target sync, from its arrival. */
  syncTimeoutMs: number
  /** Heap limit of one extraction child process. */
  workerMemoryMb: number
}

type Env = Record<string, string | undefined>

function int(env: Env, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`)
  return n
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (/^(1|true|yes)$/i.test(raw)) return true
  if (/^(0|false|no)$/i.test(raw)) return false
  throw new Error(`${name} must be true or false, got ${JSON.stringify(raw)}`)
}

/** The hook token from KOLLECT_HOOK_TOKEN, or from the file KOLLECT_HOOK_TOKEN_FILE (a mounted Secret). */
function token(env: Env): string {
  if (env['KOLLECT_HOOK_TOKEN']) return env['KOLLECT_HOOK_TOKEN'].trim()
  const file = env['KOLLECT_HOOK_TOKEN_FILE']
  return file ? readFileSync(file, 'utf8').trim() : ''
}

export function loadConfig(env: Env = process.env, defaults: Partial<Config> = {}): Config {
  const exporterPort = int(env, 'KOLLECT_EXPORTER_PORT', defaults.exporterPort ?? 8081)
  return {
    port: int(env, 'PORT', defaults.port ?? 8080),
    host: env['HOST'] ?? defaults.host ?? '0.0.0.0',
    dataDir: path.resolve(env['KOLLECT_DATA_DIR'] ?? defaults.dataDir ?? '.data'),
    cluster: env['KOLLECT_CLUSTER'] ?? defaults.cluster ?? 'default',
    hookToken: token(env),
    hookBodyLimit: int(env, 'KOLLECT_HOOK_BODY_LIMIT', 64 * 1024 * 1024),
    exporterPort,
    exporterUrl: env['KOLLECT_EXPORTER_URL'] ?? `http://127.0.0.1:${exporterPort}`,
    allowPrivateSinks: bool(env, 'KOLLECT_ALLOW_PRIVATE_SINKS', defaults.allowPrivateSinks ?? false),
    logLevel: env['KOLLECT_LOG_LEVEL'] ?? defaults.logLevel ?? 'info',
    // Metacontroller runs 5 workers per controller and Kollect has 4 controllers: an ordinary
    // resync never has more than 20 hooks in flight.
    maxInflightRequests: int(env, 'KOLLECT_MAX_INFLIGHT_REQUESTS', 20),
    maxInflightBytes: int(env, 'KOLLECT_MAX_INFLIGHT_BYTES', 256 * 1024 * 1024),
    secretCacheMs: int(env, 'KOLLECT_SECRET_CACHE_MS', 30_000),
    extractWorkers: int(env, 'KOLLECT_EXTRACT_WORKERS', 0),
    extractReserve: int(env, 'KOLLECT_EXTRACT_RESERVE', 1),
    syncTimeoutMs: int(env, 'KOLLECT_SYNC_TIMEOUT_MS', 8000),
    workerMemoryMb: int(env, 'KOLLECT_WORKER_MEMORY_MB', 2048),
    limits: {
      maxExpressionLength: int(env, 'KOLLECT_MAX_EXPRESSION_LENGTH', DEFAULT_LIMITS.maxExpressionLength),
      maxAttributes: int(env, 'KOLLECT_MAX_ATTRIBUTES', DEFAULT_LIMITS.maxAttributes),
      maxMacroDepth: int(env, 'KOLLECT_MAX_MACRO_DEPTH', DEFAULT_LIMITS.maxMacroDepth),
      maxAstNodes: DEFAULT_LIMITS.maxAstNodes,
      maxItemBytes: int(env, 'KOLLECT_MAX_ITEM_BYTES', DEFAULT_LIMITS.maxItemBytes),
      maxRequestItemBytes: int(env, 'KOLLECT_MAX_SYNC_OUTPUT_BYTES', DEFAULT_LIMITS.maxRequestItemBytes),
      maxStringLength: int(env, 'KOLLECT_MAX_STRING_LENGTH', DEFAULT_LIMITS.maxStringLength),
      maxListLength: int(env, 'KOLLECT_MAX_LIST_LENGTH', DEFAULT_LIMITS.maxListLength),
    },
  }
}
