import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { QuietRequests, type Logger } from '../process/logger.js'
import { apiAuth } from './plugins/api-auth.js'
import { errorMapping } from './plugins/errors.js'
import { extraction, extractionStarted } from './plugins/extraction.js'
import { guard } from './plugins/guard.js'
import type { HookRouteDeps } from './plugins/hook-route.js'
import { inventoryRoutes } from './plugins/inventories.js'
import { jsonBody } from './plugins/json-body.js'
import { probes, type ProbeDeps } from './plugins/probes.js'
import { profileRoutes } from './plugins/profiles.js'
import { sinkRoutes } from './plugins/sinks.js'
import { targetRoutes } from './plugins/targets.js'
import { HTTP_TIMEOUTS } from './timeouts.js'

export { reportSequence } from './plugins/targets.js'

/** config, metrics, exporter, resolvePlural (hook routes), ready and moreMetrics (probes), logger. */
export interface HooksDeps extends HookRouteDeps, ProbeDeps {
  logger: Logger
}

/** The hooks server, one plugin per concern (server/http/plugins/). */
export async function buildHooksApp(deps: HooksDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    logController: new QuietRequests(),
    bodyLimit: 1024 * 1024,
    genReqId: (req) => {
      const given = req.headers['x-request-id']
      return typeof given === 'string' && given.length <= 128 ? given : randomUUID()
    },
    ...HTTP_TIMEOUTS,
    // Plain ajv for the envelope: no coercion, so a wrong type is a 400, not silently fixed.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
  })
  // First, at the root: every route needs the token but the probes, hook routes and any later one.
  await app.register(apiAuth, { auth: deps.config.hookAuth })
  await app.register(jsonBody, deps)
  await app.register(errorMapping, deps)
  await app.register(extraction, deps)
  // One context for the hook routes: the in-flight bounds run on them, and the probes stay outside it.
  await app.register(async (hooks) => {
    await hooks.register(guard, deps)
    await hooks.register(targetRoutes, deps)
    await hooks.register(inventoryRoutes, deps)
    await hooks.register(profileRoutes, deps)
    await hooks.register(sinkRoutes, deps)
  })
  await app.register(probes, deps)
  // After the plugins, so the wait is not held to Fastify's plugin timeout.
  await extractionStarted(app, deps.logger)
  return app
}
