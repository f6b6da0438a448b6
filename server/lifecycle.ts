import type { FastifyInstance } from 'fastify'
import { loadConfig, type Config, type ConfigDefaults } from './config.js'
import { createLogger, type Logger } from './logger.js'

/**
 * Settings and the logger of an entry point. A bad setting stops the process before it listens,
 * with one log line naming it; running without hook authentication is said once, at warn.
 */
export function configure(name: string, env: Record<string, string | undefined> = process.env, defaults: ConfigDefaults = {}): { config: Config; logger: Logger } {
  let config: Config
  try {
    config = loadConfig(env, defaults)
  } catch (err) {
    createLogger('info', name).fatal(`invalid configuration: ${(err as Error).message}`)
    process.exit(1)
  }
  const logger = createLogger(config.logLevel, name)
  if (config.hookAuth.mode === 'none') logger.warn({ reason: config.hookAuth.reason }, 'hook authentication is disabled')
  return { config, logger }
}

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
