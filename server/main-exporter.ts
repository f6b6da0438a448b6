// The exporter: the sidecar on loopback, whatever HOST says (the hooks container is its only
// client), or its own Deployment on KOLLECT_EXPORTER_HOST, which then needs the token.
import { buildExporterApp, reportBodyLimit } from './exporter-app.js'
import { createExporter, drainExporter } from './exporter-wiring.js'
import { configure, guardProcess, onShutdown } from './lifecycle.js'
import { createMetrics } from './metrics.js'

const { config, logger } = configure('kollect-exporter')
guardProcess(logger)
const metrics = createMetrics('exporter')
const exporter = createExporter(config, logger, metrics)
// Exports a sink still owed at the last shutdown resume now, before any target re-reports.
await exporter.restorePending()
const app = await buildExporterApp({ exporter, auth: config.hookAuth, bodyLimit: config.hookBodyLimit, reportBodyLimit: reportBodyLimit(exporter.budgetBytes.namespace), maxJsonDepth: config.limits.maxJsonDepth, logger, metrics })
await app.listen({ port: config.exporterPort, host: config.exporterHost })
onShutdown(logger, [app], () => drainExporter(exporter, config.shutdownGraceMs, logger), config.shutdownGraceMs)
