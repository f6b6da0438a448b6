// Finds the members of a sync body's objects without parsing them: each member's key and the
// byte range of its value, so that an incremental target sync (server/extraction/incremental.ts)
// sends an extraction child only the objects whose bytes it has no record for.
// Only the levels a member list is read at are checked strictly (the tokens between members);
// a value is skipped by matching brackets outside strings. Anything a plain reading could see
// differently from JSON.parse (a duplicate key, an escape in a key) gives null: the caller then
// takes the whole body the ordinary way. The bytes a value holds are checked by the extraction
// child's JSON.parse, in this sync or in the one that first saw those exact bytes.
// Given the members of the last body, a member whose key is one of those and whose bytes hash
// the same is taken without reading its value: at a resync that is almost every one, and hashing
// is several times faster than reading bytes one at a time in JavaScript. Runs of known members
// (spans) hash as one: a resync of 10,000 objects then costs about 160 hashes instead of 10,000,
// whose call overhead was half of the scan.
import { createCipheriv, createSecretKey, hash, randomBytes } from 'node:crypto'

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COLON = 0x3a
const COMMA = 0x2c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d

export interface Member {
  key: string
  /** Where the key's opening quote is: body[keyStart, end) is the whole member. */
  keyStart: number
  /** The value's bytes are body[start, end). */
  start: number
  end: number
}

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
}

function skipSpace(b: Uint8Array, i: number): number {
  while (isSpace(b[i])) i++
  return i
}

/** The index just past the string that opens at i, or -1. */
function skipString(b: Uint8Array, i: number): number {
  const n = b.length
  for (i++; i < n; i++) {
    const c = b[i]
    if (c === QUOTE) return i + 1
    if (c === BACKSLASH) i++
  }
  return -1
}

/** The index just past the object or array that opens at i, or -1. */
function skipComposite(b: Uint8Array, i: number): number {
  const n = b.length
  let depth = 0
  for (; i < n; i++) {
    const c = b[i]
    if (c === QUOTE) {
      // Inlined skipString: this loop runs over every byte of a 25 MiB body.
      for (i++; i < n; i++) {
        const s = b[i]
        if (s === QUOTE) break
        if (s === BACKSLASH) i++
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++
    else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      if (--depth === 0) return i + 1
    }
  }
  return -1
}

/** The index just past the value that starts at i (a scalar ends at the next delimiter), or -1. */
function skipValue(b: Uint8Array, i: number): number {
  const c = b[i]
  if (c === OPEN_BRACE || c === OPEN_BRACKET) return skipComposite(b, i)
  if (c === QUOTE) return skipString(b, i)
  const start = i
  while (i < b.length && b[i] !== COMMA && b[i] !== CLOSE_BRACE && b[i] !== CLOSE_BRACKET && !isSpace(b[i])) i++
  return i > start ? i : -1
}

/** A member of an earlier body: a member here whose bytes hash the same is the same member. */
interface KnownMember {
  key: string
  /** Bytes from the key's opening quote to the value's end, and from there to the value. */
  length: number
  valueOffset: number
  /** SHA-256 of those bytes. */
  digest: string
  /** Where its key's quote was in its body: the members of a span keep their distances. */
  at: number
}

/** Consecutive known members, first to first + count - 1: their bytes, separators included, and their digest. */
interface KnownSpan {
  first: number
  count: number
  length: number
  digest: string
  /** Its members' digests, joined by newlines: what a body key takes for them (memberDigests). */
  digests: string
}

/** What a scan takes from an earlier body: its members in order, and spans of them that hash as one. */
export interface Known {
  members: readonly KnownMember[]
  spans: readonly KnownSpan[]
}

/** A member as scanned: digest set when its bytes are a known member's; span when its whole span came again. */
export type ScannedMember = Member & { digest?: string; span?: KnownSpan }

/** What MemberScan.same() gives when the bytes it would hash have not all arrived. */
const SHORT = Symbol('short')

/** Members a span holds: about 160 KB of realistic Deployments, one hash call where 64 were. */
export const SPAN = 64

/** The SHA-256 of a member's bytes (key, colon, value). Cryptographic: no body can make other bytes pass for a known member. */
export function memberDigest(b: Uint8Array, keyStart: number, end: number): string {
  return hash('sha256', b.subarray(keyStart, end), 'base64')
}

// The key of span digests: drawn when the process starts, never written anywhere. A KeyObject:
// a raw key is prepared again at every call, which cost more than hashing a span.
const SPAN_KEY = createSecretKey(randomBytes(32))
const SPAN_IV = randomBytes(12)

/**
 * A span's digest: GMAC (AES-256-GCM with the bytes as associated data, NIST SP 800-38D) under
 * the process's own random key. Nobody who sends bodies knows the key or sees a digest, so no
 * body can make other bytes pass for a span: two different byte strings of n 16-byte blocks get
 * the same tag with a probability of at most n / 2^128. GHASH runs at several GB/s where SHA-256
 * runs at 1.5, and a resync hashes almost every byte of its body in spans.
 */
export function spanDigest(b: Uint8Array, start: number, end: number): string {
  return new Gmac().update(b.subarray(start, end)).digest()
}

/** The GMAC spanDigest() takes, of bytes fed in parts (the tag of their concatenation); digest() once. */
export class Gmac {
  private readonly cipher = createCipheriv('aes-256-gcm', SPAN_KEY, SPAN_IV)

  update(b: Uint8Array): this {
    this.cipher.setAAD(b)
    return this
  }

  digest(): string {
    this.cipher.final()
    return this.cipher.getAuthTag().toString('base64')
  }
}

/**
 * The members of body b as the next scan knows them. A span that came again keeps its members
 * (those of previous, the Known the scan read with) and its digest; the members in between
 * (changed, new, or all of them after a first sync) are hashed one by one and grouped into new
 * spans of up to SPAN.
 */
export function knownMembers(b: Uint8Array, members: readonly ScannedMember[], previous?: Known): Known {
  const known: KnownMember[] = new Array(members.length)
  const spans: KnownSpan[] = []
  let open = -1
  const close = (end: number) => {
    if (open < 0) return
    const first = members[open] as Member
    const last = members[end - 1] as Member
    const digests = known.slice(open, end).map((k) => k.digest).join('\n')
    spans.push({ first: open, count: end - open, length: last.end - first.keyStart, digest: spanDigest(b, first.keyStart, last.end), digests })
    open = -1
  }
  const member = (m: ScannedMember): KnownMember =>
    ({ key: m.key, length: m.end - m.keyStart, valueOffset: m.start - m.keyStart, digest: m.digest ?? memberDigest(b, m.keyStart, m.end), at: m.keyStart })
  for (let i = 0; i < members.length;) {
    const m = members[i] as ScannedMember
    const span = m.span
    if (span) {
      close(i)
      // Distances within a span are what a scan uses (at), and they held: its members stay as they were.
      for (let k = 0; k < span.count; k++) known[i + k] = previous?.members[span.first + k] ?? member(members[i + k] as ScannedMember)
      spans.push({ ...span, first: i })
      i += span.count
      continue
    }
    known[i] = member(m)
    if (open < 0) open = i
    if (++i - open === SPAN) close(i)
  }
  close(members.length)
  return { members: known, spans }
}

/**
 * Reads the members of the JSON object whose `{` is at body[start], a batch at a time. Result:
 * the members in order and the index just past the `}`, or null: not an object there, a key with
 * an escape, a duplicate key, tokens out of place. With the members of a previous body (in key
 * order, as Go writes maps), a member whose key and bytes' digest are a previous member's is
 * taken without reading its value, and carries that digest; a span of previous members whose
 * bytes hash as the span did is taken whole. With stopAt instead, the scan pauses at the member
 * of that key before its value (see paused).
 * Given only the bytes that have arrived (complete false), a member they do not hold whole is
 * read again once more have come (grow()): the scan is then short, not bad.
 */
export class MemberScan {
  /** digest: set on the members taken from the previous ones; span: on those taken with their whole span. */
  readonly members: ScannedMember[] = []
  /** The keys read, to refuse a duplicate; in a sorted scan, only the last one is needed. */
  private readonly seen = new Set<string>()
  private lastKey: string | null = null
  private readonly previous: Known | undefined
  private readonly stopAt: string | undefined
  private readonly sorted: boolean
  private complete: boolean
  private i: number
  private j = 0
  /** The next span that may start at previous member j. */
  private s = 0
  private state: 'first' | 'member' | 'done' | 'bad'
  end = -1
  /** Set when the scan stopped at the end of the bytes that have arrived: grow() and step() again. */
  short = false

  /** The member the scan stopped at (its key is stopAt): the caller reads its value, then calls resume(). */
  paused: Member | null = null
  /** The paused member once resume() gave its end: the next step() reads what follows it. */
  private resumed: Member | null = null

  /**
   * previous: the members of an earlier body; stopAt: the key to pause at; complete: false while
   * the body is still arriving; sorted: the keys must rise strictly (as Go writes a map's), which
   * refuses a duplicate without remembering every key.
   */
  constructor(private b: Uint8Array, start: number, options: { previous?: Known; stopAt?: string; complete?: boolean; sorted?: boolean } = {}) {
    this.previous = options.previous
    this.stopAt = options.stopAt
    this.complete = options.complete ?? true
    this.sorted = options.sorted ?? false
    this.i = skipSpace(b, start + 1)
    this.state = b[start] !== OPEN_BRACE ? 'bad' : 'first'
  }

  /** More of the body has arrived (b holds what came before at the same offsets); complete: all of it. */
  grow(b: Uint8Array, complete: boolean): void {
    this.b = b
    this.complete = complete
    this.short = false
  }

  get result(): { members: Member[]; end: number } | null {
    return this.state === 'done' ? { members: this.members, end: this.end } : null
  }

  /**
   * Reads up to max members (a span is taken whole, so a step can pass max by less than SPAN);
   * false once it has read them all or found the object malformed; true when there are more, or it paused.
   */
  step(max = Infinity): boolean {
    const b = this.b
    if (this.state === 'first') {
      if (this.i >= b.length && !this.complete) return this.wait(this.i, 0, 0)
      this.state = 'member'
      if (b[this.i] === CLOSE_BRACE) return this.finish(this.i + 1)
    }
    const resumed = this.resumed
    if (resumed && this.state === 'member') {
      const after = this.after(resumed.end)
      if (after < 0) return this.wait(this.i, this.j, this.s)
      this.resumed = null
      this.members.push(resumed)
      this.next(after)
    }
    for (let n = 0; this.state === 'member' && !this.paused && n < max;) {
      const [at, j, s] = [this.i, this.j, this.s]
      const key = readKey(b, at)
      const same = key && this.same(key.key)
      if (same === SHORT) return this.wait(at, j, s)
      if (same) {
        const last = same[same.length - 1] as ScannedMember
        const after = this.after(last.end)
        if (after < 0) return this.wait(at, j, s)
        // The separators inside a span are its own bytes: only the last member's is read.
        if (this.sorted ? !this.rises(same[0] as Member, last) : !same.every((m) => this.fresh(m))) return this.fail()
        for (const member of same) this.members.push(member)
        this.next(after)
        n += same.length
        continue
      }
      const member = key && readMember(b, at, key, this.stopAt)
      if (!member || (member.end >= 0 && this.after(member.end) < 0)) return this.wait(at, j, s)
      if (this.sorted ? !this.rises(member, member) : !this.fresh(member)) return this.fail()
      if (member.end < 0) this.paused = member
      else {
        this.members.push(member)
        this.next(this.after(member.end))
      }
      n++
    }
    return this.state === 'member'
  }

  /**
   * Goes on past the paused member, whose value ends at end (-1: it was malformed); when what
   * follows the value has not come yet, the next step() reads it.
   */
  resume(end: number): void {
    const member = this.paused
    if (!member) return
    this.paused = null
    const after = end < 0 ? -1 : this.after(end)
    if (after >= 0) {
      this.members.push({ ...member, end })
      this.next(after)
    } else if (end < 0 || this.complete) this.fail()
    else this.resumed = { ...member, end }
  }

  /** A key not read before (and remembers it). */
  private fresh(member: Member): boolean {
    if (this.seen.has(member.key)) return false
    this.seen.add(member.key)
    return true
  }

  /** Whether the keys from first to last rise past the last key read (a span's own keys rise: they did in its body). */
  private rises(first: Member, last: Member): boolean {
    if (this.lastKey !== null && !(first.key > this.lastKey)) return false
    this.lastKey = last.key
    return true
  }

  /** Where the comma or brace after a value that ends at end is, or -1 when neither is there (yet). */
  private after(end: number): number {
    const i = skipSpace(this.b, end)
    const c = this.b[i]
    return c === COMMA || c === CLOSE_BRACE ? i : -1
  }

  private next(after: number): void {
    if (this.b[after] === COMMA) this.i = skipSpace(this.b, after + 1)
    else this.finish(after + 1)
  }

  /**
   * Nothing could be read at at: bad, unless the bytes have not all come, when the scan goes back
   * to at (and to the previous members it stood at) to read it again after grow().
   */
  private wait(at: number, j: number, s: number): false {
    if (this.complete) return this.fail()
    this.i = at
    this.j = j
    this.s = s
    this.short = true
    return false
  }

  /**
   * The members here (the first one's key read) when they are previous ones byte for byte: the
   * span that starts with the previous member of that key, else that member alone; or null.
   */
  private same(key: string): (ScannedMember & { digest: string })[] | typeof SHORT | null {
    const previous = this.previous?.members
    if (!previous || this.stopAt !== undefined) return null
    const i = this.i
    // Past the previous members keyed before this one (gone): both bodies come in key order.
    while (this.j < previous.length && (previous[this.j] as KnownMember).key < key) this.j++
    const old = previous[this.j]
    if (old?.key !== key) return null
    const spans = (this.previous as Known).spans
    while (this.s < spans.length && (spans[this.s] as KnownSpan).first < this.j) this.s++
    const span = spans[this.s]
    // A known member (or span) whose bytes, and the delimiter after them, have not all come is read once they have.
    const arrived = (length: number) => this.complete || i + length < this.b.length
    if (span?.first === this.j && !arrived(span.length)) return SHORT
    if (span?.first === this.j && this.taken(span.length, span.digest, spanDigest)) {
      const members: (ScannedMember & { digest: string })[] = new Array(span.count)
      for (let k = 0; k < span.count; k++) {
        const p = previous[span.first + k] as KnownMember
        const keyStart = i + p.at - old.at
        members[k] = { key: p.key, keyStart, start: keyStart + p.valueOffset, end: keyStart + p.length, digest: p.digest, span }
      }
      this.j += span.count
      return members
    }
    if (!arrived(old.length)) return SHORT
    this.j++
    return this.taken(old.length, old.digest, memberDigest) ? [{ key, keyStart: i, start: i + old.valueOffset, end: i + old.length, digest: old.digest }] : null
  }

  /** Whether the length bytes here, followed by a delimiter, hash to digest. */
  private taken(length: number, digest: string, digestOf: typeof memberDigest): boolean {
    const { b, i } = this
    const after = b[i + length]
    return (after === COMMA || after === CLOSE_BRACE || isSpace(after)) && digestOf(b, i, i + length) === digest
  }

  private finish(end: number): false {
    this.state = 'done'
    this.end = end
    return false
  }

  private fail(): false {
    this.state = 'bad'
    return false
  }
}

/** The key that opens at b[i] and the index past its closing quote, or null: not a string, or one with an escape. */
function readKey(b: Uint8Array, i: number): { key: string; end: number } | null {
  if (b[i] !== QUOTE) return null
  const end = skipString(b, i)
  if (end < 0 || b.subarray(i + 1, end - 1).includes(BACKSLASH)) return null
  return { key: Buffer.from(b.buffer, b.byteOffset + i + 1, end - i - 2).toString('utf8'), end }
}

/** The member whose key (read) opens at b[keyStart]: colon, value; or null. Its value is unread (end -1) when its key is stopAt. */
function readMember(b: Uint8Array, keyStart: number, read: { key: string; end: number }, stopAt?: string): Member | null {
  const { key } = read
  const colon = skipSpace(b, read.end)
  if (b[colon] !== COLON) return null
  const start = skipSpace(b, colon + 1)
  if (start >= b.length) return null
  if (key === stopAt) return { key, keyStart, start, end: -1 }
  const end = skipValue(b, start)
  return end < 0 ? null : { key, keyStart, start, end }
}

/** MemberScan in one go. */
export function objectMembers(b: Uint8Array, start: number, previous?: Known): { members: ScannedMember[]; end: number } | null {
  const scan = new MemberScan(b, start, { previous })
  scan.step()
  return scan.result
}

/**
 * The digests of the members of body b, in order and joined by newlines, each taken as the scan
 * took it (a span's from the span): one string for a body key, built from about as many parts
 * as there are spans. known: the members as knownMembers() gave them, for those the scan read.
 */
export function memberDigests(b: Uint8Array, members: readonly ScannedMember[], known?: Known): string {
  const parts: string[] = []
  for (let i = 0; i < members.length;) {
    const m = members[i] as ScannedMember
    if (m.span) {
      parts.push(m.span.digests)
      i += m.span.count
      continue
    }
    parts.push(m.digest ?? known?.members[i]?.digest ?? memberDigest(b, m.keyStart, m.end))
    i++
  }
  return parts.join('\n')
}

/** The members after the one whose value ends at end, up to its object's `}`; or null when they are not all plain members. */
export function membersAfter(b: Uint8Array, end: number): Member[] | null {
  const members: Member[] = []
  let i = skipSpace(b, end)
  for (; b[i] === COMMA; i = skipSpace(b, (members[members.length - 1] as Member).end)) {
    const at = skipSpace(b, i + 1)
    const key = readKey(b, at)
    const member = key && readMember(b, at, key)
    if (!member) return null
    members.push(member)
  }
  return b[i] === CLOSE_BRACE ? members : null
}

/** Whether only white space follows b[i]. */
export function onlySpaceAfter(b: Uint8Array, i: number): boolean {
  return skipSpace(b, i) === b.length
}

export { skipSpace, skipValue }
