import type { FastifyPluginAsync } from 'fastify'
import { QUIET_ROUTE } from '../../process/logger.js'
import type { Metrics } from '../../process/metrics.js'

export interface ProbeDeps {
  metrics: Metrics
  /** Extra readiness check (the exporter reachable); healthz never calls it. */
  ready?: () => Promise<boolean>
  /** More exposition text for /metrics: the exporter sidecar's, which listens on loopback only. */
  moreMetrics?: () => Promise<string>
}

/** GET /healthz, /readyz and /metrics: no token, no in-flight bounds. */
export const probes: FastifyPluginAsync<ProbeDeps> = async (app, deps) => {
  const { metrics } = deps
  app.get('/healthz', QUIET_ROUTE, async () => ({ status: 'ok' }))
  app.get('/readyz', QUIET_ROUTE, async (_request, reply) => {
    const ok = deps.ready ? await deps.ready().catch(() => false) : true
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ready' : 'not ready' })
  })
  app.get('/metrics', QUIET_ROUTE, async (_request, reply) => {
    const own = await metrics.registry.metrics()
    const more = deps.moreMetrics ? await deps.moreMetrics().catch(() => '') : ''
    return reply.type(metrics.registry.contentType).send(more ? `${own}\n${more}` : own)
  })
}
