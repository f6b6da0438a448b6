import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import { pino, type Logger } from 'pino'
import pretty from 'pino-pretty'

export type { Logger }

/** KOLLECT_LOG_FORMAT: `auto` is pretty on a terminal and JSON otherwise (pods, pipes, files). */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const
export type LogFormat = (typeof LOG_FORMATS)[number]

/** Route option for probes and scrapes: a kubelet or Prometheus calls them every few seconds. */
export const QUIET_ROUTE = { config: { quiet: true } }

const quiet = (request: FastifyRequest) => (request.routeOptions.config as { quiet?: boolean } | undefined)?.quiet === true

/**
 * Fastify's request lines, for a hook server Metacontroller calls for every parent every resync:
 * `incoming request` and a successful `request completed` at debug; a 4xx or 5xx answer stays
 * at info, an error at error. QUIET_ROUTE routes (probes, scrapes) log at debug unless they
 * error, whatever their status: a not-ready /readyz is asked every few seconds. Pass a new one as
 * Fastify's `logController`.
 */
export class QuietRequests extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    if (!this.isLogDisabled(request)) request.log.debug({ req: request }, 'incoming request')
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply, metadata?: Record<string, unknown>): void {
    if (error || (!quiet(request) && reply.statusCode >= 400)) return super.requestCompleted(error, request, reply, metadata)
    if (!this.isLogDisabled(request)) reply.log.debug({ res: reply, responseTime: reply.elapsedTime }, 'request completed')
  }
}

export function usesPretty(format: LogFormat, stdoutIsTTY = process.stdout.isTTY === true): boolean {
  return format === 'pretty' || (format === 'auto' && stdoutIsTTY)
}

// One logger for the process. Anything that may carry a credential is censored by path, and
// request bodies are never logged (they hold whole cluster objects). Pretty printing is
// synchronous to stdout, so a fatal line before exit is not lost.
export function createLogger(level: string, name: string, format: LogFormat = 'auto'): Logger {
  const options = {
    name,
    level,
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', '*.password', '*.token', '*.dsn', 'credentials', '*.credentials'],
      censor: '[redacted]',
    },
  }
  if (!usesPretty(format)) return pino(options)
  return pino(options, pretty({ sync: true, colorize: process.stdout.isTTY === true, ignore: 'pid,hostname', translateTime: 'SYS:HH:MM:ss.l' }))
}
