// Kollect as its own OS process (`npm start`'s entry point: hooks and exporter in one process),
// for tests whose finding is about the process itself: a crash, its memory, its fairness; and
// the pod's two containers as two processes, for the end-to-end tests.
import assert from 'node:assert/strict'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { InventoryStatus } from '../../api/types.js'
import { get, post, type AnyStatus } from './hooks-server.js'
import { ROOT } from './metacontroller.js'
import { freePort } from './ports.js'
import { pollUntil, startServerProcess, waitForExit, type ServerProcess } from './process.js'
import { roundRobinProxy, type RoundRobin } from './round-robin.js'

export interface KollectProcess {
  url: string
  proc: ServerProcess
  dataDir: string
  /** Resident memory of the server and every process it started (extraction children), in bytes. */
  rssBytes(): number
  /** Resident memory of each process of the group by pid: the server and its extraction children. */
  rssByPid(): Map<number, number>
  /** Process ids of the server's extraction child processes. */
  extractionPids(): number[]
  close(): Promise<void>
}

/** Start dist/server/main-dev.js on a free loopback port; resolves once /healthz answers. */
export async function startKollectProcess(env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<KollectProcess> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'kollect-proc-'))
  const port = await freePort()
  const proc = startServerProcess(process.execPath, [...nodeArgs, path.join(ROOT, 'dist/server/main-dev.js')], path.join(dataDir, 'server.log'), {
    ...process.env,
    KOLLECT_DATA_DIR: path.join(dataDir, 'data'),
    KOLLECT_LOG_LEVEL: 'warn',
    ...env,
    PORT: String(port),
  })
  const url = `http://127.0.0.1:${port}`
  try {
    await pollUntil('kollect /healthz', async () => (await get(`${url}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 20_000, proc })
  } catch (err) {
    proc.signalGroup('SIGKILL')
    throw err
  }
  return {
    url,
    proc,
    dataDir,
    rssBytes: () => groupRss(proc.child.pid ?? 0),
    rssByPid: () => groupRssByPid(proc.child.pid ?? 0),
    extractionPids: () => childPids(proc.child.pid ?? 0, 'extraction/child.js'),
    close: async () => {
      proc.signalGroup('SIGTERM')
      await waitForExit(proc, 10_000)
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** The pids of `ppid`'s children whose command line contains `match` (Linux /proc). */
function childPids(ppid: number, match: string): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== ppid) continue
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(match)) pids.push(Number(entry))
    } catch {
      // the process ended between readdir and read
    }
  }
  return pids.sort((a, b) => a - b)
}

/** VmRSS of each process of a process group, by pid (Linux /proc). */
function groupRssByPid(pgid: number): Map<number, number> {
  const rss = new Map<number, number>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      // Fields after the parenthesised command: state ppid pgrp …
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(fields[2]) !== pgid) continue
      const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${entry}/status`, 'utf8'))
      if (kb) rss.set(Number(entry), Number(kb[1]) * 1024)
    } catch {
      // the process ended between readdir and read
    }
  }
  return rss
}

/** Sum of VmRSS over the processes of a process group. */
export function groupRss(pgid: number): number {
  let total = 0
  for (const bytes of groupRssByPid(pgid).values()) total += bytes
  return total
}

/** The process entry points: `npm start`, the pod's two containers, and hub mode. */
export type Entry = 'main-dev' | 'main-hooks' | 'main-exporter' | 'main-hub'

export interface EntryProcess {
  proc: ServerProcess
  /** The hooks' PORT and the exporter's KOLLECT_EXPORTER_PORT, both free loopback ports. */
  port: number
  exporterPort: number
  /** Everything the process printed so far (pino JSON lines). */
  output(): string
  close(): Promise<void>
}

/**
 * Start an entry point with a clean environment: PATH, HOME, a fresh data dir, free ports,
 * log level info, then `env`. Nothing is awaited: the caller waits for an exit or a listener.
 */
export async function spawnEntry(entry: Entry, env: Record<string, string> = {}): Promise<EntryProcess> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `kollect-${entry}-`))
  const [port, exporterPort] = [await freePort(), await freePort()]
  const log = path.join(dataDir, 'output.log')
  const proc = startServerProcess(process.execPath, [path.join(ROOT, `dist/server/${entry}.js`)], log, {
    PATH: process.env['PATH'],
    HOME: process.env['HOME'],
    KOLLECT_DATA_DIR: path.join(dataDir, 'data'),
    PORT: String(port),
    KOLLECT_EXPORTER_PORT: String(exporterPort),
    KOLLECT_LOG_LEVEL: 'info',
    ...env,
  })
  return {
    proc,
    port,
    exporterPort,
    output: () => {
      try {
        return readFileSync(log, 'utf8')
      } catch {
        return ''
      }
    },
    close: async () => {
      proc.signalGroup('SIGTERM')
      await waitForExit(proc, 10_000)
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** A hook's answer: the status of the parent (every kind's fields, see AnyStatus) and the rest of the reply. */
export interface HookAnswer {
  status?: AnyStatus
  finalized?: boolean
  relatedResources?: { resource: string }[]
}

/** The pod's two containers as two processes: the hooks server and its exporter sidecar. */
export interface Pod {
  hooksUrl: string
  exporterUrl: string
  /** The directory of both logs; the processes' KOLLECT_DATA_DIR is its `data`. */
  dir: string
  dataDir: string
  hooks: ServerProcess
  /** Every hooks process: `hooks` first, then the other replicas (startPod's `hooksReplicas`). */
  hooksReplicas: ServerProcess[]
  /** With several replicas, the round-robin proxy in front of them (hooksUrl is its address). */
  proxy?: RoundRobin
  /** The running exporter: a new process after startExporter(). */
  readonly exporter: ServerProcess
  /** POST a hook as Metacontroller does, with the token; asserts 200. */
  hook(route: string, body: string): Promise<HookAnswer>
  /** Inventory sync with `body` until `done` holds for its status; fails with the last status and the exporter's log. */
  inventoryUntil(body: string, done: (status: InventoryStatus) => boolean, opts?: { what?: string; timeoutMs?: number | undefined }): Promise<InventoryStatus>
  /** inventoryUntil Synced; with `changedFrom`, Synced with another checksum than that one. */
  waitSynced(body: string, opts?: { changedFrom?: string | undefined; timeoutMs?: number | undefined }): Promise<InventoryStatus>
  /** Start a new exporter process (the last one has exited) and wait until the hooks are ready again. */
  startExporter(): Promise<void>
  /** SIGTERM the exporter, wait for its exit, start it again. */
  restartExporter(): Promise<void>
  /** SIGTERM hooks replica `i`, wait for its exit, start a fresh process on its port (a rolling update). */
  restartHooks(i: number): Promise<void>
  /** Everything a process has logged so far. */
  log(which: 'hooks' | 'exporter'): string
  close(): Promise<void>
}

/**
 * Start main-exporter and main-hooks as in a pod: loopback, free ports, bearer `token`, a fresh
 * directory, log level info, then `env` (sink secrets as KOLLECT_SECRET_* variables). Resolves
 * once the hooks' /readyz says the exporter is reachable. With `hooksReplicas` > 1, that many
 * hooks processes share the one exporter behind a round-robin proxy, as a Service spreads them.
 */
export async function startPod(token: string, env: Record<string, string> = {}, opts: { hooksReplicas?: number } = {}): Promise<Pod> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-pod-'))
  const [hooksPort, exporterPort] = [await freePort(), await freePort()]
  const exporterUrl = `http://127.0.0.1:${exporterPort}`
  const dataDir = path.join(dir, 'data')
  const podEnv: NodeJS.ProcessEnv = {
    PATH: process.env['PATH'],
    HOME: process.env['HOME'],
    PORT: String(hooksPort),
    HOST: '127.0.0.1',
    KOLLECT_EXPORTER_PORT: String(exporterPort),
    KOLLECT_EXPORTER_URL: exporterUrl,
    KOLLECT_HOOK_TOKEN: token,
    KOLLECT_DATA_DIR: dataDir,
    KOLLECT_ALLOW_PRIVATE_SINKS: 'true',
    KOLLECT_LOG_LEVEL: 'info',
    ...env,
  }
  const logFile = (which: 'hooks' | 'exporter') => path.join(dir, `${which}.log`)
  const start = (which: 'hooks' | 'exporter', replica = 0, port = hooksPort) =>
    startServerProcess(process.execPath, [path.join(ROOT, `dist/server/main-${which}.js`)], replica === 0 ? logFile(which) : path.join(dir, `hooks-${replica}.log`), { ...podEnv, PORT: String(port) })
  const readyAt = (url: string, proc: ServerProcess) =>
    pollUntil('hooks ready (exporter reachable)', async () => (await get(`${url}/readyz`).catch(() => ({ status: 0 }))).status === 200, { timeoutMs: 20_000, proc })
  let exporter = start('exporter')
  const replicaPorts = [hooksPort]
  for (let i = 1; i < (opts.hooksReplicas ?? 1); i++) replicaPorts.push(await freePort())
  const hooksReplicas = replicaPorts.map((port, i) => start('hooks', i, port))
  const hooks = hooksReplicas[0] as ServerProcess
  const proxy = hooksReplicas.length > 1 ? await roundRobinProxy(replicaPorts.map((p) => `http://127.0.0.1:${p}`)) : undefined
  const hooksUrl = proxy?.url ?? `http://127.0.0.1:${hooksPort}`
  // Every replica must reach the exporter, not only the one the proxy happens to ask.
  const ready = async (proc: ServerProcess) => {
    for (const [i, port] of replicaPorts.entries()) await readyAt(`http://127.0.0.1:${port}`, i === 0 ? proc : hooksReplicas[i] as ServerProcess)
  }
  const pod: Pod = {
    hooksUrl,
    exporterUrl,
    dir,
    dataDir,
    hooks,
    hooksReplicas,
    ...(proxy ? { proxy } : {}),
    get exporter() {
      return exporter
    },
    hook: async (route, body) => {
      const res = await post(hooksUrl + route, body, { Authorization: `Bearer ${token}` })
      assert.equal(res.status, 200, `${route}: ${res.status} ${res.text}`)
      return res.json() as HookAnswer
    },
    inventoryUntil: async (body, done, opts = {}) => {
      let last: InventoryStatus | undefined
      await pollUntil(opts.what ?? 'inventory', async () => {
        last = (await pod.hook('/hooks/inventories/sync', body)).status ?? {}
        return done(last)
      }, { timeoutMs: opts.timeoutMs ?? 30_000, proc: exporter }).catch((err: Error) => {
        throw new Error(`${err.message}\nlast status: ${JSON.stringify(last)}\n${exporter.logTail()}`)
      })
      return last as InventoryStatus
    },
    waitSynced: (body, opts = {}) =>
      pod.inventoryUntil(body,
        (s) => s.conditions?.find((c) => c.type === 'Synced')?.status === 'True' && (opts.changedFrom === undefined || s.checksum !== opts.changedFrom),
        { what: 'inventory Synced', timeoutMs: opts.timeoutMs }),
    startExporter: async () => {
      exporter = start('exporter')
      await ready(exporter)
    },
    restartExporter: async () => {
      exporter.signalGroup('SIGTERM')
      await waitForExit(exporter, 10_000)
      await pod.startExporter()
    },
    restartHooks: async (i) => {
      const old = hooksReplicas[i] as ServerProcess
      old.signalGroup('SIGTERM')
      await waitForExit(old, 10_000)
      const fresh = start('hooks', i, replicaPorts[i])
      hooksReplicas[i] = fresh
      await readyAt(`http://127.0.0.1:${replicaPorts[i]}`, fresh)
    },
    log: (which) => readFileSync(logFile(which), 'utf8'),
    close: async () => {
      await proxy?.close()
      for (const p of [...hooksReplicas, exporter]) {
        p.signalGroup('SIGTERM')
        await waitForExit(p, 5000)
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
  try {
    await ready(hooks)
  } catch (err) {
    await pod.close()
    throw err
  }
  return pod
}
