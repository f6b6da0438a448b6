// A loopback round-robin HTTP proxy: what a Service does for N hooks replicas, in a few lines.
import http from 'node:http'
import type { AddressInfo } from 'node:net'

export interface RoundRobin {
  url: string
  /** Requests forwarded to each upstream, in the order given. */
  counts: number[]
  close(): Promise<void>
}

/** Forward each request to the next of `upstreams` (http://host:port), method, headers and body as sent. */
export async function roundRobinProxy(upstreams: string[]): Promise<RoundRobin> {
  const counts = upstreams.map(() => 0)
  let next = 0
  const server = http.createServer((req, res) => {
    const i = next++ % upstreams.length
    counts[i] = (counts[i] ?? 0) + 1
    const up = new URL(req.url ?? '/', upstreams[i])
    const fwd = http.request(up, { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(res)
    })
    fwd.on('error', (err) => res.writeHead(502).end(err.message))
    req.pipe(fwd)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    counts,
    close: () => new Promise((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}
