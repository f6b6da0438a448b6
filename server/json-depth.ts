import sjson from 'secure-json-parse'
import { KollectError } from './errors.js'
import { jsonErrorSummary } from './json-errors.js'

// JSON.parse nests as deep as a body says, but what runs after it (schema validation, a
// status echoed back, structured clone, canonical JSON) recurses: 10,000 levels overflow the
// stack half-way through a hook. One pass over the bytes bounds the nesting before parsing.
// ASCII bytes never occur inside a multi-byte UTF-8 sequence, so bytes are as good as characters.

const QUOTE = 0x22
const BACKSLASH = 0x5c

/** True when objects and arrays nest deeper than max. Text inside strings does not count; malformed JSON is left to the parser. */
export function nestsDeeperThan(bytes: Uint8Array, max: number): boolean {
  let depth = 0
  const n = bytes.length
  for (let i = 0; i < n; i++) {
    const b = bytes[i]
    if (b === QUOTE) {
      for (i++; i < n; i++) {
        const c = bytes[i]
        if (c === BACKSLASH) i++
        else if (c === QUOTE) break
      }
    } else if (b === 0x7b || b === 0x5b) {
      if (++depth > max) return true
    } else if (b === 0x7d || b === 0x5d) {
      depth--
    }
  }
  return false
}

/** A request body as JSON: bounded nesting, then the parser that refuses __proto__ and constructor keys. */
export function parseJsonBody(bytes: Buffer, maxDepth: number): unknown {
  if (nestsDeeperThan(bytes, maxDepth)) throw new KollectError('KOLLECT_ERR_HOOK_TOO_DEEP', String(maxDepth))
  try {
    return sjson.parse(bytes, undefined, { protoAction: 'error', constructorAction: 'error' })
  } catch (err) {
    throw new KollectError('KOLLECT_ERR_HOOK_BAD_JSON', jsonErrorSummary((err as Error).message))
  }
}

/** parseJsonBody as a Fastify content-type parser (parseAs: 'buffer'): its errors are KollectErrors. */
export function jsonBodyParser(maxDepth: number) {
  return (_request: unknown, bytes: string | Buffer, done: (err: Error | null, body?: unknown) => void): void => {
    let body: unknown
    try {
      body = parseJsonBody(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes), maxDepth)
    } catch (err) {
      done(err as Error)
      return
    }
    done(null, body)
  }
}
