import { isAscii } from 'node:buffer'
import sjson from 'secure-json-parse'
import { KollectError } from './errors.js'
import { jsonErrorSummary } from './json-errors.js'

// JSON.parse nests as deep as a body says, but what runs after it (schema validation, a
// status echoed back, structured clone, canonical JSON) recurses: 10,000 levels overflow the
// stack half-way through a hook. One pass over the bytes bounds the nesting before parsing.
// ASCII bytes never occur inside a multi-byte UTF-8 sequence, so bytes are as good as characters.

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const PROTO = Buffer.from('__proto__')
const CONSTRUCTOR = Buffer.from('constructor')
const METADATA_KEY = Buffer.from('metadata":{')
const MANAGED_FIELDS_KEY = Buffer.from('managedFields":[')

/** What one pass over a body found: nesting past the bound, or keys secure-json-parse must look at. */
export const enum Scan {
  Plain,
  /** A string starting __proto__ or constructor, or a \u escape of _ or a letter (which could spell one). */
  Suspect,
  TooDeep,
}

function startsWith(bytes: Uint8Array, at: number, word: Uint8Array): boolean {
  for (let j = 0; j < word.length; j++) if (bytes[at + j] !== word[j]) return false
  return true
}

/** Where a scan of a body that is still arriving stopped: scanJsonFrom() goes on from it. */
export interface JsonScanState {
  at: number
  depth: number
  inString: boolean
  suspect: boolean
  tooDeep: boolean
  /** Places to note on the way (ScanMark). */
  marks?: ScanMark[]
  /** The objects' managedFields to note on the way (ManagedFieldsCuts). */
  cuts?: ManagedFieldsCuts
}

/**
 * Where the objects of the map that opens at from hold `metadata.managedFields`, the list the API
 * server keeps of who set which field: a quarter of a realistic Deployment's bytes, which no
 * expression of most profiles reads (server/extraction/incremental.ts leaves them out then).
 * Noted as Go writes a map: `,"managedFields":[` right after another member of an object
 * `"metadata":{` at depth (the objects' own depth), up to the `]` that closes it, followed by `,`
 * or `}`. Anything else (white space, another shape) is simply not noted.
 */
export interface ManagedFieldsCuts {
  /** The `{` of the objects' map; only what follows it is noted. */
  from: number
  /** The objects' depth: one past the map's. */
  depth: number
  /** [start, end) pairs in order: from the comma before the key to the list's `]`. */
  ranges: number[]
  /** Past the map's `}` once it has closed (-1 before): nothing after it is noted. */
  end: number
  /** Whether the object member being read is metadata; where a cut whose `]` has not come started (-1: none). */
  inMetadata: boolean
  open: number
}

export const managedFieldsCuts = (from: number, depth: number): ManagedFieldsCuts => ({ from, depth, ranges: [], end: -1, inMetadata: false, open: -1 })

/** The first close bracket at or past after that brings the nesting back to depth: at is the index past it (-1: none yet). */
export interface ScanMark {
  depth: number
  after: number
  at: number
}

export const jsonScanStart = (): JsonScanState => ({ at: 0, depth: 0, inString: false, suspect: false, tooDeep: false })

/** The longest look past a byte the scan takes: a quote and the managedFields key with its colon and bracket. */
export const SCAN_LOOKAHEAD = 1 + MANAGED_FIELDS_KEY.length

/**
 * Bounds the nesting (text inside strings does not count; malformed JSON is left to the parser)
 * and, in the same pass, notes whether plain JSON.parse would give what secure-json-parse gives:
 * it does unless some key spells __proto__ or constructor, literally or with \u00XX escapes.
 */
export function scanJson(bytes: Uint8Array, max: number): Scan {
  const state = jsonScanStart()
  scanJsonFrom(bytes, max, state, bytes.length)
  return scanResult(state)
}

export const scanResult = (state: JsonScanState): Scan => state.tooDeep ? Scan.TooDeep : state.suspect ? Scan.Suspect : Scan.Plain

/** A scan that went on as a body arrived, finished at the body's end: undefined past max (the child scans it again and refuses it). */
export function scanToEnd(bytes: Uint8Array, max: number, state: JsonScanState, end: number): Scan.Plain | Scan.Suspect | undefined {
  if (!scanJsonFrom(bytes, max, state, end)) return undefined
  const scan = scanResult(state)
  return scan === Scan.TooDeep ? undefined : scan
}

/**
 * scanJson over bytes from state.at up to end, and on from there when more has come: end at least
 * SCAN_LOOKAHEAD short of the bytes that have come, so that what a byte looks past is there.
 * Returns false once the nesting passed max.
 */
export function scanJsonFrom(bytes: Uint8Array, max: number, state: JsonScanState, end: number): boolean {
  if (state.tooDeep) return false
  let i = state.at
  if (state.inString) {
    i = stringEnd(bytes, i, end, state)
    if (i >= end) {
      state.at = i
      return true
    }
    state.inString = false
    i++
  }
  let depth = state.depth
  const marks = state.marks
  const cuts = state.cuts
  // Only strings at the objects' depth or in their members, and brackets closing to those, are looked at.
  const keyDepth = cuts === undefined ? -10 : cuts.depth
  for (; i < end; i++) {
    const b = bytes[i]
    if (b === QUOTE) {
      const first = bytes[i + 1]
      if ((first === 0x5f && startsWith(bytes, i + 1, PROTO)) || (first === 0x63 && startsWith(bytes, i + 1, CONSTRUCTOR))) state.suspect = true
      if (depth === keyDepth || depth === keyDepth + 1) noteKey(bytes, i, depth, cuts as ManagedFieldsCuts)
      i = stringEnd(bytes, i + 1, end, state)
      // The string's end has not come: go on inside it next time.
      if (i >= end) {
        state.inString = true
        break
      }
    } else if (b === 0x7b || b === 0x5b) {
      if (++depth > max) {
        state.tooDeep = true
        return false
      }
    } else if (b === 0x7d || b === 0x5d) {
      depth--
      if (marks) note(marks, depth, i)
      if (depth === keyDepth + 1 || depth === keyDepth - 2) noteClose(bytes, i, depth, cuts as ManagedFieldsCuts)
    }
  }
  state.at = i
  state.depth = depth
  return true
}

function note(marks: ScanMark[], depth: number, i: number): void {
  for (const mark of marks) if (mark.at < 0 && depth === mark.depth && i >= mark.after) mark.at = i + 1
}

/** A string that opens at i: at the objects' depth, whether it is the metadata key; in metadata, whether a cut opens. */
function noteKey(bytes: Uint8Array, i: number, depth: number, cuts: ManagedFieldsCuts): void {
  if (i <= cuts.from || cuts.end >= 0) return
  const first = bytes[i + 1]
  if (depth === cuts.depth) cuts.inMetadata = first === 0x6d && startsWith(bytes, i + 1, METADATA_KEY)
  else if (depth === cuts.depth + 1 && cuts.inMetadata && first === 0x6d && bytes[i - 1] === COMMA && endsValue(bytes[i - 2]) &&
    startsWith(bytes, i + 1, MANAGED_FIELDS_KEY)) cuts.open = i - 1
}

/** A bracket at i closed, leaving depth: the list of an open cut, or the objects' map. */
function noteClose(bytes: Uint8Array, i: number, depth: number, cuts: ManagedFieldsCuts): void {
  if (i <= cuts.from || cuts.end >= 0) return
  if (depth === cuts.depth + 1 && cuts.open >= 0) {
    const next = bytes[i + 1]
    if (bytes[i] === 0x5d && (next === COMMA || next === 0x7d)) cuts.ranges.push(cuts.open, i + 1)
    cuts.open = -1
  } else if (depth === cuts.depth - 2) cuts.end = i + 1
}

/** The last byte of a JSON value: a string's quote, a bracket, a digit, or true/false/null's last letter. */
function endsValue(c: number | undefined): boolean {
  return c === QUOTE || c === 0x7d || c === 0x5d || c === 0x65 || c === 0x6c || (c !== undefined && c >= 0x30 && c <= 0x39)
}

/** The index of the quote that ends the string at i, or end (or past it) if that has not come. */
function stringEnd(bytes: Uint8Array, i: number, end: number, state: JsonScanState): number {
  for (; i < end; i++) {
    const c = bytes[i]
    if (c === BACKSLASH) {
      // \u005X, \u006X, \u007X: the escapes of _ and of every letter in either word.
      const digit = bytes[i + 4] ?? 0
      if (bytes[i + 1] === 0x75 && bytes[i + 2] === 0x30 && bytes[i + 3] === 0x30 && digit >= 0x35 && digit <= 0x37) state.suspect = true
      // The escaped byte is skipped, even when it is past end: the scan goes on after it.
      i++
    } else if (c === QUOTE) return i
  }
  return i
}

export type JsonRead = { ok: true; value: unknown } | { ok: false; code: 'KOLLECT_ERR_HOOK_TOO_DEEP' | 'KOLLECT_ERR_HOOK_BAD_JSON'; detail: string }

/**
 * A request body as JSON: bounded nesting, and no __proto__ key nor constructor key with a
 * prototype (secure-json-parse). When the scan saw no text that could spell either key, plain
 * JSON.parse gives the same value without secure-json-parse's two regex passes over the text.
 * scanned: what scanJson() gave for these bytes already (as they arrived), within maxDepth.
 */
export function readJson(bytes: Buffer, maxDepth: number, scanned?: Scan.Plain | Scan.Suspect): JsonRead {
  const scan = scanned ?? scanJson(bytes, maxDepth)
  if (scan === Scan.TooDeep) return { ok: false, code: 'KOLLECT_ERR_HOOK_TOO_DEEP', detail: String(maxDepth) }
  try {
    // Go escapes nothing past ASCII, but most bodies hold none: the ASCII decoder is about twice as fast as UTF-8's, and gives the same text then.
    const text = bytes.toString(isAscii(bytes) ? 'ascii' : 'utf8')
    // secure-json-parse also drops a leading byte order mark, which JSON.parse refuses.
    const value = scan === Scan.Plain && text.charCodeAt(0) !== 0xfeff
      ? JSON.parse(text) as unknown
      : sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
    return { ok: true, value }
  } catch (err) {
    return { ok: false, code: 'KOLLECT_ERR_HOOK_BAD_JSON', detail: jsonErrorSummary((err as Error).message) }
  }
}

/** readJson for a route: its problems are KollectErrors. */
function parseJsonBody(bytes: Buffer, maxDepth: number): unknown {
  const read = readJson(bytes, maxDepth)
  if (!read.ok) throw new KollectError(read.code, read.detail)
  return read.value
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
