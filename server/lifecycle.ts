import type { FastifyInstance } from 'fastify'
import type { Logger } from './logger.js'

/** SIGTERM/SIGINT: stop accepting, let the exporter flush what is pending, then exit. */
export function onShutdown(logger: Logger, apps: FastifyInstance[], drain: () => Promise<void> = async () => {}): void {
  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'shutting down')
    const deadline = setTimeout(() => process.exit(1), 25_000)
    deadline.unref()
    try {
      await Promise.all(apps.map((a) => a.close()))
      await drain()
    } catch (err) {
      logger.error({ err }, 'shutdown failed')
    }
    process.exit(0)
  }
  process.once('SIGTERM', () => void stop('SIGTERM'))
  process.once('SIGINT', () => void stop('SIGINT'))
}

/** Nothing a request carries may crash the process; an unexpected rejection is logged, not fatal. */
export function guardProcess(logger: Logger): void {
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'))
}
