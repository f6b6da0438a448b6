import { promises as dns } from 'node:dns'
import type { ExporterClient } from '../api/types.js'
import type { HookAuth } from './auth.js'
import { roleAwareExporterClient, type HttpExporterClient, type RoleAnswer, type RoleAwareClient, type StateCall } from './exporter-app.js'
import type { Logger } from './logger.js'
import type { Metrics } from './metrics.js'

// KOLLECT_EXPORTER_PEERS (docs/design.md, Topology): a standby exporter takes over with the
// state only if it got every report, and a Service delivers each call to one ready pod. So the
// hooks send the state-carrying calls to every replica and answer with the active one's result.

export interface PeerAddress { host: string; port: number }

/** `host:port[,host:port...]`; a host may be a name (a headless Service) or an IP literal. */
export function parsePeers(spec: string): PeerAddress[] {
  const peers = spec.split(',').map((s) => s.trim()).filter(Boolean).map((entry) => {
    const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(entry)
    const port = Number(m?.[2])
    if (!m || !(port > 0 && port < 65536)) throw new Error(`KOLLECT_EXPORTER_PEERS entries must be host:port, got ${JSON.stringify(entry)}`)
    return { host: m[1]!.replace(/^\[|\]$/g, ''), port }
  })
  if (peers.length === 0) throw new Error('KOLLECT_EXPORTER_PEERS is set but names no host:port')
  return peers
}

export type Lookup = (host: string) => Promise<string[]>

const lookupAll: Lookup = async (host) => (await dns.lookup(host, { all: true })).map((a) => a.address)

/**
 * The peers' base URLs. Names are resolved on every call, at most once per `cacheMs`: a headless
 * Service's answer changes as exporter pods come and go. A failed lookup keeps the last answer.
 */
export function peerUrls(peers: PeerAddress[], cacheMs = 3000, lookup: Lookup = lookupAll, now = Date.now): () => Promise<string[]> {
  let cached: { urls: string[]; at: number } | null = null
  let resolving: Promise<string[]> | null = null
  const resolve = async () => {
    const lists = await Promise.all(peers.map(async (p) => (await lookup(p.host)).map((ip) => `http://${ip.includes(':') ? `[${ip}]` : ip}:${p.port}`)))
    return [...new Set(lists.flat())]
  }
  return async () => {
    if (cached && now() - cached.at < cacheMs) return cached.urls
    resolving ??= resolve().then(
      (urls) => { cached = { urls, at: now() }; return urls },
      (err: unknown) => { if (cached) return cached.urls; throw err },
    ).finally(() => { resolving = null })
    return resolving
  }
}

export interface FanOutDeps {
  /** KOLLECT_EXPORTER_URL: the Service that routes to the ready (active) exporter only. */
  leader: HttpExporterClient
  peers: () => Promise<string[]>
  auth: HookAuth
  logger: Logger
  metrics: Metrics
  timeoutMs?: number
}

/**
 * State-carrying calls go to every peer at once; the answer is the first peer's that says it is
 * active, else (mid-failover) any peer's, and the call fails only when every peer failed. Read
 * calls go to the leader. Each peer keeps its own client, so one report is in flight per peer.
 */
export function fanOutExporterClient(deps: FanOutDeps): HttpExporterClient {
  const clients = new Map<string, { client: RoleAwareClient; role: 'active' | 'standby' | 'unknown' }>()
  const peerClient = (url: string) => {
    let peer = clients.get(url)
    if (!peer) clients.set(url, peer = { client: roleAwareExporterClient(url, deps.auth, deps.timeoutMs), role: 'unknown' })
    return peer
  }
  const fanOut = async <K extends StateCall>(call: K, arg: Parameters<ExporterClient[K]>[0]): Promise<Awaited<ReturnType<ExporterClient[K]>>> => {
    const urls = await deps.peers()
    if (urls.length === 0) throw new Error('KOLLECT_EXPORTER_PEERS resolved to no exporter')
    // Pods that left the peer list take their clients (and their report queues) with them.
    for (const url of clients.keys()) if (!urls.includes(url)) clients.delete(url)
    const body = JSON.stringify(arg)
    const settled = await Promise.allSettled(urls.map(async (url) => {
      const peer = peerClient(url)
      try {
        const answer = await (peer.client[call] as (a: typeof arg, body: string) => Promise<RoleAnswer<Awaited<ReturnType<ExporterClient[K]>>>>)(arg, body)
        peer.role = answer.role
        return answer
      } catch (err) {
        deps.metrics.exporterPeerFailures.inc({ call, role: peer.role })
        // The message is the transport error or the exporter's error body, never the request's.
        deps.logger.warn({ peer: url, call, role: peer.role, error: (err as Error).message }, 'an exporter replica missed a call')
        throw err
      }
    }))
    const answers = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []))
    const chosen = answers.find((a) => a.role === 'active') ?? answers[0]
    if (chosen) return chosen.value
    const errors = settled.map((s) => (s.status === 'rejected' ? (s.reason as Error).message : ''))
    throw new Error(`every exporter replica failed (${urls.length}): ${errors.join('; ')}`)
  }
  return {
    reportTarget: (r) => fanOut('reportTarget', r),
    removeTarget: async (t) => { await fanOut('removeTarget', t) },
    applyInventory: (c) => fanOut('applyInventory', c),
    finalizeInventory: (c) => fanOut('finalizeInventory', c),
    checkSink: (s) => deps.leader.checkSink(s),
    ping: () => deps.leader.ping(),
    metrics: () => deps.leader.metrics(),
  }
}
