// npm start: hooks and exporter in one process, with the embedded default sink (a local Git
// repository under KOLLECT_DATA_DIR, default ./.data/dev: the demo keeps its own, ./.data/demo).
// No cluster and no external server needed. It exits with the npm that started it.
import path from 'node:path'
import { defaultRepositoryDir } from '../sinks/registry.js'
import { createPluralResolver } from './cluster/discovery.js'
import { loadKubeConfig } from './cluster/kube.js'
import { createExporter, drainExporter } from './exporter-wiring.js'
import { buildHooksApp } from './http/hooks-app.js'
import { configure, exitWithParent, guardProcess, onShutdown } from './process/lifecycle.js'
import { createMetrics } from './process/metrics.js'
import { enableLinearRegExps } from './process/regexp-engine.js'

// On loopback and with no token set, hooks run without authentication (logged at warn).
const { config, logger } = configure('kollect', process.env, { host: '127.0.0.1', dataDir: '.data/dev', allowPrivateSinks: true, loopbackAuth: 'none' })
guardProcess(logger)
enableLinearRegExps()
const metrics = createMetrics()
const exporter = createExporter(config, logger, metrics)
// Exports a sink still owed at the last shutdown resume now, before any target re-reports.
await exporter.restorePending()
const app = await buildHooksApp({ config, logger, metrics, exporter, resolvePlural: createPluralResolver(loadKubeConfig()) })
await app.listen({ port: config.port, host: config.host })
// Absolute and where git really writes: the default's repository appears at its first export,
// a KollectSink's under sinks/<namespace>/<name>.
logger.info({ dataDir: path.resolve(config.dataDir), repo: defaultRepositoryDir(config.dataDir), sinks: path.resolve(config.dataDir, 'sinks') },
  'kollect is running (hooks + exporter; inventories without sinkRefs export to the embedded default\'s repo, created at its first export)')
onShutdown(logger, [app], () => drainExporter(exporter, config.shutdownGraceMs, logger), config.shutdownGraceMs)
exitWithParent(logger)
