// A hook request as Metacontroller sends it, and its answer, with nothing else loaded: the
// benchmarks' client process (bench/sync-client.ts) imports only this, so that its own heap (and
// the collections of it that ran while it sent) stays small, as a Go client's would.
import { request as httpRequest, type IncomingMessage } from 'node:http'

export interface RawResponse {
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
  json(): unknown
}

/**
 * POST as Metacontroller's Go client does: compact JSON, Content-Type application/json,
 * Content-Length, Accept-Encoding gzip, Go-http-client/1.1. Raw http, so nothing is normalised.
 */
export function post(url: string, body: string | Buffer, headers: Record<string, string> = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const data = typeof body === 'string' ? Buffer.from(body) : body
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': String(data.length), 'Accept-Encoding': 'gzip', 'User-Agent': 'Go-http-client/1.1', ...headers },
    }, (res) => {
      readResponse(res).then(resolve, reject)
    })
    req.on('error', reject)
    req.end(data)
  })
}

/** The whole response body, as text and parsed on demand. */
export function readResponse(res: IncomingMessage): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    res.on('data', (c: Buffer) => chunks.push(c))
    res.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) })
    })
    res.on('error', reject)
  })
}
