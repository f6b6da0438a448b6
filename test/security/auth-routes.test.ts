import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { createHubMetrics } from '../../hub/metrics.js'
import { EXPORTER_ROUTES } from '../../server/exporter-api/routes.js'
import { buildExporterApp, reportBodyLimit } from '../../server/exporter-api/server.js'
import { buildHubApp } from '../../server/http/hub-app.js'
import { createLogger } from '../../server/process/logger.js'
import { createMetrics } from '../../server/process/metrics.js'
import { startHooksServer, type HooksServer } from '../support/hooks-server.js'
import { ROUTES, recordingListener, send, type RecordingListener } from './support.js'

// Issue 24, F1 and goal 2: every route of every HTTP surface (the hooks, the exporter API, the
// hub) needs the token, decided on the path the router matched, not on the request-target as
// sent. The routes come from the apps themselves (printRoutes), so a route added later is in the
// table without anyone listing it; each surface also gets such a route before it listens.
// Real listening servers and raw request-targets: nothing between the test and the socket
// normalises the path.

const TOKEN = 'auth-routes-token-5b1e90'
const TEAM_B_TOKEN = 'team-b-git-token-SECRET-9c2d'
const PROBES = new Set(['/healthz', '/readyz', '/metrics'])
const UNAUTHORIZED = { code: 'KOLLECT_ERR_HOOK_UNAUTHORIZED', message: 'unauthorized' }
/** What a route added after this change answers, were it reached. */
const FUTURE_SECRET = 'FUTURE-ROUTE-SECRET'

interface Route { method: string; url: string }

/** Every route of an app, from Fastify's own listing (one line per path node, nested by 4 columns). */
function routesOf(app: FastifyInstance): Route[] {
  const routes: Route[] = []
  const path: string[] = []
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^((?:│ {3}| {4})*)[├└]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line)
    if (!m) continue
    path.length = (m[1] ?? '').length / 4
    path.push(m[2] ?? '')
    for (const method of m[3]?.split(', ') ?? []) routes.push({ method, url: path.join('') })
  }
  return routes
}

const pct = (c: string) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`

/**
 * Spellings of a route's path. `same`: the router decodes it to the route itself, so only the
 * token may open it (401). Otherwise the router may or may not match it: 401 or 404, never the route.
 */
const SPELLINGS: { reason: string; spell: (p: string) => string; same: boolean }[] = [
  { reason: 'as registered', spell: (p) => p, same: true },
  { reason: 'the first segment percent-encoded (/%76%31/…)', spell: (p) => p.replace(/^\/[^/]*/, (seg) => `/${[...seg.slice(1)].map(pct).join('')}`), same: true },
  { reason: 'the first letter percent-encoded (/%68ooks/…)', spell: (p) => `/${pct(p[1] ?? '')}${p.slice(2)}`, same: true },
  { reason: 'the first letter of each segment percent-encoded', spell: (p) => p.replace(/\/([^/])/g, (_, c: string) => `/${pct(c)}`), same: true },
  { reason: 'every letter percent-encoded, in upper-case hex', spell: (p) => p.replace(/[^/]/g, (c) => pct(c).toUpperCase()), same: true },
  { reason: 'an absolute-form request-target', spell: (p) => `http://kollect${p}`, same: true },
  { reason: 'a query string', spell: (p) => `${p}?access_token=${TOKEN}`, same: true },
  { reason: 'every slash but the first as %2F', spell: (p) => `/${p.slice(1).replaceAll('/', '%2F')}`, same: false },
  { reason: 'the last slash as %2f', spell: (p) => p.replace(/(.)\/([^/]*)$/, '$1%2f$2'), same: false },
  { reason: 'doubled slashes (//v1//sinks/check)', spell: (p) => p.replaceAll('/', '//'), same: false },
  { reason: 'a dot-dot segment in front (/x/../v1/…)', spell: (p) => `/x/..${p}`, same: false },
  { reason: 'a dot segment after the first segment (/v1/./…)', spell: (p) => p.replace(/^(\/[^/]*)/, '$1/.'), same: false },
  { reason: 'upper case (/V1/…, /HOOKS/…)', spell: (p) => p.toUpperCase(), same: false },
  { reason: 'a trailing slash', spell: (p) => `${p}/`, same: false },
  { reason: 'an encoded dot-dot segment in front (/x/%2e%2e/…)', spell: (p) => `/x/%2e%2e${p}`, same: false },
]

const CREDENTIALS: { reason: string; headers: Record<string, string> }[] = [
  { reason: 'no token', headers: {} },
  { reason: 'a wrong token', headers: { Authorization: `Bearer not-${TOKEN}` } },
  { reason: 'the token in another scheme', headers: { Authorization: `Token ${TOKEN}` } },
]

/** A route as a later change would add it: the guard must cover it without being told. */
function addFutureRoutes(app: FastifyInstance): void {
  app.get('/future', async () => ({ secret: FUTURE_SECRET }))
  app.post('/v1/future', async () => ({ secret: FUTURE_SECRET }))
}

interface Surface {
  name: string
  url: string
  app: FastifyInstance
  /** Routes the surface must have: the listing is checked against them. */
  known: string[]
  /** Whether the token opens its routes (the hub takes no API calls: nothing opens them). */
  takesToken: boolean
}

let listener: RecordingListener
let hooks: HooksServer
let exporterApi: FastifyInstance
let hubApi: FastifyInstance
const surfaces: Surface[] = []

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
}

before(async () => {
  listener = await recordingListener()
  hooks = await startHooksServer({ KOLLECT_HOOK_TOKEN: TOKEN, KOLLECT_SECRET_TEAM_B__TEAMB_GIT__TOKEN: TEAM_B_TOKEN }, { beforeListen: addFutureRoutes })
  // The exporter sidecar's API over the hooks server's exporter, as main-exporter builds it.
  exporterApi = await buildExporterApp({
    exporter: hooks.exporter, auth: hooks.config.hookAuth, bodyLimit: 1024 * 1024, reportBodyLimit: reportBodyLimit(hooks.exporter.budgetBytes.namespace),
    maxJsonDepth: 512, logger: createLogger('silent', 'test'), metrics: createMetrics('exporter'),
  })
  addFutureRoutes(exporterApi)
  hubApi = await buildHubApp({ metrics: createHubMetrics(), ready: () => true })
  addFutureRoutes(hubApi)
  surfaces.push(
    { name: 'hooks', url: hooks.url, app: hooks.app, known: Object.values(ROUTES), takesToken: true },
    { name: 'exporter', url: await listen(exporterApi), app: exporterApi, known: Object.values(EXPORTER_ROUTES), takesToken: true },
    { name: 'hub', url: await listen(hubApi), app: hubApi, known: [...PROBES], takesToken: false },
  )
})
after(async () => {
  await hubApi?.close()
  await exporterApi?.close()
  await hooks?.close()
  await listener?.close()
})

describe('F1: the exporter API through a percent-encoded path', () => {
  // A sink check's answer is remembered per sink: each test checks a sink of its own.
  const steal = (name: string) => JSON.stringify({ namespace: 'team-b', name, spec: { type: 'git', git: { url: `${listener.url}/x.git` }, secretRef: { name: 'teamb-git' } } })

  test('POST /%76%31/sinks/check without a token is a 401, and the attacker\'s git server sees nothing', async () => {
    listener.reset()
    const exporter = surfaces[1]?.url ?? ''
    const res = await send(exporter, EXPORTER_ROUTES.checkSink, { rawPath: '/%76%31/sinks/check', body: steal('steal') })
    assert.equal(res.status, 401, res.text)
    assert.deepEqual(res.json(), UNAUTHORIZED)
    assert.deepEqual(listener.requests, [])
    assert.equal(listener.connections, 0)
  })

  test('with the token the same check does reach the sink with team-b\'s credential: the leak the 401 closes', async () => {
    listener.reset()
    const exporter = surfaces[1]?.url ?? ''
    const res = await send(exporter, EXPORTER_ROUTES.checkSink, { body: steal('steal-with-token'), headers: { Authorization: `Bearer ${TOKEN}` } })
    assert.equal(res.status, 200, res.text)
    const sent = listener.requests.map((r) => Buffer.from((r.authorization ?? '').replace(/^Basic /, ''), 'base64').toString())
    assert.ok(sent.includes(`x-access-token:${TEAM_B_TOKEN}`), JSON.stringify(sent))
  })
})

describe('goal 2: every route of every surface needs the token, however its path is spelled', () => {
  test('the listing of each app has its known routes and the route added before listening', () => {
    for (const s of surfaces) {
      const urls = new Set(routesOf(s.app).map((r) => r.url))
      for (const url of [...s.known, '/future', '/v1/future']) assert.ok(urls.has(url), `${s.name} lists ${url}: ${[...urls].join(' ')}`)
    }
  })

  test('every route that is not a probe refuses every spelling of its path without the token', async () => {
    const wrong: string[] = []
    for (const s of surfaces) {
      for (const route of routesOf(s.app).filter((r) => !PROBES.has(r.url))) {
        for (const { reason, spell, same } of SPELLINGS) {
          for (const credential of CREDENTIALS) {
            const rawPath = spell(route.url)
            const res = await send(s.url, route.url, { method: route.method, rawPath, headers: credential.headers, ...(route.method === 'POST' ? { body: '{}' } : {}) })
            const ok = same ? res.status === 401 : res.status === 401 || res.status === 404
            const leaked = res.text.includes(FUTURE_SECRET)
            if (!ok || leaked) wrong.push(`${s.name} ${route.method} ${rawPath} (${reason}, ${credential.reason}): ${res.status} ${res.text.slice(0, 120)}`)
          }
        }
      }
    }
    assert.deepEqual(wrong, [])
  })

  test('the token opens every route of the hooks and the exporter, and nothing opens the hub\'s', async () => {
    const wrong: string[] = []
    for (const s of surfaces) {
      for (const route of routesOf(s.app).filter((r) => !PROBES.has(r.url))) {
        const res = await send(s.url, route.url, { method: route.method, headers: { Authorization: `Bearer ${TOKEN}` }, ...(route.method === 'POST' ? { body: '{}' } : {}) })
        if ((res.status === 401) === s.takesToken) wrong.push(`${s.name} ${route.method} ${route.url}: ${res.status} ${res.text.slice(0, 120)}`)
      }
    }
    assert.deepEqual(wrong, [])
  })

  test('the probes and /metrics answer without a token, as kubelet and Prometheus call them', async () => {
    const wrong: string[] = []
    for (const s of surfaces) {
      const probes = routesOf(s.app).filter((r) => PROBES.has(r.url))
      assert.deepEqual(new Set(probes.map((r) => r.url)), PROBES, s.name)
      for (const route of probes) {
        const res = await send(s.url, route.url, { method: route.method })
        if (res.status !== 200) wrong.push(`${s.name} ${route.method} ${route.url}: ${res.status}`)
      }
    }
    assert.deepEqual(wrong, [])
  })

  test('a path that matches no route answers 401 or 404 and says nothing more', async () => {
    const wrong: string[] = []
    for (const s of surfaces) {
      for (const rawPath of ['/nope', '/v1/nope', '/%76%31/nope', '/hooks/nope/sync', '/healthz/x', '*']) {
        for (const method of ['GET', 'POST', 'DELETE']) {
          const res = await send(s.url, rawPath, { method, rawPath, ...(method === 'POST' ? { body: '{}' } : {}) })
          if (res.status !== 401 && res.status !== 404) wrong.push(`${s.name} ${method} ${rawPath}: ${res.status} ${res.text.slice(0, 120)}`)
        }
      }
    }
    assert.deepEqual(wrong, [])
  })
})
