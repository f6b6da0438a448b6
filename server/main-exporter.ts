// The exporter sidecar: loopback only, whatever HOST says; the hooks container is its only client.
import { buildExporterApp, reportBodyLimit } from './exporter-app.js'
import { createExporter } from './exporter-wiring.js'
import { configure, guardProcess, onShutdown } from './lifecycle.js'
import { createMetrics } from './metrics.js'

const { config, logger } = configure('kollect-exporter')
guardProcess(logger)
const metrics = createMetrics('exporter')
const exporter = createExporter(config, logger, metrics)
const app = await buildExporterApp({ exporter, auth: config.hookAuth, bodyLimit: config.hookBodyLimit, reportBodyLimit: reportBodyLimit(exporter.budgetBytes.namespace), maxJsonDepth: config.limits.maxJsonDepth, logger, metrics })
await app.listen({ port: config.exporterPort, host: '127.0.0.1' })
onShutdown(logger, [app], async () => {
  exporter.flush()
  await exporter.idle()
  await exporter.close()
})
