import { mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { freePort } from './ports.js'
import { pollUntil, startServerProcess, waitForExit, type ServerProcess } from './process.js'

export interface NatsServer {
  /** nats://127.0.0.1:port */
  readonly url: string
  readonly port: number
  readonly storeDir: string
  /** Graceful shutdown (SIGTERM); JetStream state stays in storeDir. */
  stop(): Promise<void>
  /** Start again with the same port and JetStream store. */
  start(): Promise<void>
  /** Stop and delete the store. */
  destroy(): Promise<void>
}

// A TCP accept is not enough: the server greets with INFO only once it serves clients, and
// JetStream (including stream recovery after a restart) is enabled before it starts accepting.
function greets(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    let buffered = ''
    const done = (ok: boolean): void => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1000, () => done(false))
    socket.on('data', (d: Buffer) => {
      buffered += d.toString()
      if (buffered.startsWith('INFO ')) done(true)
    })
    socket.once('error', () => done(false))
    socket.once('close', () => done(false))
  })
}

export async function startNats(opts: { args?: string[] } = {}): Promise<NatsServer> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-nats-'))
  const storeDir = path.join(root, 'jetstream')
  const logFile = path.join(root, 'nats.log')
  const port = await freePort()
  const command = process.env.NATS_SERVER ?? 'nats-server'
  let proc: ServerProcess | undefined

  const start = async (): Promise<void> => {
    if (proc && !proc.hasExited()) throw new Error('nats-server is already running')
    proc = startServerProcess(
      command,
      ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', storeDir, ...(opts.args ?? [])],
      logFile,
    )
    await pollUntil(`nats-server on port ${port}`, () => greets(port), { timeoutMs: 20_000, proc })
  }

  const stop = async (): Promise<void> => {
    if (!proc || proc.hasExited()) return
    proc.signalGroup('SIGTERM')
    await waitForExit(proc, 10_000)
  }

  try {
    await start()
  } catch (err) {
    await stop()
    rmSync(root, { recursive: true, force: true })
    throw err
  }

  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    start,
    stop,
    async destroy(): Promise<void> {
      await stop()
      rmSync(root, { recursive: true, force: true })
    },
  }
}
