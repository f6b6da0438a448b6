import { createHash, timingSafeEqual } from 'node:crypto'

/**
 * How hook and exporter API calls are authenticated. Running open is its own mode, chosen
 * explicitly (or by `npm start` on loopback), never the side effect of a blank token.
 */
export type HookAuth = { mode: 'token'; token: string } | { mode: 'none'; reason: string }

export function authorized(header: string | undefined, auth: HookAuth): boolean {
  return auth.mode === 'none' || bearerMatches(header, auth.token)
}

/** Constant-time bearer check; hashing first makes the comparison length-independent too. */
function bearerMatches(header: string | undefined, token: string): boolean {
  if (token === '') return false
  if (typeof header !== 'string' || !header.startsWith('Bearer ')) return false
  const given = createHash('sha256').update(header.slice(7)).digest()
  const want = createHash('sha256').update(token).digest()
  return timingSafeEqual(given, want)
}

/** The Authorization header a client of the exporter API sends. */
export function authHeader(auth: HookAuth): Record<string, string> {
  return auth.mode === 'token' ? { authorization: `Bearer ${auth.token}` } : {}
}
