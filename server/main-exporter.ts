// The exporter: the sidecar on loopback, whatever HOST says (the hooks container is its only
// client), or its own Deployment on KOLLECT_EXPORTER_HOST, which then needs the token.
import { buildExporterApp, reportBodyLimit } from './exporter-api/server.js'
import { createExporter, drainExporter, electLeader } from './exporter-wiring.js'
import { configure, guardProcess, onShutdown } from './process/lifecycle.js'
import { createMetrics } from './process/metrics.js'

const { config, logger } = configure('kollect-exporter')
guardProcess(logger)
const metrics = createMetrics('exporter')
const exporter = createExporter(config, logger, metrics)
// Exports a sink still owed at the last shutdown resume now, before any target re-reports (a
// standby resumes them when it gains the lease).
await exporter.restorePending()
const elector = electLeader(exporter, config, logger, metrics)
const app = await buildExporterApp({
  exporter, ready: () => exporter.isActive, auth: config.hookAuth, bodyLimit: config.hookBodyLimit,
  reportBodyLimit: reportBodyLimit(exporter.budgetBytes.namespace), maxJsonDepth: config.limits.maxJsonDepth, logger, metrics,
})
await app.listen({ port: config.exporterPort, host: config.exporterHost })
// The lease is released after the drain, so no standby writes while this one still does.
onShutdown(logger, [app], async () => {
  await drainExporter(exporter, config.shutdownGraceMs, logger)
  await elector?.stop()
}, config.shutdownGraceMs)
