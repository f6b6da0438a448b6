import { lookup } from 'node:dns/promises'
import net from 'node:net'

// Sinks are user-configured endpoints the exporter connects to from inside the cluster. Unless
// the operator allows private sinks, refuse the addresses that reach the node or the cloud
// metadata service. Cluster-private ranges (10/8 …) are where in-cluster services live, so they stay allowed.
const BLOCKED_NAMES = new Set(['localhost', 'metadata', 'metadata.google.internal', 'metadata.azure.com', 'instance-data'])

export function blockedAddress(ip: string): string | null {
  const v = net.isIP(ip)
  if (v === 4) {
    const [a, b] = ip.split('.').map(Number) as [number, number]
    if (a === 127) return 'a loopback address'
    if (a === 0) return 'an unspecified address'
    if (a === 169 && b === 254) return 'a link-local or metadata address'
    if (a === 100 && b === 100 && ip === '100.100.100.200') return 'a metadata address'
    return null
  }
  if (v === 6) {
    const x = ip.toLowerCase()
    if (x === '::1' || x === '::') return 'a loopback address'
    if (/^fe[89ab]/.test(x)) return 'a link-local address'
    if (x.startsWith('fd00:ec2::254')) return 'a metadata address'
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(x)
    if (mapped) return blockedAddress(mapped[1] as string)
    return null
  }
  return null
}

export function hostOf(url: string): string | null {
  try {
    const u = new URL(url)
    return u.hostname.replace(/^\[|\]$/g, '') || null
  } catch {
    // scp-like git URLs: user@host:path
    const m = /^[^@/]+@([^:/]+):/.exec(url)
    return m ? (m[1] as string) : null
  }
}

/** Static check, usable in a pure hook: refuses literal loopback, link-local and metadata hosts. */
export function checkEndpoint(url: string, allowPrivate: boolean): string | null {
  if (allowPrivate) return null
  if (/^file:/i.test(url) || url.startsWith('/')) return 'local paths are not allowed as sink endpoints'
  const host = hostOf(url)
  if (!host) return 'the endpoint URL cannot be parsed'
  const h = host.toLowerCase()
  if (BLOCKED_NAMES.has(h) || h.endsWith('.localhost')) return `host ${host} is not allowed (private sinks are disabled)`
  const why = blockedAddress(h)
  return why ? `host ${host} is ${why} (private sinks are disabled)` : null
}

/** The same check after DNS, so a name that resolves to loopback or metadata is refused too. */
export async function checkResolvedEndpoint(url: string, allowPrivate: boolean): Promise<string | null> {
  const direct = checkEndpoint(url, allowPrivate)
  if (direct || allowPrivate) return direct
  const host = hostOf(url) as string
  if (net.isIP(host)) return null
  try {
    const addrs = await lookup(host, { all: true })
    for (const a of addrs) {
      const why = blockedAddress(a.address)
      if (why) return `host ${host} resolves to ${why} (private sinks are disabled)`
    }
  } catch {
    return null // unresolvable now: the sink's own connect fails and is retried
  }
  return null
}
