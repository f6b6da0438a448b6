import type { Config } from '../../process/config.js'
import { KollectError, errorBody } from '../../protocol/errors.js'
import { jsonErrorSummary } from '../../protocol/json-errors.js'
import fp from 'fastify-plugin'

type FastifyFailure = Error & { code?: string; statusCode?: number; validation?: unknown }

// Every answer but a 200 carries a catalogue code: unknown paths, Fastify's own errors and
// anything a handler throws.
export const errorMapping = fp<{ config: Config }>(async (app, { config }) => {
  app.setNotFoundHandler((request, reply) => {
    const err = new KollectError('KOLLECT_ERR_HOOK_NOT_FOUND', `${request.method} ${request.url.split('?')[0]}`)
    void reply.code(err.statusCode).send(errorBody(err))
  })

  app.setErrorHandler((error: FastifyFailure, request, reply) => {
    const err = toKollectError(error, config.hookBodyLimit)
    if (err.statusCode >= 500) request.log.error({ err: error }, 'hook failed')
    else request.log.info({ code: err.code, message: err.message }, 'hook request refused')
    void reply.code(err.statusCode).send(errorBody(err))
  })
}, { name: 'kollect-errors', fastify: '5.x' })

export function toKollectError(error: FastifyFailure, bodyLimit: number): KollectError {
  if (error instanceof KollectError) return error
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new KollectError('KOLLECT_ERR_HOOK_BODY_TOO_LARGE', String(bodyLimit))
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new KollectError('KOLLECT_ERR_HOOK_BAD_JSON', jsonErrorSummary(error.message))
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new KollectError('KOLLECT_ERR_HOOK_BAD_CONTENT_TYPE')
  }
  if (error.validation) return new KollectError('KOLLECT_ERR_HOOK_BAD_REQUEST', error.message)
  if (error instanceof SyntaxError || error.statusCode === 400) return new KollectError('KOLLECT_ERR_HOOK_BAD_JSON', jsonErrorSummary(error.message))
  if (error.statusCode === 413) return new KollectError('KOLLECT_ERR_HOOK_BODY_TOO_LARGE', String(bodyLimit))
  return new KollectError('KOLLECT_ERR_INTERNAL')
}
