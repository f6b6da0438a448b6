// Hostile peers for the sink clients: a TCP server that resets the connection at a chosen step
// of a protocol, a listener that only counts who reaches it, and just enough of the Kafka wire
// protocol to play a broker whose metadata sends the client elsewhere.
import net from 'node:net'
import os from 'node:os'

/** A non-loopback IPv4 address of this machine: an endpoint the SSRF guard allows with private sinks off. */
export function nonLoopbackIPv4(): string {
  const ip = Object.values(os.networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address
  if (!ip) throw new Error('these tests need a non-loopback IPv4 address on this machine')
  return ip
}

/** Where a resetting peer hangs up: at once, after the client's first bytes, or after answering them once. */
export type ResetStep = 'on connect' | 'after the first bytes' | 'mid-handshake'

export interface Peer {
  readonly host: string
  readonly port: number
  /** Connections accepted so far. */
  connections(): number
  close(): Promise<void>
}

async function listen(host: string, onSocket: (socket: net.Socket) => void): Promise<Peer> {
  let count = 0
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    count++
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => undefined)
    onSocket(socket)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host, port: 0 }, resolve)
  })
  return {
    host,
    port: (server.address() as net.AddressInfo).port,
    connections: () => count,
    close: () => {
      for (const s of sockets) s.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}

/** Accepts and holds every connection, saying nothing: only counts who came. */
export function countingListener(host = '127.0.0.1'): Promise<Peer> {
  return listen(host, () => undefined)
}

export interface Protocol {
  /** What the server says first, before the client (NATS's INFO). */
  greeting?: Buffer
  /** A plausible first answer to the client's first bytes: the step after which 'mid-handshake' resets. */
  answer(first: Buffer): Buffer
  /** The answer is a partial one the client waits to see completed (an HTTP response cut short): reset right after it. */
  cutShort?: boolean
}

/** A server that resets (TCP RST) every connection at `step` of `protocol`. */
export function resettingPeer(step: ResetStep, protocol: Protocol, host = '127.0.0.1'): Promise<Peer> {
  return listen(host, (socket) => {
    if (step === 'on connect') return void socket.resetAndDestroy()
    if (protocol.greeting && step === 'mid-handshake') socket.write(protocol.greeting)
    let answered = false
    socket.on('data', (chunk) => {
      if (step === 'mid-handshake' && !answered) {
        answered = true
        socket.write(protocol.answer(chunk), () => {
          if (protocol.cutShort) socket.resetAndDestroy()
        })
        return
      }
      socket.resetAndDestroy()
    })
    // A client that waits for the server to speak first has sent nothing yet: its first bytes are
    // the answer to the greeting, so 'after the first bytes' sends the greeting too.
    if (protocol.greeting && step === 'after the first bytes') socket.write(protocol.greeting)
  })
}

/** HTTP (S3, git's smart HTTP, a forge API): the request, then the start of a response that never ends. */
export const HTTP: Protocol = {
  answer: () => Buffer.from('HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: 4096\r\n\r\n<?xml version="1.0"'),
  cutShort: true,
}

/** PostgreSQL: the startup message, then a request for a cleartext password; the password is answered with a reset. */
export const POSTGRES: Protocol = {
  answer: () => Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3]),
}

/** NATS: the server's INFO first; the client's CONNECT and PING are answered with PONG, what follows with a reset. */
export const NATS: Protocol = {
  greeting: Buffer.from(`INFO ${JSON.stringify({ server_id: 'hostile', version: '2.10.0', go: 'go1.22', host: '0.0.0.0', port: 4222, headers: true, max_payload: 1048576, proto: 1 })}\r\n`),
  answer: () => Buffer.from('PONG\r\n'),
}

// --- Kafka ---------------------------------------------------------------------------------

const API_VERSIONS = 18
const METADATA = 3
const FIND_COORDINATOR = 10
const SASL_HANDSHAKE = 17

interface KafkaRequest {
  apiKey: number
  apiVersion: number
  correlationId: number
}

/** Whole requests from a byte stream (each is an int32 size, then the header). */
function kafkaRequests(onRequest: (req: KafkaRequest) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0)
  return (chunk) => {
    pending = Buffer.concat([pending, chunk])
    while (pending.length >= 4 && pending.length >= 4 + pending.readInt32BE(0)) {
      const size = pending.readInt32BE(0)
      onRequest({ apiKey: pending.readInt16BE(4), apiVersion: pending.readInt16BE(6), correlationId: pending.readInt32BE(8) })
      pending = pending.subarray(4 + size)
    }
  }
}

const i16 = (n: number) => Buffer.from([(n >> 8) & 255, n & 255])
const i32 = (n: number) => {
  const b = Buffer.alloc(4)
  b.writeInt32BE(n)
  return b
}
const str = (s: string) => Buffer.concat([i16(Buffer.byteLength(s)), Buffer.from(s)])
const frame = (correlationId: number, ...body: Buffer[]) => {
  const payload = Buffer.concat([i32(correlationId), ...body])
  return Buffer.concat([i32(payload.length), payload])
}

/** The APIs the fake broker speaks, each at one version: the client picks that one. */
const APIS: [key: number, version: number][] = [[METADATA, 1], [FIND_COORDINATOR, 1], [SASL_HANDSHAKE, 1]]

/** ApiVersions, in the v3 layout the client asks with first, or the v0..v2 layout of the SASL path. */
function apiVersionsResponse(req: KafkaRequest): Buffer {
  if (req.apiVersion >= 3) {
    // Compact array: its length + 1 as an unsigned varint (one byte here), and empty tagged fields.
    const apis = APIS.map(([key, v]) => Buffer.concat([i16(key), i16(v), i16(v), Buffer.from([0])]))
    return frame(req.correlationId, i16(0), Buffer.from([APIS.length + 1]), ...apis, i32(0), Buffer.from([0]))
  }
  const apis = APIS.map(([key, v]) => Buffer.concat([i16(key), i16(v), i16(v)]))
  return frame(req.correlationId, i16(0), i32(APIS.length), ...apis, ...(req.apiVersion >= 1 ? [i32(0)] : []))
}

/** Metadata v1: one broker (node 1) where `at` says, leader of one partition of each topic. */
function metadataResponse(req: KafkaRequest, at: { host: string; port: number }, topics: readonly string[]): Buffer {
  const broker = Buffer.concat([i32(1), str(at.host), i32(at.port), i16(-1)])
  const partition = Buffer.concat([i16(0), i32(0), i32(1), i32(1), i32(1), i32(1), i32(1)])
  const topic = (name: string) => Buffer.concat([i16(0), str(name), Buffer.from([0]), i32(1), partition])
  return frame(req.correlationId, i32(1), broker, i32(1), i32(topics.length), ...topics.map(topic))
}

/** FindCoordinator v1: node 1 coordinates everything. */
function findCoordinatorResponse(req: KafkaRequest, at: { host: string; port: number }): Buffer {
  return frame(req.correlationId, i32(0), i16(0), i16(-1), i32(1), str(at.host), i32(at.port))
}

/** Kafka for resettingPeer: a real ApiVersions answer, the first request of every client (and of SASL). */
export const KAFKA: Protocol = {
  answer: (first) => {
    let out: Buffer = Buffer.alloc(0)
    kafkaRequests((req) => {
      out = apiVersionsResponse(req)
    })(first)
    return out
  },
}

export interface FakeBroker extends Peer {
  /** Metadata requests answered so far. */
  metadataAnswers(): number
}

/**
 * A broker that knows ApiVersions, Metadata and FindCoordinator, and says node 1 is itself in
 * its first metadata answer and `later` in every answer after that: what a hostile or
 * compromised cluster can do at any time. Any other request is left unanswered.
 */
export async function fakeKafkaBroker(host: string, later: { host: string; port: number }, topics: readonly string[]): Promise<FakeBroker> {
  let answers = 0
  let self = { host, port: 0 }
  const peer = await listen(host, (socket) => {
    socket.on('data', kafkaRequests((req) => {
      const at = answers === 0 ? self : later
      if (req.apiKey === API_VERSIONS) socket.write(apiVersionsResponse(req))
      else if (req.apiKey === METADATA) socket.write(metadataResponse(req, answers++ === 0 ? self : later, topics))
      else if (req.apiKey === FIND_COORDINATOR) socket.write(findCoordinatorResponse(req, at))
    }))
  })
  self = { host, port: peer.port }
  return { ...peer, metadataAnswers: () => answers }
}
