// Hub mode: the same image fans in the spokes' NATS JetStream events to the hub's own sinks.
// It takes no hook calls: its only HTTP routes are the probes and /metrics.
import { loadHubConfig, type HubConfig } from '../hub/config.js'
import { Hub } from '../hub/hub.js'
import { createHubMetrics } from '../hub/metrics.js'
import { buildHubApp } from './http/hub-app.js'
import { configErrorLine, loadConfig, type Config } from './process/config.js'
import { isMainModule } from './process/entry.js'
import { onShutdown } from './process/lifecycle.js'
import { createLogger } from './process/logger.js'

const NAME = 'kollect-hub'

// Settings of the routes the hub does not serve (hooks, the exporter API): an environment shared
// with the hooks' Deployment may well carry them, and they must not stop the hub.
const NOT_SERVED = ['KOLLECT_HOOK_TOKEN', 'KOLLECT_HOOK_TOKEN_FILE', 'KOLLECT_EXPORTER_HOST']

/** The settings and the hub file, or one `fatal` line naming what is wrong and exit code 1. */
function loadSettings(env: Record<string, string | undefined>): { config: Config; hubConfig: HubConfig } {
  const served = Object.fromEntries(Object.entries(env).filter(([k]) => !NOT_SERVED.includes(k)))
  try {
    const config = loadConfig({ ...served, KOLLECT_HOOK_AUTH: 'none' })
    return { config, hubConfig: loadHubConfig(config.hubConfigFile) }
  } catch (err) {
    createLogger('info', NAME, 'json').fatal(`invalid configuration: ${configErrorLine(err)}`)
    process.exit(1)
  }
}

export async function runHub(env: Record<string, string | undefined> = process.env): Promise<void> {
  const { config, hubConfig } = loadSettings(env)
  const logger = createLogger(config.logLevel, NAME, config.logFormat)
  const metrics = createHubMetrics()
  const hub = new Hub({
    config: hubConfig,
    metrics,
    log: (level, msg, fields) => logger[level](fields ?? {}, msg),
  })
  let ready = false
  const app = await buildHubApp({ metrics, ready: () => ready })
  await app.listen({ port: config.port, host: config.host })
  try {
    await hub.start()
  } catch (err) {
    // An unreachable NATS or an unreadable secretDir: one line, not a stack trace.
    logger.fatal({ error: configErrorLine(err) }, 'hub could not start consuming')
    process.exit(1)
  }
  ready = true
  logger.info({ file: config.hubConfigFile }, 'hub consuming')
  onShutdown(logger, [app], () => hub.stop(), config.shutdownGraceMs)
  hub.finished.catch((err: unknown) => {
    logger.fatal({ error: (err as Error).message }, 'hub stopped consuming')
    process.exit(1)
  })
}

if (isMainModule(import.meta.url)) await runHub()
