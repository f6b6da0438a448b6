import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3'
import { canConnect, freePort } from './ports.js'
import { pollUntil, startServerProcess, waitForExit, type ServerProcess } from './process.js'
import { requireTool } from './tools.js'

/** The root credentials the test server is started with. */
const S3_ACCESS_KEY = 'kollect-test-access'
const S3_SECRET_KEY = 'kollect-test-secret-0123456789'
const S3_REGION = 'us-east-1'

export interface S3Server {
  /** http://127.0.0.1:port */
  readonly endpoint: string
  readonly port: number
  readonly bucket: string
  /** What a sink's secret holds for this server. */
  readonly credentials: Record<string, string>
  /** A client with the root credentials, for tests to look at the bucket. */
  readonly client: S3Client
  /** Stop the server (SIGTERM); the bucket stays on disk. */
  stop(): Promise<void>
  /** Start again on the same port and directory. */
  start(): Promise<void>
  /** Stop and delete the directory. */
  destroy(): Promise<void>
}

/**
 * versitygw (built by scripts/install-versitygw.sh) with its posix backend in a temp directory,
 * on a loopback port, with one bucket created. Fails loudly when it cannot start.
 */
export async function startS3(opts: { bucket?: string } = {}): Promise<S3Server> {
  const command = requireTool('install-versitygw.sh', 'VERSITYGW')
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-s3-'))
  const dataDir = path.join(root, 'data')
  mkdirSync(dataDir)
  const logFile = path.join(root, 'versitygw.log')
  const port = await freePort()
  const endpoint = `http://127.0.0.1:${port}`
  const bucket = opts.bucket ?? 'kollect-test'
  let proc: ServerProcess | undefined

  const start = async (): Promise<void> => {
    if (proc && !proc.hasExited()) throw new Error('versitygw is already running')
    proc = startServerProcess(
      command,
      ['--access', S3_ACCESS_KEY, '--secret', S3_SECRET_KEY, '--port', `127.0.0.1:${port}`, 'posix', dataDir],
      logFile,
    )
    await pollUntil(`versitygw on port ${port}`, () => canConnect(port), { timeoutMs: 20_000, proc })
  }
  const stop = async (): Promise<void> => {
    if (!proc || proc.hasExited()) return
    proc.signalGroup('SIGTERM')
    await waitForExit(proc, 10_000)
  }

  const client = new S3Client({
    endpoint,
    region: S3_REGION,
    forcePathStyle: true,
    credentials: { accessKeyId: S3_ACCESS_KEY, secretAccessKey: S3_SECRET_KEY },
  })
  try {
    await start()
    await client.send(new CreateBucketCommand({ Bucket: bucket }))
  } catch (err) {
    client.destroy()
    await stop()
    rmSync(root, { recursive: true, force: true })
    throw err
  }

  return {
    endpoint,
    port,
    bucket,
    credentials: { accessKeyId: S3_ACCESS_KEY, secretAccessKey: S3_SECRET_KEY },
    client,
    start,
    stop,
    async destroy(): Promise<void> {
      client.destroy()
      await stop()
      rmSync(root, { recursive: true, force: true })
    },
  }
}

interface S3Request {
  method: string
  /** The object key (path-style: the path after the bucket), decoded. */
  key: string
  /** The server's answer, once it came. */
  status?: number
}

export interface CountingProxy {
  /** http://127.0.0.1:port: give it to a sink instead of the server's endpoint. */
  readonly endpoint: string
  /** Every request forwarded so far, in arrival order. */
  readonly requests: S3Request[]
  /** PUTs of object keys under `prefix` since `from` (an index into requests). */
  puts(prefix: string, from?: number): string[]
  /**
   * The next request that `matches` waits before it is forwarded; resolves (with a release
   * function) once it arrived. Lets a test put another writer between a read and a write.
   */
  hold(matches: (r: S3Request) => boolean): Promise<() => void>
  close(): Promise<void>
}

/**
 * A pass-through HTTP proxy in front of the real server that records what a sink asked for, so a
 * test can say "exactly one object was written". Headers go through untouched: the Host header
 * is part of the SigV4 signature and still names what the client signed.
 */
export async function countingProxy(target: S3Server): Promise<CountingProxy> {
  const requests: S3Request[] = []
  const holds: { matches: (r: S3Request) => boolean; arrived: (release: () => void) => void }[] = []
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy')
    const parts = url.pathname.split('/').slice(2)
    const request: S3Request = { method: req.method ?? '', key: parts.map((p) => decodeURIComponent(p)).join('/') }
    requests.push(request)
    const forward = (): void => {
      const upstream = http.request(
        { host: '127.0.0.1', port: target.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          request.status = up.statusCode
          res.writeHead(up.statusCode ?? 502, up.headers)
          up.pipe(res)
        },
      )
      upstream.on('error', () => res.destroy())
      req.pipe(upstream)
    }
    const held = holds.findIndex((h) => h.matches(request))
    if (held < 0) return forward()
    req.pause()
    const [h] = holds.splice(held, 1)
    h?.arrived(forward)
  })
  const port = await freePort()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve())
  })
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    hold: (matches) => new Promise((arrived) => holds.push({ matches, arrived })),
    puts: (prefix, from = 0) => requests.slice(from).filter((r) => r.method === 'PUT' && r.key.startsWith(prefix)).map((r) => r.key),
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

/** Every key under `prefix` in the test bucket, sorted, across pages. */
export async function listKeys(s3: S3Server, prefix: string): Promise<string[]> {
  const keys: string[] = []
  let token: string | undefined
  do {
    const page = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix, ContinuationToken: token }))
    for (const o of page.Contents ?? []) keys.push(o.Key as string)
    token = page.IsTruncated ? page.NextContinuationToken : undefined
  } while (token)
  return keys.sort()
}

/** One object's body as text. */
export async function readText(s3: S3Server, key: string): Promise<string> {
  const out = await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }))
  return out.Body!.transformToString('utf8')
}
