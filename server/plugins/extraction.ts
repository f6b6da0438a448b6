import type { Config } from '../config.js'
import type { PluralResolver } from '../discovery.js'
import { ExtractPool } from '../extract-pool.js'
import type { Logger } from '../logger.js'
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
  // Children take a moment to load; syncs that arrived before would spend their budget waiting.
  if (!(await pool.ready(30_000))) logger.error('extraction processes did not start within 30 s; target syncs wait for them')
}, { name: 'kollect-extraction', fastify: '5.x' })
