import { createHash, timingSafeEqual } from 'node:crypto'

/** Constant-time bearer check; hashing first makes the comparison length-independent too. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  if (!token) return true
  if (typeof header !== 'string' || !header.startsWith('Bearer ')) return false
  const given = createHash('sha256').update(header.slice(7)).digest()
  const want = createHash('sha256').update(token).digest()
  return timingSafeEqual(given, want)
}
