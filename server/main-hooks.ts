// The hooks container: answers Metacontroller, hands items to the exporter (sidecar or Service, or every replica).
import { createPluralResolver } from './discovery.js'
import { httpExporterClient } from './exporter-app.js'
import { fanOutExporterClient, parsePeers, peerUrls } from './exporter-peers.js'
import { buildHooksApp } from './hooks-app.js'
import { loadKubeConfig } from './kube.js'
import { configure, guardProcess, onShutdown } from './lifecycle.js'
import { createMetrics } from './metrics.js'
import { enableLinearRegExps } from './regexp-engine.js'

const { config, logger } = configure('kollect-hooks')
guardProcess(logger)
enableLinearRegExps()
const metrics = createMetrics('hooks')
const leader = httpExporterClient(config.exporterUrl, config.hookAuth)
// With a standby exporter every replica gets the state-carrying calls (docs/design.md, Topology).
const exporter = config.exporterPeers
  ? fanOutExporterClient({ leader, peers: peerUrls(parsePeers(config.exporterPeers)), auth: config.hookAuth, logger, metrics, maxPending: config.maxInflightRequests })
  : leader
const app = await buildHooksApp({ config, logger, metrics, exporter, resolvePlural: createPluralResolver(loadKubeConfig()), ready: () => exporter.ping(), moreMetrics: () => exporter.metrics() })
await app.listen({ port: config.port, host: config.host })
onShutdown(logger, [app])
