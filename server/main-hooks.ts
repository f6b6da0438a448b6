// The hooks container: answers Metacontroller, hands items to the exporter (sidecar or Service, or every replica).
import { createPluralResolver } from './cluster/discovery.js'
import { loadKubeConfig } from './cluster/kube.js'
import { httpExporterClient } from './exporter-api/client.js'
import { fanOutExporterClient, parsePeers, peerUrls } from './exporter-api/peers.js'
import { buildHooksApp } from './http/hooks-app.js'
import { configure, guardProcess, onShutdown } from './process/lifecycle.js'
import { createMetrics } from './process/metrics.js'
import { enableLinearRegExps } from './process/regexp-engine.js'

const { config, logger } = configure('kollect-hooks')
guardProcess(logger)
enableLinearRegExps()
const metrics = createMetrics('hooks')
const leader = httpExporterClient(config.exporterUrl, config.hookAuth)
// With a standby exporter every replica gets the state-carrying calls (docs/design.md, Topology).
const exporter = config.exporterPeers
  ? fanOutExporterClient({
    leader, peers: peerUrls(parsePeers(config.exporterPeers)), auth: config.hookAuth, logger, metrics, maxPending: config.maxInflightRequests,
  })
  : leader
const app = await buildHooksApp({
  config, logger, metrics, exporter, resolvePlural: createPluralResolver(loadKubeConfig()), ready: () => exporter.ping(), moreMetrics: () => exporter.metrics(),
})
await app.listen({ port: config.port, host: config.host })
onShutdown(logger, [app])
