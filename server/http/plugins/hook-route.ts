import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ExporterClient } from '../../../api/types.js'
import type { PluralResolver } from '../../cluster/discovery.js'
import type { Config } from '../../process/config.js'
import type { Metrics } from '../../process/metrics.js'
import { KollectError } from '../../protocol/errors.js'
import { toKollectError } from './errors.js'

/** What the hook route plugins need: a part of HooksDeps. */
export interface HookRouteDeps {
  config: Config
  metrics: Metrics
  exporter: ExporterClient
  resolvePlural: PluralResolver
}

export type Handler = (body: unknown, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>

/** POST /hooks/<kind>/<hook>: the raised body limit, the envelope schema and the duration metric. */
export function hookRoute(app: FastifyInstance, deps: HookRouteDeps, kind: string, hook: string, schema: object | null, handler: Handler): void {
  const { config, metrics } = deps
  const options = { bodyLimit: config.hookBodyLimit, ...(schema ? { schema: { body: schema } } : {}) }
  app.post(`/hooks/${kind}/${hook}`, options, async (request: FastifyRequest, reply: FastifyReply) => {
    const end = metrics.hookDuration.startTimer({ kind, hook })
    try {
      const result = await handler(request.body, request, reply)
      end({ code: '200' })
      return reply.code(200).send(result)
    } catch (err) {
      end({ code: String(toKollectError(err as Error, config.hookBodyLimit).statusCode) })
      throw err
    }
  })
}

export async function callExporter<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    throw new KollectError('KOLLECT_ERR_EXPORTER_UNAVAILABLE', (err as Error).message)
  }
}
