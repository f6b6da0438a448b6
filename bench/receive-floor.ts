// The least any hook can cost: a plain node:http server in the hook's own process that reads a
// request body and answers `{}`. Timed from the same client as the hook, it is the time the body
// takes to arrive, which no work on the server can shorten.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface ReceiveFloor {
  url: string
  close(): Promise<void>
}

export async function startReceiveFloor(): Promise<ReceiveFloor> {
  const server: Server = createServer((req, res) => {
    req.on('data', () => undefined)
    req.on('end', () => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}'))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}
