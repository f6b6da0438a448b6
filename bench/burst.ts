// A burst (issue 13): 200 Deployments applied at once under one KollectTarget. What the exporter
// sees is what Metacontroller does: every change of a related object re-syncs the parent with
// the whole related set, the work queue folds changes that come while a sync waits into one
// sync, and its client's rate limit (QPS 5, burst 10: each sync writes the target's status)
// spaces the syncs. The Deployments are created over about 5 s, so the set grows from sync to
// sync. Each debounce/maxWait of a sweep gets the same burst into a fresh inventory with a Git
// sink on a bare remote; exports are counted as commits. Baseline: the ideal, one export.
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ResolvedSink } from '../api/types.js'
import { DEFAULT_DEBOUNCE_MS, DEFAULT_MAX_WAIT_MS } from '../hooks/inventory.js'
import { createBareRemote, gitLog } from '../test/support/git.js'
import { makeItems } from '../test/support/items.js'
import { benchRun } from './exporter.js'
import { median, report } from './stats.js'
import { isMainModule } from '../server/process/entry.js'

const DEPLOYMENTS = 200
const CREATE_OVER_MS = 5_000
const QPS = 5
const BURST = 10
/** A sync that just answered is not run again sooner (the hook call and the status write). */
const SYNC_MIN_GAP_MS = 20

/** Token bucket of client-go's rate limiter. */
class TokenBucket {
  private tokens = BURST
  private at = performance.now()
  /** Milliseconds until a token is there (0: take it now). */
  take(): number {
    const now = performance.now()
    this.tokens = Math.min(BURST, this.tokens + ((now - this.at) / 1000) * QPS)
    this.at = now
    if (this.tokens >= 1) {
      this.tokens -= 1
      return 0
    }
    return ((1 - this.tokens) / QPS) * 1000
  }
}

interface Outcome { debounceMs: number; maxWaitMs: number; syncs: number; maxGapMs: number; commits: number; exports: number }

async function burst(root: string, debounceMs: number, maxWaitMs: number): Promise<Outcome> {
  const dir = mkdtempSync(path.join(root, 'run-'))
  const remote = await createBareRemote(dir, 'burst.git')
  const sink: ResolvedSink = { namespace: 'team-a', name: 'git', spec: { type: 'git', cluster: 'bench', git: { url: remote, branch: 'main' }, drift: { policy: 'Off' } } }
  const run = benchRun(path.join(dir, 'data'), [sink], async () => ({}))
  try {
    const all = makeItems(DEPLOYMENTS)
    // The target existed before the burst: it reported its empty set, and that was exported.
    await run.report([])
    await run.exporter.applyInventory({ ...run.composition, debounceMs: 100, maxWaitMs: 100 })
    await run.exportNow()
    await run.exporter.applyInventory({ ...run.composition, debounceMs, maxWaitMs })
    await run.exportNow() // the composition change: same checksum, nothing written

    const before = (await gitLog(remote, 'main')).length
    const exportsBefore = run.events.length

    const bucket = new TokenBucket()
    const start = performance.now()
    const created = () => Math.min(DEPLOYMENTS, Math.floor(((performance.now() - start) / CREATE_OVER_MS) * DEPLOYMENTS) + 1)
    const syncTimes: number[] = []
    let reported = 0
    while (reported < DEPLOYMENTS) {
      // A change is queued (the next Deployment was created): wait for one, then for a token.
      const untilNext = start + (reported / DEPLOYMENTS) * CREATE_OVER_MS - performance.now()
      if (untilNext > 0) await sleep(untilNext)
      const wait = bucket.take()
      if (wait > 0) await sleep(wait)
      const set = all.slice(0, created())
      syncTimes.push(performance.now())
      await run.report(set)
      reported = set.length
      await sleep(SYNC_MIN_GAP_MS)
    }
    // Everything the schedule will export has been: the debounce, or maxWait, has run out.
    await sleep(Math.min(debounceMs, maxWaitMs) + 1_000)
    await run.exporter.idle()
    const gaps = syncTimes.slice(1).map((t, i) => t - (syncTimes[i] as number))
    const commits = (await gitLog(remote, 'main')).length - before
    return { debounceMs, maxWaitMs, syncs: syncTimes.length, maxGapMs: Math.max(...gaps), commits, exports: run.events.length - exportsBefore }
  } finally {
    await run.exporter.close()
  }
}

export async function benchBurst(sweep: [number, number][] = [
  [100, 120_000], [300, 120_000], [1_000, 120_000], [2_000, 120_000], [DEFAULT_DEBOUNCE_MS, DEFAULT_MAX_WAIT_MS], [DEFAULT_DEBOUNCE_MS, 3_000],
]): Promise<boolean> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-bench-burst-'))
  try {
    const outcomes: Outcome[] = []
    for (const [debounceMs, maxWaitMs] of sweep) outcomes.push(await burst(root, debounceMs, maxWaitMs))
    const byDefault = outcomes.find((o) => o.debounceMs === DEFAULT_DEBOUNCE_MS && o.maxWaitMs === DEFAULT_MAX_WAIT_MS)
    const one = outcomes.filter((o) => o.commits === 1).map((o) => o.debounceMs)
    const rows: [string, string][] = outcomes.map((o) => [
      `debounce ${o.debounceMs} ms, maxWait ${o.maxWaitMs} ms`,
      `${o.commits} commits (${o.exports} exports) from ${o.syncs} syncs, largest gap ${o.maxGapMs.toFixed(0)} ms; ratio to ideal ${o.commits.toFixed(0)}`,
    ])
    rows.push(
      ['syncs per burst, median', String(median(outcomes.map((o) => o.syncs)))],
      ['smallest debounce of the sweep giving one export', one.length > 0 ? `${Math.min(...one)} ms` : 'none'],
    )
    return report(`burst: ${DEPLOYMENTS} Deployments created over ${CREATE_OVER_MS / 1000} s, one target re-synced with the whole set (QPS ${QPS}, burst ${BURST}), Git sink`, rows, [
      ['default debounce: exports / ideal = 1', byDefault?.commits === 1 && byDefault.exports === 1],
    ])
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

if (isMainModule(import.meta.url)) process.exitCode = (await benchBurst()) ? 0 : 1
