import Fastify, { type FastifyInstance } from 'fastify'
import type { HubMetrics } from '../../hub/metrics.js'
import { apiAuth } from './plugins/api-auth.js'

export interface HubAppDeps {
  metrics: HubMetrics
  /** Whether the hub consumes its spokes' events yet. */
  ready: () => boolean
}

/** The hub's HTTP surface: it takes no hook calls, so only the probes and /metrics. */
export async function buildHubApp(deps: HubAppDeps): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })
  // No token is configured here: a route added later is refused until it is given one on purpose.
  await app.register(apiAuth, { auth: { mode: 'no-api' } })
  app.get('/healthz', async () => ({ ok: true }))
  app.get('/readyz', async (_req, reply) => (deps.ready() ? { ok: true } : reply.code(503).send({ ok: false })))
  app.get('/metrics', async (_req, reply) => reply.type(deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics()))
  return app
}
