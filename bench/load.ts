// N concurrent target syncs of 1,000 Deployments each against the hooks server running as its
// own process (npm start's all-in-one entry), while /healthz is probed every 10 ms. Clients
// back off on 429 as Metacontroller does (Retry-After). Target: /healthz p99 < 100 ms while the
// hooks are saturated, no 5xx, and the server's peak RSS within the configured bounds.
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { get, post } from '../test/support/hooks-server.js'
import { groupRss } from '../test/support/kollect-process.js'
import { ROOT, deployment, goJson, targetSyncRequest } from '../test/support/metacontroller.js'
import { freePort } from '../test/support/ports.js'
import { pollUntil, startServerProcess, waitForExit } from '../test/support/process.js'
import { percentile, report } from './stats.js'

async function probeHealth(url: string, until: () => boolean): Promise<number[]> {
  const latencies: number[] = []
  while (!until()) {
    const t = performance.now()
    await get(url + '/healthz')
    latencies.push(performance.now() - t)
    await new Promise((r) => setTimeout(r, 10))
  }
  return latencies
}

export async function benchLoad(clients = 12, syncsPerClient = 6, objects = 1000): Promise<boolean> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-bench-load-'))
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  // Two extraction children and the reserve (KOLLECT_EXTRACT_WORKERS=2, KOLLECT_EXTRACT_RESERVE=1).
  const limits = { inflight: 4, workerMemoryMb: 1024, children: 3 }
  const server = startServerProcess(process.execPath, [path.join(ROOT, 'dist/server/main-dev.js')], path.join(root, 'server.log'), {
    ...process.env, PORT: String(port), KOLLECT_DATA_DIR: path.join(root, 'data'), KOLLECT_LOG_LEVEL: 'warn',
    KOLLECT_MAX_INFLIGHT_REQUESTS: String(limits.inflight), KOLLECT_WORKER_MEMORY_MB: String(limits.workerMemoryMb), KOLLECT_EXTRACT_WORKERS: '2',
  })
  // The extraction children are the server's own processes: sample the whole process group.
  let peakRss = 0
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, groupRss(server.child.pid ?? 0))
  }, 100)
  try {
    await pollUntil('server up', async () => (await get(url + '/healthz').catch(() => ({ status: 0 }))).status === 200, { timeoutMs: 20_000, proc: server })
    const body = Buffer.from(goJson(targetSyncRequest(Array.from({ length: objects }, (_, i) => deployment(i)))))
    const idle = await (async () => { let n = 0; return probeHealth(url, () => ++n > 50) })()

    const statuses = new Map<number, number>()
    const latencies: number[] = []
    let shed = 0
    let done = false
    const started = performance.now()
    const health = probeHealth(url, () => done)
    await Promise.all(Array.from({ length: clients }, async () => {
      for (let i = 0; i < syncsPerClient; i++) {
        for (;;) {
          const t = performance.now()
          const res = await post(url + '/hooks/targets/sync', body)
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
          if (res.status === 429) {
            shed++
            await new Promise((r) => setTimeout(r, 1000 * Number(res.headers['retry-after'] ?? 1)))
            continue
          }
          latencies.push(performance.now() - t)
          break
        }
      }
    }))
    const wall = (performance.now() - started) / 1000
    done = true
    const healthUnderLoad = await health
    clearInterval(sampler)
    const rss = Math.round(peakRss / 1024 / 1024)
    const fiveXX = [...statuses].filter(([s]) => s >= 500).reduce((n, [, c]) => n + c, 0)
    const ok = statuses.get(200) ?? 0
    const bound = limits.inflight * (body.length / 1024 / 1024) * 40 + limits.children * limits.workerMemoryMb
    const p99 = percentile(healthUnderLoad, 99)
    return report(`load: ${clients} clients × ${syncsPerClient} target syncs of ${objects} Deployments (${(body.length / 1024 / 1024).toFixed(1)} MiB each)`, [
      ['throughput', `${(ok / wall).toFixed(1)} syncs/s (${Math.round((ok * objects) / wall).toLocaleString('en-US')} objects/s)`],
      ['sync latency p50 / p99', `${percentile(latencies, 50).toFixed(0)} / ${percentile(latencies, 99).toFixed(0)} ms`],
      ['responses', JSON.stringify(Object.fromEntries(statuses))],
      ['429 (shed, retried after Retry-After)', shed],
      ['/healthz p50 / p99 under load', `${percentile(healthUnderLoad, 50).toFixed(1)} / ${p99.toFixed(1)} ms (${healthUnderLoad.length} probes)`],
      ['/healthz p99 idle', `${percentile(idle, 99).toFixed(1)} ms (ratio under load / idle ${(p99 / Math.max(0.1, percentile(idle, 99))).toFixed(1)})`],
      ['server peak RSS (process group)', `${rss} MiB (bound from the settings: ${Math.round(bound)} MiB)`],
    ], [['/healthz p99 < 100 ms', p99 < 100], ['no 5xx', fiveXX === 0], ['RSS within bounds', rss < bound]])
  } finally {
    clearInterval(sampler)
    server.signalGroup('SIGTERM')
    await waitForExit(server, 10_000)
    rmSync(root, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = (await benchLoad()) ? 0 : 1
}
