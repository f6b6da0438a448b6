// Review mode of the git sink against a real Gitea (test/support/gitea.ts): through the exporter,
// the time from a 1-item change to the updated request, as a ratio of the same change pushed to
// the target branch in plain push mode. Two exporters of the same 1,000-item inventory, one
// per mode, each with one git sink on its own Gitea repository; changes alternate between them.
// Every timed change is checked afterwards (untimed): push mode moved main, review mode answered
// with the request's URL and the request shows the new head and the new checksum. At the end
// exactly one request may be open (one request per inventory).
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { Item, ResolvedSink } from '../api/types.js'
import { reviewBranch, resolveReviewSettings } from '../sinks/git/config.js'
import { startGitea, type GiteaServer } from '../test/support/gitea.js'
import { git } from '../test/support/git.js'
import { bumpReplicas, makeItems } from '../test/support/items.js'
import { pollUntil } from '../test/support/process.js'
import { benchRun, INVENTORY, type BenchRun } from './exporter.js'
import { median, report, timeMsAsync } from './stats.js'
import { isMainModule } from '../server/process/entry.js'

interface Pull {
  number: number
  html_url: string
  body: string
  head: { sha: string; ref: string }
}

async function forgeApi<T>(forge: GiteaServer, method: string, route: string, body?: unknown): Promise<T> {
  const res = await fetch(`${forge.apiUrl}${route}`, {
    method,
    headers: { Authorization: `token ${forge.token}`, 'Content-Type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  if (!res.ok) throw new Error(`gitea ${method} ${route}: HTTP ${res.status}: ${await res.text()}`)
  const text = await res.text()
  return (text ? JSON.parse(text) : undefined) as T
}

async function remoteSha(cwd: string, url: string, branch: string): Promise<string> {
  return (await git(cwd, 'ls-remote', url, `refs/heads/${branch}`)).split(/\s/)[0] ?? ''
}

export async function benchReview(count = 1_000, rounds = 7): Promise<boolean> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-bench-review-'))
  const forge = await startGitea()
  const runs: BenchRun[] = []
  try {
    const [pushUrl, reviewUrl] = [await forge.createRepo('bench-push'), await forge.createRepo('bench-review')]
    const project = `${forge.user}/bench-review`
    const review = { provider: 'gitea' as const, apiUrl: forge.apiUrl, project, autoMerge: 'never' as const }
    const sink = (name: string, settings: NonNullable<ResolvedSink['spec']['git']>): ResolvedSink => ({
      namespace: 'team-a', name, spec: { type: 'git', cluster: 'bench', secretRef: { name: 'gitea' }, git: settings, drift: { policy: 'Off' } },
    })
    const pushSink = sink('push', { url: pushUrl, branch: 'main' })
    const reviewSink = sink('review', { url: reviewUrl, branch: 'main', review })
    const credentials = async () => ({ token: forge.token })
    const push = benchRun(path.join(root, 'push'), [pushSink], credentials)
    const proposed = benchRun(path.join(root, 'review'), [reviewSink], credentials)
    runs.push(push, proposed)
    const label = { kind: 'git', id: 'team-a/review' }
    const branch = reviewBranch(resolveReviewSettings(reviewSink.spec, { token: forge.token }, label)!, { cluster: 'bench', ...INVENTORY }, label)

    let items = makeItems(count)
    const change = (run: BenchRun, next: Item[]) => timeMsAsync(async () => {
      await run.report(next)
      await run.exportNow()
    })
    const lastWrite = (run: BenchRun) => run.events.at(-1)?.written
    const openPulls = () => forgeApi<Pull[]>(forge, 'GET', `/repos/${project}/pulls?state=open&limit=50`)

    // The initial export of each; the review's request is merged (untimed), so main holds the
    // initial snapshot in both repositories and every change below differs from it by one item.
    for (const run of runs) {
      await run.report(items)
      await run.exporter.applyInventory(run.composition)
      await run.exportNow()
    }
    const initialPull = (await openPulls())[0]
    if (!initialPull) throw new Error('review mode: the initial export opened no request')
    await pollUntil('initial request mergeable',
      async () => (await forgeApi<{ mergeable: boolean }>(forge, 'GET', `/repos/${project}/pulls/${initialPull.number}`)).mergeable,
      { timeoutMs: 60_000, intervalMs: 200 })
    await forgeApi(forge, 'POST', `/repos/${project}/pulls/${initialPull.number}/merge`, { Do: 'merge' })

    // The same item changes each round, so each change is one item away from main in both modes.
    const bumped = (round: number) => items.map((it, i) => (i === Math.min(432, count - 1) ? bumpReplicas(it, 100 + round) : it))
    // An untimed first change opens the request the timed rounds update.
    items = bumped(0)
    await change(push, items)
    await change(proposed, items)

    const pushMs: number[] = []
    const reviewMs: number[] = []
    const problems: string[] = []
    let [pushHead, reviewHead] = [await remoteSha(root, pushUrl, 'main'), await remoteSha(root, reviewUrl, branch)]
    for (let round = 1; round <= rounds; round++) {
      const next = bumped(round)
      // Alternating which mode goes first, so neither always follows the other's load.
      for (const mode of round % 2 ? (['push', 'review'] as const) : (['review', 'push'] as const)) {
        if (mode === 'push') {
          pushMs.push(await change(push, next))
          const sha = await remoteSha(root, pushUrl, 'main')
          if (sha === pushHead || lastWrite(push)?.changed !== 1) problems.push(`round ${round}: push mode did not commit the change`)
          pushHead = sha
          continue
        }
        reviewMs.push(await change(proposed, next))
        const written = lastWrite(proposed)
        const sha = await remoteSha(root, reviewUrl, branch)
        const checksum = proposed.exporter.inventoryState(INVENTORY)?.checksum ?? ''
        if (!written?.review?.url || sha === reviewHead || written.changed !== 1) {
          problems.push(`round ${round}: review mode answered ${JSON.stringify(written)} (review branch ${sha === reviewHead ? 'not ' : ''}pushed)`)
        } else {
          const id = written.review.url.split('/').pop() ?? ''
          // Gitea moves a request's head after a push in the background: it must get there.
          await pollUntil(`request ${written.review.url} at ${sha}`, async () => {
            const pr = await forgeApi<Pull>(forge, 'GET', `/repos/${project}/pulls/${id}`)
            return pr.head.sha === sha && pr.body.includes(checksum)
          }, { timeoutMs: 60_000, intervalMs: 200 })
        }
        reviewHead = sha
      }
      items = next
    }

    const open = await openPulls()
    const ratio = median(reviewMs) / median(pushMs)
    const fmt = (ms: number[]) => ms.map((m) => m.toFixed(0)).join(' ')
    for (const p of problems) console.error(`  review bench: ${p}`)
    if (open.length !== 1) console.error(`  review bench: ${open.length} requests open, expected 1: ${open.map((p) => p.html_url).join(' ')}`)
    return report(`review: 1-item change of a ${count}-item inventory through the exporter, git review mode (Gitea, autoMerge never) against plain push`, [
      ['push: change → commit on main, median', `${median(pushMs).toFixed(0)} ms  (${fmt(pushMs)})`],
      ['review: change → updated request, median', `${median(reviewMs).toFixed(0)} ms  (${fmt(reviewMs)})`],
      ['ratio review / push (medians)', ratio.toFixed(2)],
      ['requests open after all changes', `${open.length}  ${open.map((p) => p.html_url).join(' ')}`],
    ], [
      ['every change committed / updated its request', problems.length === 0],
      ['one request open for the inventory', open.length === 1 && open[0]?.head.ref === branch],
    ])
  } finally {
    for (const run of runs) await run.exporter.close()
    await forge.stop()
    rmSync(root, { recursive: true, force: true })
  }
}

if (isMainModule(import.meta.url)) {
  process.exitCode = (await benchReview(Number(process.env['BENCH_COUNT'] ?? 1_000))) ? 0 : 1
}
