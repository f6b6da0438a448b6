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
    const g = ipv6Groups(ip)
    if (g.every((x) => x === 0) || (g.slice(0, 7).every((x) => x === 0) && g[7] === 1)) return 'a loopback address'
    if (((g[0] as number) & 0xffc0) === 0xfe80) return 'a link-local address'
    if (g[0] === 0xfd00 && g[1] === 0x0ec2 && g.slice(2, 7).every((x) => x === 0) && g[7] === 0x254) return 'a metadata address'
    // IPv4 inside IPv6: mapped (::ffff:a.b.c.d, also written ::ffff:7f00:1), compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d).
    const embedded = (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) ||
      (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0))
    if (embedded) return blockedAddress(`${(g[6] as number) >> 8}.${(g[6] as number) & 255}.${(g[7] as number) >> 8}.${(g[7] as number) & 255}`)
    return null
  }
  return null
}

/** The eight 16-bit groups of an IPv6 address (net.isIP has accepted it). */
function ipv6Groups(ip: string): number[] {
  let text = ip.toLowerCase().split('%')[0] as string
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number]
    text = text.slice(0, dotted.index) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.includes('::') ? text.split('::') as [string, string] : [text, undefined]
  const h = head ? head.split(':') : []
  const t = tail ? tail.split(':') : []
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t]
  return groups.map((x) => parseInt(x, 16))
}

function hostOf(url: string): string | null {
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
  // "localhost." is the same name as "localhost" (the root label).
  const h = host.toLowerCase().replace(/\.+$/, '')
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
