import type { ExporterClient, ReportResult, SerialisedReport, TargetReport } from '../../api/types.js'
import { authHeader, type HookAuth } from '../guards/auth.js'
import { EXPORTER_ROLE_HEADER, EXPORTER_ROUTES, type ExporterRole } from './routes.js'

/** What one exporter replica answered, and the role it said it has. */
export interface RoleAnswer<T> { value: T; role: ExporterRole }

/** The state-carrying calls, which KOLLECT_EXPORTER_PEERS sends to every replica. */
export type StateCall = 'reportTarget' | 'removeTarget' | 'applyInventory' | 'finalizeInventory'

/**
 * One exporter replica's API, each answer with the replica's role. A state call may carry its
 * argument already serialised (`body`), so a fan-out serialises a large report once for every replica.
 */
export type RoleAwareClient = {
  [K in StateCall]: (arg: Parameters<ExporterClient[K]>[0], body?: string | Uint8Array) => Promise<RoleAnswer<Awaited<ReturnType<ExporterClient[K]>>>>
} & {
  checkSink: ExporterClient['checkSink']
  holdsReport: ExporterClient['holdsReport']
  ping(): Promise<boolean>
  metrics(): Promise<string>
}

export function roleAwareExporterClient(baseUrl: string, auth: HookAuth, timeoutMs = 8000): RoleAwareClient {
  const post = async (route: string, body: string | Uint8Array) => {
    const res = await fetch(baseUrl + route, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...authHeader(auth) },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    })
    const header = res.headers.get(EXPORTER_ROLE_HEADER)
    const role: ExporterRole = header === 'active' || header === 'standby' ? header : 'unknown'
    return { ok: res.ok, status: res.status, text: await res.text(), role }
  }
  const call = async <T>(route: string, arg: unknown, body: string | Uint8Array = JSON.stringify(arg)): Promise<RoleAnswer<T>> => {
    const res = await post(route, body)
    if (!res.ok) throw new Error(`exporter answered ${res.status}: ${res.text.slice(0, 200)}`)
    return { value: JSON.parse(res.text) as T, role: res.role }
  }
  const report = async (r: TargetReport | SerialisedReport, body = reportBody(r)): Promise<RoleAnswer<ReportResult>> => {
    const res = await post(EXPORTER_ROUTES.reportTarget, body)
    if (res.status === 413) {
      const reason = (JSON.parse(res.text) as { message?: string }).message
      const items = 'json' in r ? r.itemCount : r.items.length
      const bytes = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength
      const message = `the exporter refused a report of ${items} items (${bytes} bytes of JSON): ${reason}; ` +
        'split the target or trim the profile'
      return { value: { accepted: false, reason: 'ResourceLimit', message }, role: res.role }
    }
    if (!res.ok) throw new Error(`exporter answered ${res.status}: ${res.text.slice(0, 200)}`)
    return { value: reportResultOf(JSON.parse(res.text) as Record<string, unknown>), role: res.role }
  }
  // One report in flight at a time: the exporter then parses at most one report body at once,
  // which is what its memory sizing assumes.
  let reports: Promise<unknown> = Promise.resolve()
  return {
    reportTarget: (r, body) => {
      const run = reports.then(() => report(r, body))
      reports = run.catch(() => undefined)
      return run
    },
    removeTarget: (t, body) => call(EXPORTER_ROUTES.removeTarget, t, body),
    applyInventory: (c, body) => call(EXPORTER_ROUTES.applyInventory, c, body),
    finalizeInventory: (c, body) => call(EXPORTER_ROUTES.finalizeInventory, c, body),
    checkSink: async (sink) => (await call<Awaited<ReturnType<ExporterClient['checkSink']>>>(EXPORTER_ROUTES.checkSink, sink)).value,
    holdsReport: async (r) => (await call<{ held?: unknown }>(EXPORTER_ROUTES.holdsReport, r)).value.held === true,
    ping: async () => (await fetch(baseUrl + '/healthz', { signal: AbortSignal.timeout(2000) })).ok,
    metrics: async () => {
      const res = await fetch(baseUrl + '/metrics', { signal: AbortSignal.timeout(2000) })
      return res.ok ? res.text() : ''
    },
  }
}

/** What goes over the wire for a report: the child's JSON as it is, or the report serialised here. */
export function reportBody(r: TargetReport | SerialisedReport): string | Uint8Array {
  return 'json' in r ? r.json : JSON.stringify(r)
}

export type HttpExporterClient = ExporterClient & { ping(): Promise<boolean>; metrics(): Promise<string> }

/** The hooks container's side of the seam: one exporter (the sidecar, or the Service of the ready one). */
export function httpExporterClient(baseUrl: string, auth: HookAuth, timeoutMs = 8000): HttpExporterClient {
  const c = roleAwareExporterClient(baseUrl, auth, timeoutMs)
  return {
    reportTarget: async (r) => (await c.reportTarget(r)).value,
    // One exporter: it holds the report a change applies to, or says BaseMismatch.
    takesChanges: true,
    removeTarget: async (t) => { await c.removeTarget(t) },
    applyInventory: async (x) => (await c.applyInventory(x)).value,
    finalizeInventory: async (x) => (await c.finalizeInventory(x)).value,
    checkSink: c.checkSink,
    holdsReport: c.holdsReport,
    ping: c.ping,
    metrics: c.metrics,
  }
}

/** The exporter's answer, rebuilt field by field: only what the contract names reaches status. */
function reportResultOf(r: Record<string, unknown>): ReportResult {
  if (r['accepted'] !== false) {
    const staleItems = Number(r['staleItems'])
    return Number.isInteger(staleItems) && staleItems > 0 ? { accepted: true, staleItems } : { accepted: true }
  }
  if (r['reason'] === 'Stale') {
    return {
      accepted: false, reason: 'Stale', message: String(r['message']),
      heldGeneration: Number(r['heldGeneration']) || 0, heldChecksum: String(r['heldChecksum'] ?? ''),
    }
  }
  if (r['reason'] === 'BaseMismatch') return { accepted: false, reason: 'BaseMismatch', message: String(r['message']) }
  return { accepted: false, reason: 'ResourceLimit', message: String(r['message']) }
}
