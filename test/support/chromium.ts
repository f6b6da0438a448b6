import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'

// Debian's headless Chromium (scripts/install-deps.sh; CHROMIUM names another), driven over the
// DevTools protocol with Node's own WebSocket: no browser automation package.

interface Message {
  id?: number
  method?: string
  params?: Record<string, unknown>
  sessionId?: string
  result?: unknown
  error?: { message: string }
}

interface Evaluated {
  result: { value?: unknown }
  exceptionDetails?: { text: string; exception?: { description?: string } }
}

/** A response the page received, or a request that failed without one (status 0). */
interface Fetched { url: string; status: number }

export interface Page {
  /** Loads url, waits for the load event and for the network to stay quiet. */
  goto(url: string): Promise<void>
  /** An expression's value in the page (promises awaited), as JSON. */
  evaluate<T>(expression: string): Promise<T>
  /** Every response and failed request since the page opened. */
  readonly fetched: Fetched[]
}

export interface Browser {
  newPage(): Promise<Page>
  close(): Promise<void>
}

const QUIET_MS = 500
const TIMEOUT_MS = 30_000

export async function launchChromium(width = 1280, height = 900): Promise<Browser> {
  const profile = mkdtempSync(path.join(tmpdir(), 'kollect-chromium-'))
  const proc = spawn(process.env.CHROMIUM ?? 'chromium', [
    '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--remote-debugging-port=0',
    `--user-data-dir=${profile}`, `--window-size=${width},${height}`, 'about:blank',
  ], { stdio: ['ignore', 'ignore', 'pipe'] })
  const exited = new Promise((resolve) => {
    proc.once('exit', resolve)
    proc.once('error', resolve)
  })
  const stop = async (): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL')
    await exited
    rmSync(profile, { recursive: true, force: true, maxRetries: 3 })
  }
  try {
    const ws = new WebSocket(await devtoolsUrl(proc))
    await new Promise((resolve, reject) => {
      ws.addEventListener('open', resolve, { once: true })
      ws.addEventListener('error', () => reject(new Error('chromium: no DevTools connection')), { once: true })
    })
    return browser(ws, stop)
  } catch (err) {
    await stop()
    throw err
  }
}

/** The browser's DevTools address, which it prints on stderr once it listens. */
function devtoolsUrl(proc: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let err = ''
    const timer = setTimeout(() => reject(new Error(`chromium printed no DevTools address:\n${err}`)), TIMEOUT_MS)
    proc.once('error', (e) => {
      reject(new Error(`chromium did not start (${e.message}): run scripts/install-deps.sh, or set CHROMIUM`))
    })
    proc.once('exit', (code) => reject(new Error(`chromium exited (${code}):\n${err}`)))
    proc.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString()
      const m = /DevTools listening on (ws:\/\/\S+)/.exec(err)
      if (m?.[1]) {
        clearTimeout(timer)
        resolve(m[1])
      }
    })
  })
}

function browser(ws: WebSocket, stop: () => Promise<void>): Browser {
  let nextId = 1
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  const listeners = new Map<string, (m: Message) => void>()
  ws.addEventListener('message', (event) => {
    const m = JSON.parse(String(event.data)) as Message
    if (m.id !== undefined) {
      const p = pending.get(m.id)
      pending.delete(m.id)
      if (m.error) p?.reject(new Error(m.error.message))
      else p?.resolve(m.result)
    } else if (m.sessionId) {
      listeners.get(m.sessionId)?.(m)
    }
  })
  const send = <T>(method: string, params: Record<string, unknown> = {}, sessionId?: string): Promise<T> => {
    const id = nextId++
    ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }))
    return new Promise<T>((resolve, reject) => pending.set(id, { resolve: resolve as (v: unknown) => void, reject }))
  }

  return {
    async newPage() {
      const { targetId } = await send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' })
      const { sessionId } = await send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true })
      const network = watchNetwork()
      let loaded: (() => void) | undefined
      listeners.set(sessionId, (m) => {
        if (m.method === 'Page.loadEventFired') loaded?.()
        else network.event(m)
      })
      await send('Network.enable', {}, sessionId)
      await send('Page.enable', {}, sessionId)
      return {
        fetched: network.fetched,
        async goto(url) {
          const load = new Promise<void>((resolve) => (loaded = resolve))
          const nav = await send<{ errorText?: string }>('Page.navigate', { url }, sessionId)
          if (nav.errorText) throw new Error(`chromium: ${url}: ${nav.errorText}`)
          await withTimeout(load, `the load event of ${url}`)
          await network.quiet()
        },
        async evaluate<T>(expression: string) {
          const params = { expression, returnByValue: true, awaitPromise: true }
          const r = await send<Evaluated>('Runtime.evaluate', params, sessionId)
          const failure = r.exceptionDetails
          if (failure) throw new Error(`in the page: ${failure.exception?.description ?? failure.text}`)
          return r.result.value as T
        },
      }
    },
    async close() {
      ws.close()
      await stop()
    },
  }
}

/** A page's requests: what came back, and when none has been in flight for QUIET_MS. */
function watchNetwork() {
  const fetched: Fetched[] = []
  const urls = new Map<string, string>()
  const inFlight = new Set<string>()
  let lastEvent = Date.now()
  return {
    fetched,
    event(m: Message): void {
      const p = m.params ?? {}
      const requestId = p.requestId as string
      lastEvent = Date.now()
      if (m.method === 'Network.requestWillBeSent') {
        urls.set(requestId, (p.request as { url: string }).url)
        inFlight.add(requestId)
      } else if (m.method === 'Network.responseReceived') {
        const r = p.response as { url: string; status: number }
        fetched.push({ url: r.url, status: r.status })
      } else if (m.method === 'Network.loadingFinished') {
        inFlight.delete(requestId)
      } else if (m.method === 'Network.loadingFailed') {
        inFlight.delete(requestId)
        fetched.push({ url: urls.get(requestId) ?? '?', status: 0 })
      }
    },
    async quiet(): Promise<void> {
      const deadline = Date.now() + TIMEOUT_MS
      while (inFlight.size > 0 || Date.now() - lastEvent < QUIET_MS) {
        if (Date.now() > deadline) {
          throw new Error(`chromium: still loading ${[...inFlight].map((id) => urls.get(id)).join(', ')}`)
        }
        await new Promise((r) => setTimeout(r, 50))
      }
    },
  }
}

function withTimeout<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`chromium: timed out waiting for ${what}`)), TIMEOUT_MS)
  })
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer))
}
