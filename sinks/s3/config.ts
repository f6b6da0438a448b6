import { configError, secretsFromCredentials, type Secrets, type SinkLabel } from '../errors.js'
import type { SinkOptions } from '../options.js'
import type { Credentials } from '../sink.js'

export type S3Layout = 'document' | 'perResource'

const DEFAULT_S3_PREFIX = 'inventory/{cluster}/{namespace}/{name}'
const DEFAULT_S3_REGION = 'us-east-1'

export interface S3Settings {
  label: SinkLabel
  bucket: string
  /** Undefined: AWS S3 of the region. */
  endpoint: string | undefined
  region: string
  pathStyle: boolean
  prefixTemplate: string
  layout: S3Layout
  /** 0: every snapshot document stays. */
  keepSnapshots: number
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string }
  secrets: Secrets
  /** Requests in flight at once (item objects, deletions). */
  window: number
  connectTimeoutMillis: number
  requestTimeoutMillis: number
  /** Pointer updates lost to another writer before an export gives up (retriable). */
  maxPointerAttempts: number
  /** perResource: another writer's mark this much older than now is a dead writer's (see intents.ts). */
  staleWriterMillis: number
  /** perResource: item objects written between two refreshes of the writer's mark. */
  markEvery: number
}

// S3's bucket naming rules; GCS accepts a subset of these plus dotted names up to 222 characters.
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/
const REGION = /^[a-z0-9-]{1,64}$/

/**
 * A secret's value under any spelling of `names`: case and separators are ignored, so
 * accessKeyId, AWS_ACCESS_KEY_ID and the lower-cased keys of local KOLLECT_SECRET_* variables
 * all match.
 */
function lookup(credentials: Credentials, ...names: string[]): string {
  const wanted = new Set(names.map(normalKey))
  for (const [key, value] of Object.entries(credentials)) if (wanted.has(normalKey(key)) && value.trim() !== '') return value.trim()
  return ''
}

function normalKey(key: string): string {
  return key.toLowerCase().replace(/[^a-z0-9]/g, '')
}

function credentialsFrom(label: SinkLabel, credentials: Credentials): S3Settings['credentials'] {
  const accessKeyId = lookup(credentials, 'accessKeyId', 'AWS_ACCESS_KEY_ID')
  const secretAccessKey = lookup(credentials, 'secretAccessKey', 'AWS_SECRET_ACCESS_KEY')
  const sessionToken = lookup(credentials, 'sessionToken', 'AWS_SESSION_TOKEN')
  // Never the SDK's default chain: that would lend any tenant the exporter's own cloud identity.
  if (accessKeyId === '' || secretAccessKey === '') {
    throw configError(label, 'the secret in secretRef needs accessKeyId and secretAccessKey (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)')
  }
  return sessionToken === '' ? { accessKeyId, secretAccessKey } : { accessKeyId, secretAccessKey, sessionToken }
}

/** Why an endpoint is not usable, or undefined. */
function endpointProblem(endpoint: string): string | undefined {
  let url: URL
  try {
    url = new URL(endpoint)
  } catch {
    return 'endpoint must be an http(s) URL'
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'endpoint must be an http(s) URL'
  if (url.username || url.password) return 'endpoint must not carry credentials; put them in the sink secret'
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) return 'endpoint must be scheme://host[:port] only'
  return undefined
}

export function s3Settings(opts: SinkOptions): S3Settings {
  const label: SinkLabel = { kind: 's3', id: opts.id }
  const s3 = opts.spec.s3
  const bucket = s3?.bucket?.trim() ?? ''
  if (!BUCKET.test(bucket) || bucket.includes('..')) throw configError(label, `bucket "${bucket}" is not a valid bucket name`)
  const endpoint = s3?.endpoint?.trim() || undefined
  const problem = endpoint === undefined ? undefined : endpointProblem(endpoint)
  if (problem) throw configError(label, problem)
  const region = s3?.region?.trim() || DEFAULT_S3_REGION
  if (!REGION.test(region)) throw configError(label, `region "${region}" is not a region name`)
  const layout = s3?.layout ?? 'document'
  if (layout !== 'document' && layout !== 'perResource') throw configError(label, `layout must be "document" or "perResource", not "${String(layout)}"`)
  const keepSnapshots = s3?.keepSnapshots ?? 0
  if (!Number.isInteger(keepSnapshots) || keepSnapshots < 0) throw configError(label, 'keepSnapshots must be a whole number, 0 to keep all')
  return {
    label,
    bucket,
    endpoint: endpoint?.replace(/\/$/, ''),
    region,
    pathStyle: s3?.pathStyle ?? false,
    prefixTemplate: s3?.prefix || DEFAULT_S3_PREFIX,
    layout,
    keepSnapshots,
    credentials: credentialsFrom(label, opts.credentials),
    secrets: secretsFromCredentials(opts.credentials),
    window: 32,
    connectTimeoutMillis: 5000,
    requestTimeoutMillis: 30_000,
    maxPointerAttempts: 5,
    staleWriterMillis: 5 * 60_000,
    markEvery: 500,
  }
}

/**
 * The URLs the client opens, for the SSRF guard: virtual-hosted addressing puts the bucket in
 * the host name, so that host is the one to check.
 */
export function s3Endpoints(spec: SinkOptions['spec']): string[] {
  const s3 = spec.s3
  if (!s3) return []
  const base = s3.endpoint?.trim() || `https://s3.${s3.region?.trim() || DEFAULT_S3_REGION}.amazonaws.com`
  if (s3.pathStyle) return [base]
  try {
    const url = new URL(base)
    url.hostname = `${s3.bucket}.${url.hostname}`
    return [base, url.toString()]
  } catch {
    return [base]
  }
}
