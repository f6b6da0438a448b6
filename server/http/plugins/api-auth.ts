import type { FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { authorized, type HookAuth } from '../../guards/auth.js'
import { KollectError } from '../../protocol/errors.js'

/** The probes and /metrics: kubelet and Prometheus call them without a token, and they only read. */
const OPEN_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics'])

/**
 * How a server's routes are authenticated: a HookAuth, or `no-api` for a server that takes no API
 * calls at all (the hub), whose every route but the probes is refused whatever the header says.
 */
export type ApiAuth = HookAuth | { mode: 'no-api' }

/** Whether the route the request matched needs no token: a probe read with GET or HEAD. */
export function isOpenRoute(request: FastifyRequest): boolean {
  return (request.method === 'GET' || request.method === 'HEAD') && OPEN_ROUTES.has(request.routeOptions.url ?? '')
}

// Registered at the root of every app before any route, so it runs on every route, those added
// later included, unless the route is a probe. It decides on the route the router matched (after
// it decoded the path), never on the request-target as sent: `/%76%31/…` and
// `http://host/v1/…` are the route `/v1/…`. A request that matched no route reaches no handler:
// the not-found handler answers it, token or not.
export const apiAuth = fp<{ auth: ApiAuth }>(async (app, { auth }) => {
  app.addHook('onRequest', async (request) => {
    if (request.is404 || isOpenRoute(request)) return
    if (auth.mode === 'no-api' || !authorized(request.headers.authorization, auth)) throw new KollectError('KOLLECT_ERR_HOOK_UNAUTHORIZED')
  })
}, { name: 'kollect-api-auth', fastify: '5.x' })
