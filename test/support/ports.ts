import net from 'node:net'

// Ports handed out by this process; the OS may offer a just-closed port again before the
// server we hand it to has bound it, and two servers started back to back must not share one.
const handedOut = new Set<number>()

function ephemeralPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no port assigned'))))
    })
  })
}

/** A loopback TCP port that was free a moment ago and has not been handed out before. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await ephemeralPort()
    if (!handedOut.has(port)) {
      handedOut.add(port)
      return port
    }
  }
  throw new Error('could not find a free loopback port')
}

/** Resolves true once something accepts TCP connections on host:port. */
export function canConnect(port: number, timeoutMs = 500, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port })
    const done = (ok: boolean): void => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}
