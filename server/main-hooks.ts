// The hooks container: answers Metacontroller, hands items to the exporter sidecar over loopback.
import { createPluralResolver } from './discovery.js'
import { httpExporterClient } from './exporter-app.js'
import { buildHooksApp } from './hooks-app.js'
import { loadKubeConfig } from './kube.js'
import { configure, guardProcess, onShutdown } from './lifecycle.js'
import { createMetrics } from './metrics.js'
import { enableLinearRegExps } from './regexp-engine.js'

const { config, logger } = configure('kollect-hooks')
guardProcess(logger)
enableLinearRegExps()
const metrics = createMetrics('hooks')
const exporter = httpExporterClient(config.exporterUrl, config.hookAuth)
const app = await buildHooksApp({ config, logger, metrics, exporter, resolvePlural: createPluralResolver(loadKubeConfig()), ready: () => exporter.ping(), moreMetrics: () => exporter.metrics() })
await app.listen({ port: config.port, host: config.host })
onShutdown(logger, [app])
