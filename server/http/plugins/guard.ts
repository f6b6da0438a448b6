import type { Config } from '../../process/config.js'
import type { Metrics } from '../../process/metrics.js'
import { KollectError } from '../../protocol/errors.js'
import fp from 'fastify-plugin'

// Registered in the context that holds the hook routes, so it runs on them and on nothing else
// (not matched on the raw URL, which the router decodes first): the in-flight bounds, after the
// bearer check of api-auth.ts, so an unauthenticated request never takes a place. A body without
// Content-Length (chunked) counts as the largest body allowed.
export const guard = fp<{ config: Config; metrics: Metrics }>(async (app, { config, metrics }) => {
  let inflight = 0
  let inflightBytes = 0
  app.addHook('onRequest', async (request, reply) => {
    const declared = request.headers['content-length']
    const bytes = declared === undefined ? config.hookBodyLimit : Number(declared) || 0
    if (inflight >= config.maxInflightRequests || (inflight > 0 && inflightBytes + bytes > config.maxInflightBytes)) {
      metrics.hookShed.inc({ reason: inflight >= config.maxInflightRequests ? 'requests' : 'bytes' })
      reply.header('Retry-After', '1')
      throw new KollectError('KOLLECT_ERR_HOOK_OVERLOADED', '1')
    }
    inflight++
    inflightBytes += bytes
    let released = false
    reply.raw.once('close', () => {
      if (released) return
      released = true
      inflight--
      inflightBytes -= bytes
    })
  })
}, { name: 'kollect-guard', fastify: '5.x' })
