// Helpers shared by the security tests: raw HTTP that tolerates early answers, request
// builders for the hostile corpus, and an export through a real file sink.
import { readdirSync } from 'node:fs'
import { createServer, request as httpRequest } from 'node:http'
import { once } from 'node:events'
import path from 'node:path'
import type { Condition, KubeObject } from '../../api/types.js'
import { readResponse, statusOf, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { TYPES, controllerFor, deployment, loadExampleCr, relatedMap, syncRequest, targetSyncRequest } from '../support/metacontroller.js'

export const ROUTES = {
  targetSync: '/hooks/targets/sync',
  targetCustomize: '/hooks/targets/customize',
  targetFinalize: '/hooks/targets/finalize',
  inventorySync: '/hooks/inventories/sync',
  inventoryCustomize: '/hooks/inventories/customize',
  inventoryFinalize: '/hooks/inventories/finalize',
  profileSync: '/hooks/profiles/sync',
  sinkSync: '/hooks/sinks/sync',
} as const

export interface SendOptions {
  method?: string
  body?: string | Buffer
  headers?: Record<string, string>
  /** Sent verbatim as the request-target (e.g. an absolute-form URL or a percent-encoded path). */
  rawPath?: string
}

/**
 * One HTTP request over a fresh connection, as Metacontroller's Go client sends it (compact
 * JSON, Content-Type and Content-Length). Unlike a plain client it resolves with the answer even
 * when the server replies before the whole body is written (a 413 or 429 sent early).
 */
export function send(base: string, urlPath: string, options: SendOptions = {}): Promise<RawResponse> {
  const url = new URL(base)
  const data = options.body === undefined ? undefined : typeof options.body === 'string' ? Buffer.from(options.body) : options.body
  const headers: Record<string, string> = { 'User-Agent': 'Go-http-client/1.1', 'Accept-Encoding': 'gzip', Connection: 'close' }
  if (data) {
    headers['Content-Type'] = 'application/json'
    headers['Content-Length'] = String(data.length)
  }
  Object.assign(headers, options.headers ?? {})
  for (const [k, v] of Object.entries(headers)) if (v === '\u0000omit') delete headers[k]
  return new Promise((resolve, reject) => {
    let settled = false
    const req = httpRequest({ host: url.hostname, port: url.port, method: options.method ?? 'POST', path: options.rawPath ?? urlPath, headers, agent: false }, (res) => {
      readResponse(res).then((r) => {
        settled = true
        resolve(r)
      }, (err: Error) => {
        if (!settled) reject(err)
      })
    })
    // EPIPE / ECONNRESET after an early answer are expected; only fail when no answer came.
    req.on('error', (err) => setTimeout(() => {
      if (!settled) reject(err)
    }, 200))
    req.end(data)
  })
}

export interface HeldRequest {
  /** Write the rest of the body. */
  finish(): void
  /** Resolves once finish() has handed the whole body to the socket. */
  sent: Promise<void>
  /** Drop the connection mid-body, as a client that went away. */
  abort(): void
  response: Promise<RawResponse>
}

/**
 * A POST whose body is held open after its first bytes, so it stays "in flight" on the server
 * until finish(). chunked: no Content-Length, Transfer-Encoding: chunked instead.
 */
export function holdRequest(base: string, urlPath: string, body: string | Buffer, options: { chunked?: boolean; headers?: Record<string, string> } = {}): HeldRequest {
  const url = new URL(base)
  const data = typeof body === 'string' ? Buffer.from(body) : body
  const headers: Record<string, string> = { 'Content-Type': 'application/json', 'User-Agent': 'Go-http-client/1.1', Connection: 'close', ...(options.headers ?? {}) }
  if (!options.chunked) headers['Content-Length'] = String(data.length)
  let settled = false
  let req!: ReturnType<typeof httpRequest>
  const response = new Promise<RawResponse>((resolve, reject) => {
    req = httpRequest({ host: url.hostname, port: url.port, method: 'POST', path: urlPath, headers, agent: false }, (res) => {
      readResponse(res).then((r) => {
        settled = true
        resolve(r)
      }, reject)
    })
    req.on('error', (err) => setTimeout(() => {
      if (!settled) reject(err)
    }, 200))
  })
  req.flushHeaders()
  req.write(data.subarray(0, 1024))
  let finished = false
  let markSent!: () => void
  const sent = new Promise<void>((resolve) => { markSent = resolve })
  return {
    response,
    sent,
    finish: () => {
      if (finished) return
      finished = true
      if (!req.destroyed) req.end(data.subarray(1024), markSent)
    },
    abort: () => {
      finished = true
      req.destroy()
    },
  }
}

/** Sentinel for send(): drop a default header entirely. */
/** What the exporter adds to a permanent sink error's message (its maximum backoff is 60 s). */
export const PERMANENT = ' (permanent: tried again in 1m, or at once when the sink or the inventory changes)'

export const OMIT = '\u0000omit'

export { statusOf }

export function conditionOf(res: RawResponse, type: string): Condition | undefined {
  return statusOf(res).conditions?.find((c) => c.type === type)
}

export function meta(kind: string, namespace: string, name: string): KubeObject {
  return { apiVersion: 'kollect.dev/v1alpha1', kind, metadata: { name, namespace, uid: `uid-${kind}-${namespace}-${name}`, generation: 1, resourceVersion: '1' } }
}

export function scope(name: string, spec: Record<string, unknown>, namespace = 'team-a'): KubeObject {
  return { ...meta('KollectScope', namespace, name), spec }
}

export function fileSink(namespace: string, name: string, spec: Record<string, unknown> = {}): KubeObject {
  return { ...meta('KollectSink', namespace, name), spec: { type: 'file', cluster: 'lab', ...spec } }
}

/** The example profile, moved to another namespace. */
export function exampleProfile(namespace = 'team-a'): KubeObject {
  const p = loadExampleCr('profile-deployments.yaml')
  p.metadata = { ...p.metadata, namespace }
  return p
}

export function profileWith(attributes: unknown[], name = 'deployments-basic', namespace = 'team-a'): KubeObject {
  const p = loadExampleCr('profile-deployments.yaml')
  p.metadata = { ...p.metadata, name, namespace }
  p['spec'] = { attributes }
  return p
}

export function targetWith(spec: Record<string, unknown>, name = 'prod-deploys', namespace = 'team-a'): KubeObject {
  const t = loadExampleCr('target-deployments.yaml')
  t.metadata = { ...t.metadata, name, namespace, uid: `uid-target-${namespace}-${name}` }
  t['spec'] = { ...(t['spec'] as Record<string, unknown>), ...spec }
  return t
}

/** The example target and profile over Deployments web-00001 and web-00002 (both matched). */
export function goodTargetSync(): Record<string, unknown> {
  return targetSyncRequest([deployment(1), deployment(2)])
}

export interface InventoryOptions {
  name?: string
  namespace?: string
  spec?: Record<string, unknown>
  targets?: KubeObject[]
  sinks?: KubeObject[]
  scopes?: KubeObject[]
}

/** An inventory sync over the example target, with file sinks (no Git, no network). */
export function inventorySync(options: InventoryOptions = {}): Record<string, unknown> {
  const namespace = options.namespace ?? 'team-a'
  const inv = loadExampleCr('inventory.yaml')
  inv.metadata = { ...inv.metadata, name: options.name ?? 'prod-inventory', namespace, uid: `uid-inv-${namespace}-${options.name ?? 'prod-inventory'}` }
  inv['spec'] = options.spec ?? { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name: 'files' }], debounce: '2s', maxWait: '30s' }
  return syncRequest(controllerFor('kollect-inventories'), inv, relatedMap([TYPES.scope, TYPES.target, TYPES.sink], {
    [TYPES.target]: options.targets ?? [loadExampleCr('target-deployments.yaml')],
    [TYPES.sink]: options.sinks ?? [fileSink(namespace, 'files')],
    [TYPES.scope]: options.scopes ?? [],
  }))
}

export function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]))
}

export function isInside(root: string, file: string): boolean {
  const rel = path.relative(path.resolve(root), path.resolve(file))
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel)
}

/**
 * A CEL expression nesting `cel.bind` n deep, each level built from the last by `step` (by
 * default doubling it with '+'); `tail` uses the last value. Each level passes every static
 * check; the value grows 2^n times.
 */
export function doubling(n: number, seed: string, tail: (last: string) => string, step = (v: string) => `${v} + ${v}`): string {
  let expr = tail(`s${n}`)
  for (let i = n; i >= 1; i--) expr = `cel.bind(s${i}, ${step(`s${i - 1}`)}, ${expr})`
  return `cel.bind(s0, ${seed}, ${expr})`
}

const BIG = 'object.metadata.annotations.big'

/** Macro depth 2 over the `withList` annotation: 50,000 elements take minutes of CPU, little memory. */
export const QUADRATIC_CEL = `${BIG}.split(',').exists(a, ${BIG}.split(',').exists(b, a == b + 'x'))`

/** Macro depth 2 building n² two-element lists: every value within the size bounds, the heap is not. */
export const HEAP_BOMB_CEL = `${BIG}.split(',').map(a, ${BIG}.split(',').map(b, [a, b]))`

/** Deployment web-00001 with an annotation `big` listing 0..n-1, comma-separated. */
export function withList(n: number): KubeObject {
  const d = deployment(1)
  ;(d.metadata as Record<string, unknown>)['annotations'] = { big: Array.from({ length: n }, (_, i) => String(i)).join(',') }
  return d
}

/** A sync of Deployment web-00001 with withList(50,000) whose CEL attribute runs for seconds (QUADRATIC_CEL), for KollectTarget `target` in `namespace`. */
export function longSync(namespace: string, target = 'flood'): string {
  const d = withList(50_000)
  d.metadata = { ...d.metadata, namespace }
  return JSON.stringify(targetSyncRequest([d], { profile: profileWith([{ name: 'x', cel: QUADRATIC_CEL }], 'deployments-basic', namespace), target: targetWith({}, target, namespace) }))
}

/** A target sync in team-a (KollectTarget `target`) whose profile is one CEL attribute `x`. */
export function oneAttributeSync(cel: string, objects: KubeObject[] = [deployment(1)], target = 'prod-deploys'): string {
  return JSON.stringify(targetSyncRequest(objects, { profile: profileWith([{ name: 'x', cel }]), target: targetWith({}, target, 'team-a') }))
}

/** An ordinary sync of `count` Deployments for a KollectTarget in `namespace`, with the example profile. */
export function ordinarySync(namespace: string, count: number, target = 'prod-deploys'): string {
  const objects = Array.from({ length: count }, (_, i) => deployment(i, { namespace }))
  return JSON.stringify(targetSyncRequest(objects, { target: targetWith({}, target, namespace), profile: exampleProfile(namespace) }))
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** JSON text with the string "<marker>" replaced by `depth` nested arrays. */
export function nestedIn(text: string, marker: string, depth: number): string {
  return text.replace(`"${marker}"`, '['.repeat(depth) + ']'.repeat(depth))
}

export interface FileExport {
  namespace: string
  inventory: string
  target: string
  sink: string
  scopes?: KubeObject[]
}

/** An inventory sync over one target, exporting to one file sink with a 1 ms debounce. */
export function fileExportInventory(opts: FileExport): Record<string, unknown> {
  const { namespace, inventory, target, sink } = opts
  const targetObject = loadExampleCr('target-deployments.yaml')
  targetObject.metadata = { ...targetObject.metadata, namespace, name: target }
  return inventorySync({
    name: inventory,
    namespace,
    spec: { targetRefs: [{ name: target }], sinkRefs: [{ name: sink }], debounce: '1ms', maxWait: '1ms' },
    targets: [targetObject],
    sinks: [fileSink(namespace, sink)],
    scopes: opts.scopes ?? [],
  })
}

/** Wait until the exporter reports the inventory's sink Synced; returns every file under the sinks' root. */
export async function waitForExport(server: HooksServer, opts: Pick<FileExport, 'namespace' | 'inventory' | 'sink'>): Promise<string[]> {
  const { namespace, inventory, sink } = opts
  const deadline = Date.now() + 10_000
  for (;;) {
    server.exporter.flush()
    await server.exporter.idle()
    const state = server.exporter.inventoryState({ namespace, name: inventory })
    const s = state?.sinks.find((x) => x.namespace === namespace && x.name === sink)
    if (s?.state === 'Synced') break
    if (s?.state === 'Failing' || Date.now() > deadline) throw new Error(`export did not complete: ${JSON.stringify(state)}`)
    await sleep(5)
  }
  return walk(path.join(server.dataDir, 'sinks'))
}

/** Inventory sync + wait: export an already reported target through a file sink. */
export async function exportThroughFileSink(server: HooksServer, opts: FileExport): Promise<{ files: string[]; response: RawResponse }> {
  const response = await send(server.url, ROUTES.inventorySync, { body: JSON.stringify(fileExportInventory(opts)) })
  if (response.status !== 200) throw new Error(`inventory sync answered ${response.status}: ${response.text}`)
  return { files: await waitForExport(server, opts), response }
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0
}

export interface RecordingListener {
  /** http://127.0.0.1:<port> */
  url: string
  port: number
  /** TCP connections accepted, whatever the protocol (a PostgreSQL client counts too). */
  connections: number
  /** HTTP requests: method, path and the Authorization header. */
  requests: { method: string; path: string; authorization: string | undefined }[]
  reset(): void
  close(): Promise<void>
}

/**
 * A real socket on 127.0.0.1 that records who connects and what credentials arrive, and answers
 * every HTTP request with 403: the endpoint a hostile sink would point at.
 */
export async function recordingListener(): Promise<RecordingListener> {
  const server = createServer((req, res) => {
    listener.requests.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization })
    res.writeHead(403, { 'content-type': 'text/plain', connection: 'close' })
    res.end('forbidden\n')
  })
  server.on('connection', () => { listener.connections++ })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  const listener: RecordingListener = {
    url: `http://127.0.0.1:${port}`,
    port,
    connections: 0,
    requests: [],
    reset: () => {
      listener.connections = 0
      listener.requests = []
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
  return listener
}

/** object.metadata.name doubled `levels` times, by nested cel.bind. */
export function doublingCel(levels: number): string {
  return doubling(levels - 1, 'object.metadata.name', (s) => `${s} + ${s}`)
}

/**
 * A target sync of `count` minimal Deployments (name `w<tag>-<i>`, 12 characters for tags up to
 * 3 digits), with a profile of one CEL attribute: the request stays small, whatever the
 * attribute makes of each object.
 */
export function outputHeavySync(namespace: string, target: string, count: number, cel: string, annotations: Record<string, string> = {}): string {
  const objects = Array.from({ length: count }, (_, i): KubeObject => {
    const name = `w${target.slice(-3).padStart(3, '0')}-${String(i).padStart(7, '0')}`
    return { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name, namespace, uid: `uid-${namespace}-${target}-${i}`, labels: { tier: 'frontend' }, annotations } }
  })
  const profile = profileWith([{ name: 'out', cel }], 'output-heavy', namespace)
  return JSON.stringify(targetSyncRequest(objects, { target: targetWith({ profileRef: { name: 'output-heavy' }, matchPolicy: undefined }, target, namespace), profile }))
}
