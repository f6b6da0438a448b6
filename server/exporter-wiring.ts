import { Exporter } from '../sinks/exporter.js'
import { createSinkFactory } from '../sinks/registry.js'
import type { Config } from './config.js'
import { envCredentials, kubeCredentials } from './credentials.js'
import { loadKubeConfig } from './kube.js'
import type { Logger } from './logger.js'
import type { Metrics } from './metrics.js'
import { checkResolvedEndpoint } from './ssrf.js'

/** The exporter with its real sinks: secrets from the cluster when there is one, else from env. */
export function createExporter(config: Config, logger: Logger, metrics: Metrics, env: Record<string, string | undefined> = process.env): Exporter {
  const kc = loadKubeConfig(env)
  const credentials = kc ? kubeCredentials(kc, config.secretCacheMs) : envCredentials(env)
  const exporter = new Exporter({
    cluster: config.cluster,
    createSink: createSinkFactory({
      dataDir: config.dataDir,
      credentials,
      checkEndpoint: (url) => checkResolvedEndpoint(url, config.allowPrivateSinks),
    }),
    observer: metrics.exporterObserver,
    budget: { maxBytes: config.itemBudgetBytes, namespaceShare: config.namespaceShare },
    log: (level, msg, fields) => logger[level](fields ?? {}, msg),
  })
  metrics.setItemBudget(exporter.budgetBytes)
  return exporter
}
