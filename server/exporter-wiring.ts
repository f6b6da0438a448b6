import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Exporter, PendingJournal } from '../exporter/index.js'
import { createSinkFactory } from '../sinks/registry.js'
import { envSecrets, kubeSecrets } from './cluster/credentials.js'
import { loadKubeConfig } from './cluster/kube.js'
import { LeaderElector, leaseApi } from './cluster/leader.js'
import { checkResolvedEndpoint } from './guards/ssrf.js'
import type { Config } from './process/config.js'
import type { Logger } from './process/logger.js'
import type { Metrics } from './process/metrics.js'

/** The exporter with its real sinks: secrets from the cluster when there is one, else from env. */
export function createExporter(config: Config, logger: Logger, metrics: Metrics, env: Record<string, string | undefined> = process.env): Exporter {
  const kc = loadKubeConfig(env)
  const secrets = kc ? kubeSecrets(kc, config.secretCacheMs) : envSecrets(env)
  const exporter = new Exporter({
    cluster: config.cluster,
    createSink: createSinkFactory({
      dataDir: config.dataDir,
      credentials: secrets.credentials,
      checkEndpoint: (url) => checkResolvedEndpoint(url, config.allowPrivateSinks),
      standbys: config.leaderElection !== null,
    }),
    checkGrant: secrets.checkGrant,
    observer: metrics.exporterObserver,
    budget: { maxBytes: config.itemBudgetBytes, namespaceShare: config.namespaceShare },
    journal: new PendingJournal(path.join(config.dataDir, 'pending')),
    log: (level, msg, fields) => logger[level](fields ?? {}, msg),
    standby: config.leaderElection !== null,
    ...(config.leaderElection ? { renewDeadlineMs: config.leaderElection.renewDeadlineMs } : {}),
  })
  metrics.setItemBudget(exporter.budgetBytes)
  metrics.setLeader(exporter.isActive)
  return exporter
}

/**
 * Shutdown: export what the debounce holds, wait up to the grace period, then save whatever a
 * sink still owes (a failing sink may never confirm) to the journal the next start resumes from.
 */
export async function drainExporter(exporter: Exporter, graceMs: number, logger: Logger): Promise<void> {
  exporter.flush()
  const ac = new AbortController()
  const settled = await Promise.race([exporter.idle().then(() => true), sleep(graceMs, false, { signal: ac.signal }).catch(() => false)])
  ac.abort()
  const { saved, failed, error } = await exporter.savePending()
  if (saved > 0) logger.warn({ inventories: saved, graceMs, settled }, 'exports still pending at shutdown were saved; the next start resumes them')
  // Never "saved" when the write failed: the operator must know these wait for a resync instead.
  if (failed > 0) {
    logger.error({ inventories: failed, graceMs, settled, error },
      'exports still pending at shutdown could not be saved to the journal and are lost here; the targets\' next resync exports them again')
  }
  await exporter.close()
}

/**
 * With leader election on, the exporter starts as a standby and writes only while it holds the
 * Lease; null when it is off. Gaining the lease resumes the journal's pending exports first.
 */
export function electLeader(
  exporter: Exporter, config: Config, logger: Logger, metrics: Metrics, env: Record<string, string | undefined> = process.env,
): LeaderElector | null {
  const settings = config.leaderElection
  if (!settings) return null
  const kc = loadKubeConfig(env)
  if (!kc) throw new Error('KOLLECT_LEADER_ELECTION is on, but there is no cluster: run in a pod or set KUBECONFIG')
  const elector = new LeaderElector(leaseApi(kc, settings.namespace, settings.name), settings, {
    onStartedLeading: () => {
      exporter.setActive(true)
      metrics.setLeader(true)
      void exporter.restorePending()
    },
    onStoppedLeading: () => {
      exporter.setActive(false)
      metrics.setLeader(false)
    },
    // Both on performance.now: the elector's default clock and the exporter's real one.
    onRenewed: (at, token) => exporter.leaseRenewed(at, token),
  }, logger)
  elector.start()
  return elector
}
