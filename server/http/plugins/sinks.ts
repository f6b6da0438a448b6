import type { FastifyPluginAsync } from 'fastify'
import type { KollectSinkSpec } from '../../../api/types.js'
import { parentRef, parentSpec, syncRequest, type CustomizeRequest } from '../../../hooks/request.js'
import { customizeSink, mayCheck, reviewSink, sinkSyncResponse } from '../../../hooks/sink-sync.js'
import { checkEndpoint } from '../../guards/ssrf.js'
import { customizeSchema, syncSchema } from '../../protocol/request-schemas.js'
import { callExporter, hookRoute, type HookRouteDeps } from './hook-route.js'

/** /hooks/sinks/{customize,sync}. */
export const sinkRoutes: FastifyPluginAsync<HookRouteDeps> = async (app, deps) => {
  const { config, exporter } = deps
  hookRoute(app, deps, 'sinks', 'customize', customizeSchema, async (body) => customizeSink(body as CustomizeRequest))
  hookRoute(app, deps, 'sinks', 'sync', syncSchema, async (body) => {
    const req = syncRequest(body)
    const policy = { checkEndpoint: (url: string) => checkEndpoint(url, config.allowPrivateSinks) }
    // Reachability only for a valid configuration whose Secret the scope allows: a refused
    // endpoint is never contacted, and a refused Secret never read.
    const review = reviewSink(req, policy)
    const check = mayCheck(review)
      ? await callExporter(() => exporter.checkSink({ ...parentRef(req.parent), spec: parentSpec<KollectSinkSpec>(req.parent) }))
      : undefined
    return sinkSyncResponse(req, review, check)
  })
}
