import type { FastifyPluginAsync } from 'fastify'
import { syncProfile } from '../../../hooks/profile-sync.js'
import { syncRequest } from '../../../hooks/request.js'
import { syncSchema } from '../../protocol/request-schemas.js'
import { hookRoute, type HookRouteDeps } from './hook-route.js'

/** /hooks/profiles/sync. */
export const profileRoutes: FastifyPluginAsync<HookRouteDeps> = async (app, deps) => {
  hookRoute(app, deps, 'profiles', 'sync', syncSchema, async (body) => syncProfile(syncRequest(body), deps.config.limits))
}
