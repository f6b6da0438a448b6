// The benchmarks' Metacontroller: a process of its own that sends a hook request and times it
// from the first byte sent to the last byte of the answer. In the benchmark's own process the
// client and the server shared one event loop: sending a 25 MiB body took the server's time,
// and building the next body blocked the server past its keep-alive, which reset the socket
// (the ECONNRESET of the 50k round, issue 28). The body travels through a file, read before the
// clock starts. It loads nothing but the request (test/support/http-post.ts): importing it from
// the hooks server's test support loaded the whole server, and collecting that 45 MB heap at
// every send took the CPU the server needed for the body (0.2 of the incremental baseline).
import { fork, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { post } from '../test/support/http-post.js'

interface Ask { id: number; url: string; file: string; token?: string }
interface Answer { id: number; ms: number; status: number; text: string; error?: string }

export interface SyncClient {
  /** The answer and the client's wall time for it; token: the hooks' bearer token. */
  post(url: string, body: Buffer, token?: string): Promise<Answer>
  close(): void
}

export function startSyncClient(): SyncClient {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-sync-client-'))
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting = new Map<number, { answered(a: Answer): void; failed(err: Error): void }>()
  child.on('message', (a: Answer) => waiting.get(a.id)?.answered(a))
  child.on('exit', (code) => {
    for (const w of waiting.values()) w.failed(new Error(`the sync client exited (${code})`))
  })
  let next = 0
  return {
    post: (url, body, token) => {
      const id = ++next
      const file = path.join(dir, `${id}.json`)
      writeFileSync(file, body)
      return new Promise<Answer>((resolve, reject) => {
        const done = () => {
          waiting.delete(id)
          rmSync(file, { force: true })
        }
        waiting.set(id, {
          answered: (a) => {
            done()
            if (a.error) reject(new Error(a.error))
            else resolve(a)
          },
          failed: (err) => {
            done()
            reject(err)
          },
        })
        child.send({ id, url, file, ...(token ? { token } : {}) } satisfies Ask)
      })
    },
    close: () => {
      child.kill()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) {
  process.on('message', (ask: Ask) => {
    const body = readFileSync(ask.file)
    const start = performance.now()
    // As Metacontroller's Go client sends it (test/support/hooks-server.ts), on a connection of its own.
    post(ask.url, body, { Connection: 'close', ...(ask.token ? { Authorization: `Bearer ${ask.token}` } : {}) }).then(
      ({ status, text }) => process.send?.({ id: ask.id, ms: performance.now() - start, status, text } satisfies Answer),
      (err: Error) => process.send?.({ id: ask.id, ms: 0, status: 0, text: '', error: `${(err as NodeJS.ErrnoException).code ?? ''} ${err.message}` } satisfies Answer),
    )
  })
  process.on('disconnect', () => process.exit(0))
}
