import type { FastifyInstance } from 'fastify'
import { loadConfig, type Config, type ConfigDefaults } from './config.js'
import { createLogger, type Logger } from './logger.js'

/**
 * Settings and the logger of an entry point. A bad setting stops the process before it listens,
 * with one log line naming it; running without hook authentication is said once, at warn.
 */
export function configure(
  name: string, env: Record<string, string | undefined> = process.env, defaults: ConfigDefaults = {},
): { config: Config; logger: Logger } {
  let config: Config
  try {
    config = loadConfig(env, defaults)
  } catch (err) {
    createLogger('info', name, 'json').fatal(`invalid configuration: ${(err as Error).message}`)
    process.exit(1)
  }
  const logger = createLogger(config.logLevel, name, config.logFormat)
  if (config.hookAuth.mode === 'none') logger.warn({ reason: config.hookAuth.reason }, 'hook authentication is disabled')
  return { config, logger }
}

/** Time after the grace period for saving the journal and closing sinks, before the process gives up. */
const SHUTDOWN_MARGIN_MS = 8_000

/**
 * SIGTERM/SIGINT: stop accepting, let the exporter finish or save what is pending within its
 * grace period, then exit 0. Any number of signals drains once. Past grace plus a margin
 * something hangs: exit 1.
 */
export function onShutdown(logger: Logger, apps: FastifyInstance[], drain: () => Promise<void> = async () => {}, graceMs = 20_000): void {
  let stopping = false
  const stop = async (signal: string) => {
    if (stopping) {
      logger.info({ signal }, 'shutdown already in progress; still draining')
      return
    }
    stopping = true
    logger.info({ signal, graceMs }, 'shutting down')
    const deadline = setTimeout(() => {
      logger.error({ afterMs: graceMs + SHUTDOWN_MARGIN_MS }, 'shutdown did not finish in time')
      process.exit(1)
    }, graceMs + SHUTDOWN_MARGIN_MS)
    deadline.unref()
    try {
      await Promise.all(apps.map((a) => a.close()))
      await drain()
    } catch (err) {
      logger.error({ err }, 'shutdown failed')
    }
    process.exit(0)
  }
  // Not once: a terminal's Ctrl-C reaches node twice (from the terminal and again from npm),
  // and a signal with no listener left kills the process mid-drain, losing a debounced export.
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
}

/** Nothing a request carries may crash the process; an unexpected rejection is logged, not fatal. */
export function guardProcess(logger: Logger): void {
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'))
}

/**
 * A local run dies with whatever started it: killing `npm start` (even with SIGKILL, which npm
 * cannot forward) must not leave a server holding the port. The start script execs node, so
 * npm is the parent; when it goes, the kernel reparents us and process.ppid changes. Polled,
 * because no signal or event reports a parent's death portably.
 */
export function exitWithParent(logger: Logger, intervalMs = 500): void {
  const parent = process.ppid
  if (parent <= 1) return
  const timer = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(timer)
    logger.warn({ parent }, 'the parent process exited; shutting down')
    process.kill(process.pid, 'SIGTERM')
  }, intervalMs)
  timer.unref()
}
