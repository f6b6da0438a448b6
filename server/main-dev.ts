// npm start: hooks and exporter in one process, with the embedded default sink (a local Git
// repository under KOLLECT_DATA_DIR). No cluster and no external server needed.
import { loadConfig } from './config.js'
import { createPluralResolver } from './discovery.js'
import { createExporter } from './exporter-wiring.js'
import { buildHooksApp } from './hooks-app.js'
import { loadKubeConfig } from './kube.js'
import { guardProcess, onShutdown } from './lifecycle.js'
import { createLogger } from './logger.js'
import { createMetrics } from './metrics.js'

const config = loadConfig(process.env, { host: '127.0.0.1', allowPrivateSinks: true })
const logger = createLogger(config.logLevel, 'kollect')
guardProcess(logger)
const metrics = createMetrics()
const exporter = createExporter(config, logger, metrics)
const app = await buildHooksApp({ config, logger, metrics, exporter, resolvePlural: createPluralResolver(loadKubeConfig()) })
await app.listen({ port: config.port, host: config.host })
logger.info({ dataDir: config.dataDir, repo: `${config.dataDir}/repo` }, 'kollect is running (hooks + exporter, embedded default sink)')
onShutdown(logger, [app], async () => {
  exporter.flush()
  await exporter.idle()
  await exporter.close()
})
