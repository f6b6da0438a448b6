// The fair queue needs a target sync's namespace before a child parses the body. Metacontroller
// sends `controller` first, then `parent` with its keys sorted (apiVersion, kind, metadata…), so
// parent.metadata.namespace sits in the first few KiB. This scans the raw bytes for it, tracking
// only string boundaries and nesting, and gives up past a bound. The answer decides queueing
// only: authorization and everything else use the parsed body in the child, which refuses a body
// that parses as another namespace (a duplicate key: JSON.parse keeps the last, this the first).

/** How far into the body the scan looks; managedFields and annotations come before namespace. */
const SNIFF_LIMIT = 256 * 1024

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COLON = 0x3a
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/

/** The path to the value we want, one key per object level. */
const PATH = ['parent', 'metadata', 'namespace']

/** parent.metadata.namespace of a sync request, or null when it is not found quickly or not a plain name. */
export function sniffNamespace(body: Uint8Array, limit = SNIFF_LIMIT): string | null {
  const end = Math.min(body.length, limit)
  // keys[d] is the key whose value is open at object depth d+1 (null inside arrays).
  const keys: (string | null)[] = []
  let depth = 0
  let lastString: { start: number; end: number } | null = null
  for (let i = 0; i < end; i++) {
    const c = body[i] as number
    if (isSpace(c)) continue
    if (c === QUOTE) {
      const start = i + 1
      i++
      while (i < end && body[i] !== QUOTE) i += body[i] === BACKSLASH ? 2 : 1
      if (i >= end) return null
      lastString = { start, end: i }
      continue
    }
    if (c === COLON) {
      if (!lastString || depth === 0) continue
      const key = Buffer.from(body.buffer, body.byteOffset + lastString.start, lastString.end - lastString.start).toString('latin1')
      keys[depth - 1] = key
      if (depth === PATH.length && onPath(keys, depth)) return readName(body, i + 1, end)
      continue
    }
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      keys[depth] = null
      depth++
      // Only the parent object can hold the namespace; skip any other value quickly once it closes.
      if (depth > 1 && !onPath(keys, depth - 1)) {
        i = skipValue(body, i, end)
        if (i < 0) return null
        depth--
        keys.length = depth
        continue
      }
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if (depth === 0) return null // not JSON
      depth--
      keys.length = depth
      if (depth <= 1 && keys[0] === 'parent') return null // parent closed without a namespace
    }
    lastString = null
  }
  return null
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
}

/** Whether the keys open at depths 1..depth are a prefix of PATH. */
function onPath(keys: (string | null)[], depth: number): boolean {
  for (let d = 0; d < depth; d++) if (keys[d] !== PATH[d]) return false
  return true
}

/** Index of the bracket closing the object or array opened at `open`, or -1. */
function skipValue(body: Uint8Array, open: number, end: number): number {
  let depth = 0
  for (let i = open; i < end; i++) {
    const c = body[i]
    if (c === QUOTE) {
      i++
      while (i < end && body[i] !== QUOTE) i += body[i] === BACKSLASH ? 2 : 1
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++
    else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      depth--
      if (depth === 0) return i
    }
  }
  return -1
}

/** A plain string value at `from` that is a Kubernetes namespace name, else null. */
function readName(body: Uint8Array, from: number, end: number): string | null {
  let i = from
  while (i < end && isSpace(body[i] as number)) i++
  if (body[i] !== QUOTE) return null
  const start = i + 1
  const stop = Math.min(end, start + 64)
  for (i = start; i < stop; i++) if (body[i] === QUOTE) break
  if (i >= stop) return null
  const name = Buffer.from(body.buffer, body.byteOffset + start, i - start).toString('latin1')
  return DNS_LABEL.test(name) ? name : null
}
