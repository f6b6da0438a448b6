import { promises as dns } from 'node:dns'
import type { ExporterClient } from '../../api/types.js'
import type { HookAuth } from '../guards/auth.js'
import type { Logger } from '../process/logger.js'
import type { Metrics } from '../process/metrics.js'
import { reportBody, roleAwareExporterClient, type HttpExporterClient, type RoleAnswer, type RoleAwareClient, type StateCall } from './client.js'

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
  /**
   * Calls a peer other than the active one may have unanswered at once; past it, that peer misses
   * the call. The hook no longer waits for such a peer, so this is what bounds the report bodies
   * held for one that hangs, as the hooks' in-flight limit did when they waited. Default 20.
   */
  maxPending?: number
  now?: () => number
}

/** Consecutive failures after which a peer is skipped for a while (a single failure may be a blip). */
export const DOWN_AFTER = 2
const BACKOFF_MIN_MS = 1000
const BACKOFF_MAX_MS = 60_000

interface Peer {
  client: RoleAwareClient
  role: 'active' | 'standby' | 'unknown'
  pending: number
  failures: number
  downUntil: number
}

/**
 * State-carrying calls go to every peer at once; the answer is the first that says it is active,
 * as soon as it comes; without one (mid-failover) any peer's once all have settled, and the call
 * fails only when every peer failed. The other peers' calls finish in the background: a standby
 * that hangs costs the hook nothing, is counted and logged when its call times out, and after
 * DOWN_AFTER failures in a row is skipped (a miss, counted) for a backoff that doubles up to 60 s.
 * Read calls go to the leader. Each peer keeps its own client, so one report is in flight per peer.
 */
export function fanOutExporterClient(deps: FanOutDeps): HttpExporterClient {
  const now = deps.now ?? Date.now
  const maxPending = deps.maxPending ?? 20
  const clients = new Map<string, Peer>()
  const peerOf = (url: string) => {
    let peer = clients.get(url)
    if (!peer) {
      peer = { client: roleAwareExporterClient(url, deps.auth, deps.timeoutMs), role: 'unknown', pending: 0, failures: 0, downUntil: 0 }
      clients.set(url, peer)
    }
    return peer
  }
  const missed = (url: string, peer: Peer, call: StateCall, error: string) => {
    deps.metrics.exporterPeerFailures.inc({ call, role: peer.role })
    // The message is the transport error or the exporter's error body, never the request's.
    deps.logger.warn({ peer: url, call, role: peer.role, error }, 'an exporter replica missed a call')
  }
  const fanOut = async <K extends StateCall>(call: K, arg: Parameters<ExporterClient[K]>[0]): Promise<Awaited<ReturnType<ExporterClient[K]>>> => {
    type Value = Awaited<ReturnType<ExporterClient[K]>>
    const urls = await deps.peers()
    if (urls.length === 0) throw new Error('KOLLECT_EXPORTER_PEERS resolved to no exporter')
    // Pods that left the peer list take their clients (and their report queues) with them.
    for (const url of clients.keys()) if (!urls.includes(url)) clients.delete(url)
    // Serialised once for every replica; a report from the extraction child is JSON already.
    const body = call === 'reportTarget' ? reportBody(arg as Parameters<ExporterClient['reportTarget']>[0]) : JSON.stringify(arg)
    const at = now()
    // Skipping every peer would fail the hook for certain: then all are tried.
    const skip = (peer: Peer) => peer.role !== 'active' && (peer.downUntil > at || peer.pending >= maxPending)
    const live = urls.filter((url) => !skip(peerOf(url)))
    for (const url of urls) if (live.length > 0 && !live.includes(url)) missed(url, peerOf(url), call, 'skipped: marked down or still busy with earlier calls')
    const calls = (live.length > 0 ? live : urls).map(async (url) => {
      const peer = peerOf(url)
      peer.pending++
      try {
        const answer = await (peer.client[call] as (a: typeof arg, body: string | Uint8Array) => Promise<RoleAnswer<Value>>)(arg, body)
        Object.assign(peer, { role: answer.role, failures: 0, downUntil: 0 })
        return answer
      } catch (err) {
        missed(url, peer, call, (err as Error).message)
        if (++peer.failures >= DOWN_AFTER) {
          const backoffMs = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** (peer.failures - DOWN_AFTER))
          peer.downUntil = now() + backoffMs
          deps.logger.warn({ peer: url, failures: peer.failures, backoffMs }, 'an exporter replica is skipped after failing calls in a row')
        }
        throw err
      } finally {
        peer.pending--
      }
    })
    return firstActive(calls)
  }
  return {
    reportTarget: (r) => fanOut('reportTarget', r),
    removeTarget: async (t) => { await fanOut('removeTarget', t) },
    applyInventory: (c) => fanOut('applyInventory', c),
    finalizeInventory: (c) => fanOut('finalizeInventory', c),
    checkSink: (s) => deps.leader.checkSink(s),
    // Every replica must hold it: a resync that sends nothing must leave no standby without the items.
    holdsReport: async (r) => {
      const urls = await deps.peers()
      const answers = await Promise.allSettled(urls.map((url) => peerOf(url).client.holdsReport(r)))
      return urls.length > 0 && answers.every((a) => a.status === 'fulfilled' && a.value)
    },
    ping: () => deps.leader.ping(),
    metrics: () => deps.leader.metrics(),
  }
}

/** The first answer from an active peer as soon as it comes; else any answer once all settled; else every error. */
function firstActive<T>(calls: Promise<RoleAnswer<T>>[]): Promise<T> {
  return new Promise((resolve, reject) => {
    const answers: RoleAnswer<T>[] = []
    const errors: string[] = []
    let left = calls.length
    const settle = () => {
      if (--left > 0) return
      if (answers[0]) resolve(answers[0].value)
      else reject(new Error(`every exporter replica failed (${calls.length}): ${errors.join('; ')}`))
    }
    for (const call of calls) {
      call.then((answer) => {
        if (answer.role === 'active') resolve(answer.value)
        answers.push(answer)
        settle()
      }, (err: unknown) => {
        errors.push((err as Error).message)
        settle()
      })
    }
  })
}
