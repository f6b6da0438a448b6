import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3'
import { forEachBounded } from '../concurrency.js'
import { bounded, errorChain, isTransientNetworkError } from '../errors.js'
import type { S3Settings } from './config.js'
import { boundErrorBodies } from './error-body.js'

/** Another writer changed the pointer since we read it (HTTP 412 on a conditional write). */
export class PointerMoved extends Error {
  constructor() {
    super('the latest pointer was changed by another writer')
    this.name = 'PointerMoved'
  }
}

export type PointerRead =
  | { state: 'unchanged' }
  | { state: 'absent' }
  | { state: 'found'; etag: string; text: string }

/** The condition a pointer write carries: the ETag it replaces, or none (create only). */
export type PointerCondition = { ifMatch: string } | { ifNoneMatch: '*' }

function status(err: unknown): number | undefined {
  for (const e of errorChain(err)) {
    const code = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode
    if (typeof code === 'number') return code
  }
  return undefined
}

// Only a missing key is "absent": some servers answer an unknown access key with a 404 too.
function isNoSuchKey(err: unknown): boolean {
  return status(err) === 404 && err instanceof Error && (err.name === 'NoSuchKey' || err.name === 'NotFound')
}

// Error codes that mean the keys are wrong or lack a permission (versitygw says XAdminUserNotFound, with a 404).
const CREDENTIAL_ERRORS = /^(InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|InvalidToken|ExpiredToken|XAdminUserNotFound|AllAccessDisabled)$/

const RETRIABLE_NAMES = new Set(['TimeoutError', 'RequestTimeout', 'RequestTimeoutException', 'SlowDown', 'ServiceUnavailable', 'InternalError', 'AbortError'])

/**
 * Retriable: the network, a timeout, throttling and server errors. Permanent: every other 4xx
 * (denied, wrong keys, no such bucket), which only a change of the sink or its secret can fix.
 */
export function isRetriable(err: unknown): boolean {
  if (err instanceof PointerMoved || isTransientNetworkError(err)) return true
  if (errorChain(err).some((e) => e instanceof Error && RETRIABLE_NAMES.has(e.name))) return true
  const code = status(err)
  if (code === undefined) return true
  return code >= 500 || code === 429 || code === 408
}

/**
 * An S3 error as one line for a status message: the server's code and HTTP status, which say what
 * to fix. Both code and message are the server's own text, so they are bounded here already.
 */
function describeS3Error(err: unknown): string {
  if (err instanceof S3ServiceException) {
    const code = err.$metadata.httpStatusCode
    const name = bounded(err.name)
    const hint = code === 401 || code === 403 || CREDENTIAL_ERRORS.test(name) ? ' (check the keys in the sink secret and their permissions on the bucket)' : ''
    return `${name} (HTTP ${code ?? '?'})${err.message && err.message !== err.name && err.message !== 'UnknownError' ? `: ${bounded(err.message)}` : ''}${hint}`
  }
  return err instanceof Error ? err.message || err.name : String(err)
}

class S3RequestError extends Error {
  constructor(what: string, cause: unknown) {
    super(`${what}: ${describeS3Error(cause)}`, { cause })
    this.name = 'S3RequestError'
  }
}

/** I/O only: objects in one bucket. Every failure names the request, with the cause kept for classification. */
export class S3Service {
  private readonly client: S3Client

  constructor(private readonly settings: S3Settings) {
    this.client = new S3Client({
      region: settings.region,
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      forcePathStyle: settings.pathStyle,
      // Its HTTP handler follows no redirect; a region redirect would send the request where a
      // response header says, past the SSRF guard. Off by default: kept off whatever the default becomes.
      followRegionRedirects: false,
      credentials: settings.credentials,
      // The exporter backs off and retries a failed export; one retry here covers a dropped connection.
      maxAttempts: 2,
      requestHandler: { connectionTimeout: settings.connectTimeoutMillis, requestTimeout: settings.requestTimeoutMillis },
      // Checksum headers only where S3 requires them: GCS and older S3-compatible servers refuse the CRC32 ones.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    })
    boundErrorBodies(this.client)
  }

  /** The pointer, or 'unchanged' when it still has ETag `known` (HTTP 304). */
  async readPointer(key: string, known: string | undefined): Promise<PointerRead> {
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: key, ...(known ? { IfNoneMatch: known } : {}) }))
      return { state: 'found', etag: out.ETag ?? '', text: (await out.Body?.transformToString('utf8')) ?? '' }
    } catch (err) {
      const code = status(err)
      if (code === 304) return { state: 'unchanged' }
      if (isNoSuchKey(err)) return { state: 'absent' }
      throw new S3RequestError(`GET ${key}`, err)
    }
  }

  /** An object's text, or undefined when it does not exist. */
  async getText(key: string): Promise<string | undefined> {
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: key }))
      return (await out.Body?.transformToString('utf8')) ?? ''
    } catch (err) {
      if (isNoSuchKey(err)) return undefined
      throw new S3RequestError(`GET ${key}`, err)
    }
  }

  /** Put the pointer only if it is still what we read; returns the new ETag. */
  async putPointer(key: string, body: string, condition: PointerCondition): Promise<string> {
    const cond = 'ifMatch' in condition ? { IfMatch: condition.ifMatch } : { IfNoneMatch: condition.ifNoneMatch }
    try {
      const out = await this.client.send(new PutObjectCommand({ ...this.object(key, body), ...cond }))
      return out.ETag ?? ''
    } catch (err) {
      // 409: a conditional write raced another one on the same key (AWS answers so under contention).
      const code = status(err)
      if (code === 412 || code === 409) throw new PointerMoved()
      throw new S3RequestError(`PUT ${key}`, err)
    }
  }

  async putObject(key: string, body: string): Promise<void> {
    try {
      await this.client.send(new PutObjectCommand(this.object(key, body)))
    } catch (err) {
      throw new S3RequestError(`PUT ${key}`, err)
    }
  }

  async putObjects(objects: ReadonlyMap<string, string>): Promise<void> {
    await forEachBounded([...objects], this.settings.window, ([key, body]) => this.putObject(key, body))
  }

  async deleteObjects(keys: readonly string[]): Promise<void> {
    // One request per key: GCS's XML API has no multi-object delete. A key given twice (a writer's
    // own mark left by an interrupted attempt is also a stale mark) is deleted once.
    await forEachBounded([...new Set(keys)], this.settings.window, async (key) => {
      try {
        await this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: key }))
      } catch (err) {
        // Gone already is what a delete wants: AWS answers 204 for it, versitygw 404 NoSuchKey
        // (when another delete removed the object between its check and its unlink).
        if (isNoSuchKey(err)) return
        throw new S3RequestError(`DELETE ${key}`, err)
      }
    })
  }

  /** Every object under `prefix` (which ends in "/"), key → ETag. */
  async list(prefix: string): Promise<Map<string, string>> {
    return new Map((await this.listing(prefix)).map((o) => [o.key, o.etag]))
  }

  /** Every object under `prefix` (which ends in "/"), key → when the server last wrote it. */
  async listModified(prefix: string): Promise<Map<string, Date>> {
    return new Map((await this.listing(prefix)).map((o) => [o.key, o.modified]))
  }

  private async listing(prefix: string): Promise<{ key: string; etag: string; modified: Date }[]> {
    const out: { key: string; etag: string; modified: Date }[] = []
    let token: string | undefined
    do {
      let page
      try {
        page = await this.client.send(new ListObjectsV2Command({ Bucket: this.settings.bucket, Prefix: prefix, ContinuationToken: token }))
      } catch (err) {
        throw new S3RequestError(`LIST ${prefix}`, err)
      }
      for (const o of page.Contents ?? []) if (o.Key) out.push({ key: o.Key, etag: o.ETag ?? '', modified: o.LastModified ?? new Date(0) })
      token = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (token)
    return out
  }

  /** A one-key listing rather than HEAD: the sink needs to list, and a HEAD error has no body to say why. */
  async ping(): Promise<void> {
    try {
      await this.client.send(new ListObjectsV2Command({ Bucket: this.settings.bucket, MaxKeys: 1 }))
    } catch (err) {
      throw new S3RequestError(`LIST bucket ${this.settings.bucket}`, err)
    }
  }

  close(): void {
    this.client.destroy()
  }

  private object(key: string, body: string) {
    return { Bucket: this.settings.bucket, Key: key, Body: body, ContentType: 'application/json' }
  }
}
