// Exporter processes competing for a Lease on a real API server and sharing one bare git remote:
// what test/kube/leader.test.ts and bench/failover.ts both drive them by.
import assert from 'node:assert/strict'
import type { InventoryComposition, ObjectRef, ResolvedSink, Snapshot } from '../../api/types.js'
import { httpExporterClient } from '../../server/exporter-api/client.js'
import { git, gitLog } from './git.js'
import { get } from './hooks-server.js'
import { TARGET, bumpReplicas, makeItems } from './items.js'
import type { ControlPlane } from './kube-apiserver.js'
import { spawnEntry, type EntryProcess } from './kollect-process.js'
import { pollUntil } from './process.js'

export const LEADER_INV: ObjectRef = { namespace: 'team-a', name: 'deployments' }
const DOC = 'inventory/lab-west/team-a/deployments.json'
const ITEMS = makeItems(5)
const NONE = { mode: 'none', reason: 'test' } as const

export interface LeaseTimes {
  durationMs: number
  retryPeriodMs: number
}

/** main-exporter under leader election for `lease` in kollect-system (the namespace must exist); resolves once /healthz answers. */
export async function startLeaderExporter(cp: ControlPlane, identity: string, lease: string, times: LeaseTimes): Promise<EntryProcess> {
  const e = await spawnEntry('main-exporter', {
    KUBECONFIG: cp.kubeconfigPath,
    KOLLECT_HOOK_AUTH: 'none',
    KOLLECT_ALLOW_PRIVATE_SINKS: 'true',
    KOLLECT_LEADER_ELECTION: 'true',
    KOLLECT_LEASE_NAMESPACE: 'kollect-system',
    KOLLECT_LEASE_NAME: lease,
    KOLLECT_LEASE_IDENTITY: identity,
    KOLLECT_LEASE_DURATION_MS: String(times.durationMs),
    KOLLECT_LEASE_RENEW_DEADLINE_MS: String(times.durationMs - 1000),
    KOLLECT_LEASE_RETRY_PERIOD_MS: String(times.retryPeriodMs),
  })
  try {
    await pollUntil('exporter /healthz', async () => (await get(`${exporterBase(e)}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 20_000, proc: e.proc })
  } catch (err) {
    await e.close()
    throw err
  }
  return e
}

export const exporterBase = (e: EntryProcess): string => `http://127.0.0.1:${e.exporterPort}`
/** Ready means holding the lease: a standby answers 503. */
export const isLeaderReady = async (e: EntryProcess): Promise<boolean> => !e.proc.hasExited() && (await get(`${exporterBase(e)}/readyz`).catch(() => null))?.status === 200

/** The one of `pair` that holds the lease, once one does, and the other. */
export async function leaderOf(pair: EntryProcess[]): Promise<{ leader: EntryProcess; standby: EntryProcess; ready: boolean[] }> {
  await pollUntil('one exporter holds the lease', async () => (await Promise.all(pair.map(isLeaderReady))).some(Boolean), { timeoutMs: 20_000 })
  const ready = await Promise.all(pair.map(isLeaderReady))
  return { leader: pair[ready.indexOf(true)] as EntryProcess, standby: pair[ready.indexOf(false)] as EntryProcess, ready }
}

function composition(repo: string, debounceMs: number, others: ResolvedSink[]): InventoryComposition {
  return {
    inventory: LEADER_INV, generation: 1, targets: [TARGET], debounceMs, maxWaitMs: Math.max(debounceMs, 1_000), suspend: false,
    sinks: [{ namespace: 'team-a', name: 'record', spec: { type: 'git', cluster: 'lab-west', git: { url: repo, branch: 'main' } } }, ...others],
  }
}

let generation = 0
/**
 * The first item at `replicas`, reported with the composition to every exporter still running, as
 * the hooks fan them out. Keep `debounceMs` and `others` (sinks besides the git remote) the same
 * for one repo: new ones are a changed composition.
 */
export async function reportReplicas(to: EntryProcess[], repo: string, replicas: number, debounceMs = 100, others: ResolvedSink[] = []): Promise<void> {
  generation++
  const items = [bumpReplicas(ITEMS[0] as (typeof ITEMS)[number], replicas), ...ITEMS.slice(1)]
  await Promise.all(to.filter((e) => !e.proc.hasExited()).map(async (e) => {
    const c = httpExporterClient(exporterBase(e), NONE)
    await c.applyInventory(composition(repo, debounceMs, others))
    assert.deepEqual(await c.reportTarget({ target: TARGET, generation, checksum: '', items, failedKeys: [] }), { accepted: true })
  }))
}

/** Replicas of the first item in every commit that touched the export, oldest first. */
export async function exportedHistory(repo: string): Promise<number[]> {
  // No branch yet: nothing exported.
  const commits = (await gitLog(repo, 'main').catch(() => [])).reverse()
  const values: number[] = []
  for (const c of commits) {
    const doc = await git(repo, 'show', `${c.sha}:${DOC}`).catch(() => null)
    if (doc === null) continue
    values.push((JSON.parse(doc) as Snapshot).items.find((i) => i.uid === ITEMS[0]?.uid)?.attributes['replicas'] as number)
  }
  return values
}

/** Replicas of the first item as the remote's main holds it now; null before the first export. */
async function lastExported(repo: string): Promise<number | null> {
  const doc = await git(repo, 'show', `main:${DOC}`).catch(() => null)
  return doc === null ? null : (JSON.parse(doc) as Snapshot).items.find((i) => i.uid === ITEMS[0]?.uid)?.attributes['replicas'] as number
}

export function landedIn(repo: string, replicas: number, writer: EntryProcess, opts: { timeoutMs?: number; intervalMs?: number } = {}): Promise<void> {
  return pollUntil(`replicas ${replicas} in the remote`, async () => (await lastExported(repo)) === replicas, {
    timeoutMs: opts.timeoutMs ?? 20_000, proc: writer.proc, ...(opts.intervalMs ? { intervalMs: opts.intervalMs } : {}),
  })
}
