// Hub mode: the same image fans in the spokes' NATS JetStream events to the hub's own sinks.
// It takes no hook calls: its only HTTP routes are the probes and /metrics.
import { loadHubConfig } from '../hub/config.js'
import { Hub } from '../hub/hub.js'
import { createHubMetrics } from '../hub/metrics.js'
import { loadConfig } from './config.js'
import { buildHubApp } from './hub-app.js'
import { onShutdown } from './lifecycle.js'
import { createLogger } from './logger.js'

export async function runHub(env: Record<string, string | undefined> = process.env): Promise<void> {
  // Hook authentication does not apply: no hook route is served.
  const config = loadConfig({ ...env, KOLLECT_HOOK_AUTH: 'none' })
  const logger = createLogger(config.logLevel, 'kollect-hub', config.logFormat)
  const metrics = createHubMetrics()
  const hub = new Hub({
    config: loadHubConfig(config.hubConfigFile),
    metrics,
    log: (level, msg, fields) => logger[level](fields ?? {}, msg),
  })
  let ready = false
  const app = await buildHubApp({ metrics, ready: () => ready })
  await app.listen({ port: config.port, host: config.host })
  await hub.start()
  ready = true
  logger.info({ file: config.hubConfigFile }, 'hub consuming')
  onShutdown(logger, [app], () => hub.stop(), config.shutdownGraceMs)
  hub.finished.catch((err: unknown) => {
    logger.fatal({ error: (err as Error).message }, 'hub stopped consuming')
    process.exit(1)
  })
}

if (import.meta.url === `file://${process.argv[1]}`) await runHub()
