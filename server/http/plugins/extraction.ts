import type { FastifyInstance } from 'fastify'
import type { PluralResolver } from '../../cluster/discovery.js'
import { ExtractPool } from '../../extraction/pool.js'
import type { Config } from '../../process/config.js'
import type { Logger } from '../../process/logger.js'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyInstance {
    /** The extraction child processes that parse and extract target syncs. */
    extractPool: ExtractPool
  }
}

// The pool lives as long as the app: started with it, closed on app.close().
export const extraction = fp<{ config: Config; logger: Logger; resolvePlural: PluralResolver }>(async (app, { config, logger, resolvePlural }) => {
  const pool = new ExtractPool({
    size: config.extractWorkers || undefined,
    reserve: config.extractReserve,
    timeoutMs: config.syncTimeoutMs,
    memoryMb: config.workerMemoryMb,
    limits: config.limits,
    resolvePlural,
    log: (message, fields) => logger.warn(fields, message),
  })
  app.decorate('extractPool', pool)
  app.addHook('onClose', async () => pool.close())
}, { name: 'kollect-extraction', fastify: '5.x' })

/** How long start-up waits for the extraction children before it listens anyway. */
const EXTRACT_START_WAIT_MS = 30_000

/**
 * Children take a moment to load; syncs that arrived before would spend their budget waiting.
 * Called once the plugins are registered, not from one: Fastify gives a plugin 10 s
 * (pluginTimeout), less than a loaded machine takes to start the children, and then exits.
 */
export async function extractionStarted(app: FastifyInstance, logger: Logger): Promise<void> {
  if (!(await app.extractPool.ready(EXTRACT_START_WAIT_MS))) {
    logger.error(`extraction processes did not start within ${EXTRACT_START_WAIT_MS / 1000} s; target syncs wait for them`)
  }
}
