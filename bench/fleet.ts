// Hub mode at fleet scale (issue 12): 10 spokes (in-process exporters with a NATS JetStream sink,
// each with its own cluster label) × 5,000 items fan in through a real nats-server to the hub as
// its own process (dist/server/main-hub.js) with a Git sink on a bare remote. Baseline, in the
// same run: the same 50,000 items exported directly by one exporter to a Git sink, and a 1-item
// change there. Figures: time to the first full hub export, per-change latency spoke report →
// hub commit, the hub's RSS; ratios hub / direct.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { compareItems, itemsChecksum } from '../api/canonical.js'
import type { Item, ResolvedSink } from '../api/types.js'
import { createBareRemote, git, gitLog, showFile } from '../test/support/git.js'
import { get } from '../test/support/hooks-server.js'
import { bumpReplicas, makeItems } from '../test/support/items.js'
import { spawnEntry } from '../test/support/kollect-process.js'
import { startNats } from '../test/support/nats.js'
import { pollUntil } from '../test/support/process.js'
import { benchRun, initialThenChange, INVENTORY, type BenchRun } from './exporter.js'
import { median, report } from './stats.js'
import { isMainModule } from '../server/process/entry.js'

const STREAM = 'FLEET'

/** A process's resident and peak resident memory in bytes (Linux /proc). */
function rss(pid: number): { now: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024
  return { now: kb('VmRSS'), peak: kb('VmHWM') }
}

/** The hub's V8 heap in use, from its /metrics (garbage included: the hub is not asked to collect). */
async function hubHeapUsed(url: string): Promise<number> {
  const text = (await get(`${url}/metrics`)).text
  return Number(/^kollect_hub_nodejs_heap_size_used_bytes (\d+)/m.exec(text)?.[1] ?? 0)
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`

export async function benchFleet(spokeCount = 10, perSpoke = 5_000): Promise<boolean> {
  const total = spokeCount * perSpoke
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-bench-fleet-'))
  const nats = await startNats()
  const runs: BenchRun[] = []
  let hub: Awaited<ReturnType<typeof spawnEntry>> | undefined
  try {
    // Baseline: the whole fleet's items through one exporter straight to Git.
    const directRemote = await createBareRemote(root, 'direct.git')
    const direct = benchRun(path.join(root, 'direct'), [
      { namespace: 'team-a', name: 'git', spec: { type: 'git', cluster: 'bench', git: { url: directRemote, branch: 'main' }, drift: { policy: 'Off' } } },
    ], async () => ({}))
    const baseline = await initialThenChange(direct, total, () => async () => undefined)
    await direct.exporter.close()

    // The hub, started first: it waits for the spokes' stream.
    const remote = await createBareRemote(root, 'fleet.git')
    const clusters = Array.from({ length: spokeCount }, (_, i) => `spoke-${String(i).padStart(2, '0')}`)
    const config = path.join(root, 'hub.json')
    mkdirSync(path.join(root, 'hub-data'))
    writeFileSync(config, JSON.stringify({
      nats: { url: nats.url, stream: STREAM },
      clusters,
      dataDir: path.join(root, 'hub-data'),
      sinks: [{ name: 'fleet-git', spec: { type: 'git', git: { url: remote, branch: 'main' } } }],
    }))
    hub = await spawnEntry('main-hub', { KOLLECT_HUB_CONFIG: config, KOLLECT_LOG_LEVEL: 'warn' })
    const hubProc = hub.proc
    const hubPid = hubProc.child.pid ?? 0
    const hubUrl = `http://127.0.0.1:${hub.port}`
    await pollUntil('hub /healthz', async () => (await get(`${hubUrl}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 20_000, proc: hubProc })
    const idleRss = rss(hubPid).now

    const natsSink: ResolvedSink = { namespace: 'platform', name: 'events', spec: { type: 'nats', nats: { url: nats.url, stream: STREAM } } }
    const spokes = clusters.map((cluster, i) => {
      const run = benchRun(path.join(root, cluster), [natsSink], async () => ({}), cluster)
      runs.push(run)
      return { cluster, run, items: makeItems(perSpoke, i * perSpoke) }
    })
    // Only the hub's exports carry a cluster (the sink's first commit on an empty remote does not).
    const exports = async () => (await gitLog(remote, 'main').catch(() => [])).filter((c) => c.trailers['Kollect-Cluster'])
    const exportCount = async () => Number((await git(remote, 'rev-list', '--count', 'main').catch(() => '0')).trim())
    const publish = async (spoke: (typeof spokes)[number], items: Item[]) => {
      spoke.items = items
      await spoke.run.report(items)
      spoke.run.exporter.flush()
    }

    // First full export: every spoke reports at once; done when all clusters are committed at the hub.
    const start = performance.now()
    await Promise.all(spokes.map(async (s) => {
      await s.run.exporter.applyInventory(s.run.composition)
      await publish(s, s.items)
    }))
    await Promise.all(spokes.map((s) => s.run.exporter.idle()))
    const publishedMs = performance.now() - start
    await pollUntil('all clusters committed at the hub', async () => new Set((await exports()).map((c) => c.trailers['Kollect-Cluster'])).size === spokeCount,
      { timeoutMs: 600_000, intervalMs: 100, proc: hubProc })
    const firstMs = performance.now() - start
    const firstCommits = (await exports()).length
    const heldRss = rss(hubPid).now
    const heldHeap = await hubHeapUsed(hubUrl)

    // One 1-item change per spoke, one at a time: spoke report → the hub's commit.
    const latencies: number[] = []
    for (const [i, s] of spokes.entries()) {
      const before = await exportCount()
      const t = performance.now()
      await publish(s, s.items.map((it, k) => (k === 17 ? bumpReplicas(it, 100 + i) : it)))
      await pollUntil(`${s.cluster}'s change committed`, async () => (await exportCount()) > before, { timeoutMs: 60_000, intervalMs: 10, proc: hubProc })
      latencies.push(performance.now() - t)
      await s.run.exporter.idle()
    }
    // Anything the hub would commit twice has had time to land.
    await sleep(2_000)
    const changeCommits = (await exports()).slice(0, -firstCommits).reverse()
    const onePerChange = changeCommits.length === spokeCount && changeCommits.every((c, i) => c.trailers['Kollect-Cluster'] === clusters[i])
    const inStep = (await Promise.all(spokes.map(async (s) => {
      const doc = JSON.parse(await showFile(remote, 'main', `inventory/${s.cluster}/${INVENTORY.namespace}/${INVENTORY.name}.json`)) as { checksum: string }
      return doc.checksum === itemsChecksum([...s.items].sort(compareItems))
    }))).every(Boolean)
    const peakRss = rss(hubPid).peak

    const firstRatio = firstMs / baseline.initialMs
    const lagRatio = (firstMs - publishedMs) / baseline.initialMs
    const changeRatio = median(latencies) / baseline.incrementalMs
    // Targets, and why, in bench/README.md.
    return report(`fleet: ${spokeCount} spokes × ${perSpoke} items through NATS JetStream into the hub (own process) with a Git sink`, [
      ['direct: first export of all items to git', `${baseline.initialMs.toFixed(0)} ms`],
      ['direct: 1-item change to git', `${baseline.incrementalMs.toFixed(0)} ms`],
      ['hub: spokes published (all sinks confirmed)', `${publishedMs.toFixed(0)} ms  (ratio to direct ${(publishedMs / baseline.initialMs).toFixed(2)})`],
      ['hub: first full export (all clusters committed)', `${firstMs.toFixed(0)} ms  (${firstCommits} commits)`],
      ['  ratio hub / direct', firstRatio.toFixed(2)],
      ['  hub done after the last spoke, over direct', lagRatio.toFixed(2)],
      ['hub: 1-item change, report → commit: median / max', `${median(latencies).toFixed(0)} / ${Math.max(...latencies).toFixed(0)} ms`],
      ['  ratio median hub / direct', changeRatio.toFixed(2)],
      ['hub RSS: idle / holding all items / peak', `${mib(idleRss)} / ${mib(heldRss)} / ${mib(peakRss)}`],
      ['  bytes per held item (held − idle, peak)', `${((heldRss - idleRss) / total).toFixed(0)}, ${(peakRss / total).toFixed(0)}`],
      ['  hub heap used holding all items, per item', `${mib(heldHeap)}, ${(heldHeap / total).toFixed(0)} B`],
    ], [
      ['first full export <= 5 × direct', firstRatio <= 5],
      ['hub done <= 1.5 × direct after the last spoke', lagRatio <= 1.5],
      ['1-item change median <= 1 × direct', changeRatio <= 1],
      ['one commit per cluster first, then one per change', firstCommits === spokeCount && onePerChange],
      ['every cluster\'s hub document matches its spoke', inStep],
    ])
  } finally {
    for (const run of runs) await run.exporter.close()
    await hub?.close()
    await nats.destroy()
    rmSync(root, { recursive: true, force: true })
  }
}

if (isMainModule(import.meta.url)) {
  const spokes = Number(process.env['BENCH_SPOKES'] ?? 10)
  const perSpoke = Number(process.env['BENCH_COUNT'] ?? 5_000)
  process.exitCode = (await benchFleet(spokes, perSpoke)) ? 0 : 1
}
