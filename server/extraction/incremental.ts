// Incremental target syncs. Metacontroller sends a target's whole related set at every sync, and
// at a resync almost every object is byte for byte the one it sent last time. The route reads
// the body's structure without parsing it (body-scan.ts), hashes each object's bytes, and sends
// an extraction child only the objects whose hash it has no record for; the records of the
// others are the ones their bytes gave last time (object-cache.ts). The sum is the same answer,
// and the same report, that extracting every object gives (hooks/target-tally.ts).
import { createHash } from 'node:crypto'
import { setImmediate } from 'node:timers/promises'
import { heldReport } from '../../api/report.js'
import type { KollectTargetSpec, KubeObject, TargetStatus } from '../../api/types.js'
import type { ExpressionLimits } from '../../hooks/limits.js'
import type { PluralResolution } from '../../hooks/plural.js'
import { typeKey, type SyncResponse } from '../../hooks/request.js'
import { extractedCondition, PROFILE_KEY } from '../../hooks/target.js'
import { expressionsRead, MANAGED_FIELDS } from '../../hooks/field-reads.js'
import { targetResponse } from '../../hooks/target-status.js'
import { retally, TargetTally, type ItemRecord, type ObjectRecord, type Tallied } from '../../hooks/target-tally.js'
import {
  knownMembers, memberDigest, memberDigests, membersAfter, MemberScan, onlySpaceAfter, skipSpace, type Known, type Member, type ScannedMember,
} from './body-scan.js'
import { recordBytes, type CacheEntry, type ObjectCache } from './object-cache.js'
import type { ReportSummary } from './child.js'
import type { ChildResult, JobInfo, PoolOutcome } from './outcome.js'
import {
  jsonScanStart, managedFieldsCuts, readJson, type ManagedFieldsCuts, type Scan, SCAN_LOOKAHEAD, scanJsonFrom, scanToEnd, type ScanMark,
} from '../protocol/json-depth.js'
import { Arrival } from './arrival.js'
import type { BoundsScanner } from './bounds-scanner.js'
import { decodeRecords, reportJson, type ReportHead } from './records-wire.js'

export interface SyncPlan {
  /** namespace/name/uid of the target. */
  target: string
  namespace: string
  /** The body as it came, and what the extraction child gets (with records asked for). */
  source: Buffer
  body: Buffer
  /**
   * true: body holds only the objects that have no kept record, and merge() adds the others in.
   * false: body is the whole body, the child's answer stands, and remember() keeps its records.
   */
  reduced: boolean
  /** Objects in body. */
  extracting: number
  /** The members of the target kind's map; digest set on those that kept their last sync's bytes. */
  members: ScannedMember[]
  kept: ReadonlyMap<string, ObjectRecord<string>>
  /** The checksum of the report the kept records made. */
  base?: string
  /** The entry the objects were scanned against, if any: a reduced plan's records and tally start from it. */
  previous?: CacheEntry
  /** The body's key for UnchangedSyncs, from the digests the scan took (bodyKey()), when the plan took it over. */
  digest?: string
  /** For a whole plan: whether its records are worth keeping (remember()). */
  keep: boolean
  /** Whether the records this plan keeps follow records that helped (or none): see plan(). */
  useful: boolean
  /** What scanJson() gave for the whole body, scanned as it arrived (a plan that extracts every object). */
  scanned?: Scan.Plain | Scan.Suspect
  /** Where a large body that was scanned splits for two children. */
  split?: Split
  /** [start, end) pairs of the objects' managedFields, which no expression of the target reads: the children get body without them. */
  cuts?: readonly number[]
  /** Reads up to max more objects; false once they are all read (or the map is malformed). */
  advance(max: number): boolean
  /** Reads the rest of the body (once); the fingerprint, or null when the body is not the plain shape. */
  finish(): string | null
  /** After finish(): the body's key (bodyKey()), with the digests of known where a member has none. */
  key(known?: Known): string
}

export type Merged =
  | { kind: 'merged'; result: ChildResult; entry: CacheEntry }
  /** The child did not tally every object (a broken spec, a stopped sync): its answer stands as it is. */
  | { kind: 'as-is' }
  /** The kept records and the new ones do not add up (or pass the item bytes bound): extract the whole body. */
  | { kind: 'whole' }

const COMMA = Buffer.from(',')
const COMMA_BYTE = 0x2c
const QUOTE = 0x22
const CLOSE_BRACE = 0x7d
/** Objects read before deciding: when none has its last sync's bytes, every object is extracted. */
const SAMPLE = 64
/** How soon the records of a target whose objects all changed are kept again. */
const REKEEP_MS = 60_000
/** Objects read between two turns of the event loop when the records of a first sync are kept. */
const BATCH = 1000
/**
 * A parent larger than this is not parsed here (the ordinary path parses it in a child): the API
 * server stores no object over 1.5 MiB, so only a hand-made body carries one.
 */
const MAX_PARENT_BYTES = 2 * 1024 * 1024
/**
 * What a scan that stopped short waits for before it goes on. Read a chunk (64 KiB) at a time,
 * the scan kept the socket unread often enough to slow a 25 MiB body's arrival by a third.
 */
const READ_AHEAD = 1024 * 1024
const NONE: ReadonlyMap<string, ObjectRecord<string>> = new Map()

/** A sync's extraction, and what to do once the exporter has answered: whole, it took the report whole. */
export interface Extraction {
  outcome: PoolOutcome
  /** Milliseconds spent reading the body's structure before the child got it. */
  scanMs: number
  /** Milliseconds spent adding the kept records to the child's (a reduced plan). */
  mergeMs?: number
  /** keyed: called with the body's key as the plan gives it (SyncPlan.digest), when a whole plan learns it later. */
  settle(whole: boolean, keyed?: (digest: string) => void): void
}

const NOTHING = (): void => undefined

/** The pool's run. */
type Run = (body: Buffer | readonly Buffer[], job: JobInfo) => Promise<PoolOutcome>

/**
 * Where a large body splits for two children (inHalves): the first gets body[0, at) and the
 * map's end on, the second the map's start and body[next, end). at: past the object that ends
 * the first half; next: the key of the one after it; mapStart, mapEnd: the objects' map's braces.
 */
interface Split {
  at: number
  next: number
  mapStart: number
  mapEnd: number
}

/** What inHalves() gives: the answer, and the records of every object when the halves were joined. */
interface Halves {
  outcome: PoolOutcome
  fresh?: Map<string, ObjectRecord<string>>
  mergeMs?: number
}

/** The objects' map's depth in the plain shape: inside the body's object (1), related (2), the kind's map (3). */
const MAP_DEPTH = 3

/** Where the scan of a body of length bytes notes the object that ends past the middle of the map at mapStart, and the map's end. */
function splitMarks(mapStart: number, length: number): [ScanMark, ScanMark] {
  return [{ depth: MAP_DEPTH, after: mapStart + ((length - mapStart) >> 1), at: -1 }, { depth: MAP_DEPTH - 1, after: mapStart, at: -1 }]
}

/** The split the marks give, or undefined: the middle is not an object's end followed by another object inside the map. */
function splitAt(body: Buffer, mapStart: number, [middle, map]: [ScanMark, ScanMark]): Split | undefined {
  const { at } = middle
  const mapEnd = map.at
  if (at < 0 || mapEnd <= at || body[at - 1] !== CLOSE_BRACE || body[mapEnd - 1] !== CLOSE_BRACE) return undefined
  const comma = skipSpace(body, at)
  const next = skipSpace(body, comma + 1)
  return body[comma] === COMMA_BYTE && body[next] === QUOTE && next < mapEnd - 1 ? { at, next, mapStart, mapEnd } : undefined
}

/**
 * The parts of body in spans ([start, end) pairs, in order), without the cuts that lie inside
 * them (pairs in order); told the bytes left out.
 */
function cutOut(body: Buffer, spans: readonly [number, number][], cuts: readonly number[] = [], skipped?: (bytes: number) => void): Buffer[] {
  const parts: Buffer[] = []
  let c = 0
  let left = 0
  for (const [start, end] of spans) {
    let at = start
    while (c < cuts.length && (cuts[c] as number) < start) c += 2
    for (; c < cuts.length && (cuts[c + 1] as number) <= end; c += 2) {
      parts.push(body.subarray(at, cuts[c]))
      left += (cuts[c + 1] as number) - (cuts[c] as number)
      at = cuts[c + 1] as number
    }
    parts.push(body.subarray(at, end))
  }
  if (left > 0) skipped?.(left)
  return parts
}

const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

/** The entry that keeps a sync's records, and their tally. */
interface Entry { entry: CacheEntry; tallied: Tallied<string> }

export class IncrementalSyncs {
  constructor(
    readonly cache: ObjectCache,
    private readonly resolvePlural: (resource: KollectTargetSpec['resource'] | undefined) => Promise<PluralResolution>,
    private readonly limits: ExpressionLimits,
    private readonly observe: {
      /** Per sync read incrementally: how many objects kept their record, and how many were extracted. */
      counted?: (reused: number, extracted: number) => void
      /** Per sync halved between two children: joined, or extracted whole after all. */
      halved?: (result: 'joined' | 'whole') => void
      /** Bodies of at least this many bytes whose objects all go to extraction are halved (KOLLECT_HALVE_SYNC_BYTES; 0 or none: never). */
      halveBytes?: number
      /** A bug while keeping records after the answer has gone (never request data). */
      failed?: (message: string) => void
      /** Where the bounds scan of a large arriving body runs off the main thread (bounds-scanner.ts). */
      scanner?: BoundsScanner
      /** Per sync whose objects' managedFields were left out of what the children parse: the bytes left out. */
      skipped?: (bytes: number) => void
    } = {},
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Starts reading a target sync's body as it arrives: what extract() is given, so that reading
   * the body's structure takes the time its bytes take to come. Never rejects.
   */
  planning(arrival: Arrival, keyTaken?: () => void): Promise<SyncPlan | null> {
    return this.plan(arrival, keyTaken).catch((err: unknown) => {
      this.observe.failed?.((err as Error).message)
      return null
    })
  }

  /**
   * Runs a target sync's extraction with run (the pool's), incrementally when the body allows it.
   * planned: planning() of the body's arrival, else the body is read here. pair: whether two
   * children would start at once, for a large body whose objects all go to extraction.
   */
  async extract(
    bytes: Buffer, job: JobInfo, run: Run, planned?: Promise<SyncPlan | null>, pair?: () => boolean,
  ): Promise<Extraction> {
    const scanning = performance.now()
    const plan = await (planned ?? this.planning(Arrival.of(bytes)))
    const scanMs = performance.now() - scanning
    if (!plan) return { outcome: await run(bytes, job), scanMs, settle: NOTHING }
    const scanned = plan.body === plan.source && plan.scanned !== undefined ? { scanned: plan.scanned } : {}
    const halves = plan.split && pair?.() ? await this.inHalves(plan, plan.split, { ...job, records: true, ...scanned }, run) : undefined
    if (halves === null || halves?.fresh) this.observe.halved?.(halves ? 'joined' : 'whole')
    let outcome = halves?.outcome ?? await run(plan.cuts ? cutOut(plan.body, [[0, plan.body.length]], plan.cuts, this.observe.skipped) : plan.body,
      { ...job, records: true, ...scanned })
    if (outcome.kind !== 'done') {
      this.forget(plan)
      return { outcome, scanMs, settle: NOTHING }
    }
    if (!plan.reduced) {
      let fresh = halves?.fresh
      let mergeMs = halves?.mergeMs
      // One child's whole answer for a target with kept records: only what changed since their report goes to the exporter.
      const { previous } = plan
      if (!halves && previous && outcome.result.records && outcome.result.report && !outcome.result.stopped) {
        const reading = performance.now()
        const { report, records: wire } = outcome.result
        const decoded = decodeRecords(wire.meta, report.json)
        if (decoded) {
          fresh = decoded.records
          const changed = changes(previous.records, fresh, fresh, { ...heldReport(report), base: previous.checksum }, decoded.failedKeys)
          outcome = { ...outcome, result: { ...outcome.result, report: { ...report, changes: changed } } }
        }
        mergeMs = performance.now() - reading
      }
      const { result } = outcome
      this.observe.counted?.(0, fresh?.size ?? result.records?.objects ?? 0)
      const records = () => fresh ?? (result.records && result.report ? decodeRecords(result.records.meta, result.report.json)?.records ?? null : null)
      // The rest of the body is read once the answer has gone: it only serves the next sync.
      const settle = (whole: boolean, keyed?: (digest: string) => void) => {
        if (!whole) this.forget(plan)
        else if (plan.keep) void this.remember(plan, result.report?.json.length ?? 0, records, keyed)
      }
      return { outcome, scanMs, ...(mergeMs === undefined ? {} : { mergeMs }), settle }
    }
    const merging = performance.now()
    const merged = this.merge(plan, outcome.result)
    if (merged.kind === 'merged') {
      this.observe.counted?.(plan.members.length - plan.extracting, plan.extracting)
      const settle = (whole: boolean) => (whole ? this.commit(plan, merged.entry) : this.forget(plan))
      return { outcome: { ...outcome, result: merged.result }, scanMs, mergeMs: performance.now() - merging, settle }
    }
    this.forget(plan)
    // Records that do not add up: the whole body, the ordinary way, within the same deadline.
    if (merged.kind === 'whole') outcome = await run(bytes, job)
    return { outcome, scanMs, settle: NOTHING }
  }

  /**
   * How to run this body incrementally, or null when it is not the plain shape Metacontroller
   * writes (parent before related, no duplicate or escaped keys on the way to the objects): the
   * body then goes to a child as without the cache. Reads the body as it arrives, and resolves
   * once it has all come. Once the kept records help, the body's key is the plan's to give
   * (digest), and keyTaken() is called: whoever hashed the body for it can stop.
   */
  private async plan(arrival: Arrival, keyTaken?: () => void): Promise<SyncPlan | null> {
    if (!this.cache.enabled) return null
    /** Steps the scan over the bytes that have come, waiting for more while it is short; false if the body failed. */
    const read = async (scan: MemberScan, max?: number): Promise<boolean> => {
      for (scan.step(max); scan.short; scan.step(max)) {
        await arrival.more(READ_AHEAD)
        if (arrival.state === 'failed') return false
        scan.grow(arrival.bytes, arrival.state === 'complete')
      }
      return true
    }
    const complete = () => arrival.state === 'complete'
    // The scan starts at the body's first byte that is not white space.
    while (arrival.state === 'arriving' && skipSpace(arrival.bytes, 0) >= arrival.length) await arrival.more()
    const start = skipSpace(arrival.bytes, 0)
    const top = new MemberScan(arrival.bytes, start, { stopAt: 'related', complete: complete() })
    if (!(await read(top))) return null
    const relatedAt = top.paused
    const parentAt = top.members.find((m) => m.key === 'parent')
    if (!relatedAt || !parentAt || parentAt.end - parentAt.start > MAX_PARENT_BYTES) return null
    // Read as the child reads bodies: bounded in depth (what follows recurses), and without __proto__ keys.
    const parsed = readJson(arrival.bytes.subarray(parentAt.start, parentAt.end), this.limits.maxJsonDepth)
    if (!parsed.ok) return null
    const parent = parsed.value as KubeObject | null
    const meta = parent?.metadata
    const spec = parent?.['spec'] as Partial<KollectTargetSpec> | undefined
    const res = spec?.resource
    if (typeof meta?.namespace !== 'string' || typeof meta.name !== 'string' || typeof meta.uid !== 'string') return null
    if (typeof res?.version !== 'string' || typeof res.kind !== 'string' || (res.group !== undefined && typeof res.group !== 'string')) return null
    const key = typeKey(res.group, res.version, res.kind)
    const related = new MemberScan(arrival.bytes, relatedAt.start, { stopAt: key, complete: complete() })
    if (!(await read(related))) return null
    const typeAt = related.paused
    if (!typeAt) return null
    const plural = await this.resolvePlural(res)
    const target = `${meta.namespace}/${meta.name}/${meta.uid}`
    const entry = this.cache.get(target)
    const objects = new MemberScan(arrival.bytes, typeAt.start, { ...(entry ? { previous: entry.known } : {}), complete: complete(), sorted: true })
    let fingerprint: string | null | undefined
    /** Reads the rest of the body, which has all come (once); the fingerprint, or null when the body is not the plain shape. */
    const finish = (): string | null => {
      if (fingerprint !== undefined) return fingerprint
      fingerprint = null
      const body = arrival.bytes
      for (const scan of [objects, related, top]) scan.grow(body, true)
      objects.step()
      if (!objects.result) return null
      related.resume(objects.end)
      related.step()
      if (!related.result) return null
      top.resume(related.end)
      top.step()
      if (!top.result || !onlySpaceAfter(body, top.end)) return null
      // Everything an object's record depends on besides its own bytes: the target's identity and
      // spec, the plural, and every other related object (the profile, the scopes, namespaces).
      return (fingerprint = createHash('sha256')
        .update(JSON.stringify([meta.namespace, meta.name, meta.uid, spec, plural, key]))
        .update(body.subarray(relatedAt.start, typeAt.keyStart))
        .update(body.subarray(objects.end, related.end))
        .digest('base64'))
    }
    if (!(await read(objects, SAMPLE))) return null
    // Kept records that help: the rest is read as it comes (mostly hashing, which keeps up with loopback).
    const helps = entry !== undefined && objects.members.some((m) => m.digest !== undefined)
    if (helps) keyTaken?.()
    if (helps && !(await read(objects))) return null
    // Kept records that did not help. Once (a rollout changes every object) new ones are kept;
    // when the records kept after that did not help either, the target's objects change
    // between syncs, and keeping costs the server a read of the whole body: once a minute, or
    // as soon as the first objects come again as the last body had them (they settled).
    const sample = entry && !helps ? objects.members.slice(0, SAMPLE).map((m) => ({ key: m.key, digest: memberDigest(arrival.bytes, m.keyStart, m.end) })) : []
    const last = new Map(entry?.probe?.map((p) => [p.key, p.digest]))
    const settled = sample.some((m) => last.get(m.key) === m.digest)
    // Every object goes to extraction: the child's scan of the body (nesting, __proto__ keys) is done here, while the rest
    // comes, and for a large one it notes where the body splits for two children. Not when the first objects settled:
    // the body is likely the last one again, which the route answers without a child (unchanged.ts).
    const scanning = !helps && !settled
    const halveBytes = this.observe.halveBytes ?? 0
    const marks = scanning && halveBytes > 0 && (arrival.declared ?? 0) >= halveBytes ? splitMarks(typeAt.start, arrival.declared ?? 0) : undefined
    const noted = managedFieldsCuts(typeAt.start, MAP_DEPTH + 1)
    const scanned = scanning ? await this.bounds(arrival, marks, noted) : undefined
    if (!(await arrival.ended())) return null
    const body = arrival.bytes
    const split = marks && scanned !== undefined ? splitAt(body, typeAt.start, marks) : undefined
    const cuts = scanned !== undefined && noted.ranges.length > 0 && this.unread(body, related.members, noted.end, spec) ? noted.ranges : undefined
    const whole: SyncPlan = {
      target, namespace: meta.namespace, source: body, body, reduced: false, keep: true, useful: true, extracting: 0, members: objects.members, kept: NONE,
      ...(entry ? { previous: entry } : {}), ...(scanned === undefined ? {} : { scanned }), ...(split ? { split } : {}), ...(cuts ? { cuts } : {}),
      advance: (max) => {
        objects.grow(body, true)
        return objects.step(max)
      },
      finish,
      key: (known) => bodyKey(body, objects.members, typeAt.start, objects.end, known),
    }

    // A first sync, or one in which the first objects all changed: the child gets the whole
    // body at once, and the rest is read once the sync is answered (remember()).
    if (!entry) return whole
    if (!helps) {
      entry.probe = sample
      return { ...whole, keep: settled || entry.useful || this.now() - entry.at >= REKEEP_MS, useful: settled }
    }
    if (finish() === null) return null
    const digest = whole.key()
    const changed = entry.fingerprint === fingerprint ? objects.members.filter((m) => m.digest === undefined) : objects.members
    if (changed.length === objects.members.length) return { ...whole, extracting: changed.length, digest }
    // The body with only the changed objects in the target kind's map.
    const parts: Buffer[] = [body.subarray(0, typeAt.start + 1)]
    changed.forEach((m, i) => {
      if (i > 0) parts.push(COMMA)
      parts.push(body.subarray(m.keyStart, m.end))
    })
    parts.push(body.subarray(objects.end - 1))
    return { ...whole, body: Buffer.concat(parts), reduced: true, extracting: changed.length, kept: entry.records, base: entry.checksum, digest }
  }

  /**
   * scanJson() of a body as it arrives, READ_AHEAD at a time: a child would scan it after its last
   * byte. Undefined when it is too deep (the child scans it again and refuses it) or did not come whole.
   */
  private async bounds(arrival: Arrival, marks: ScanMark[] | undefined, cuts: ManagedFieldsCuts): Promise<Scan.Plain | Scan.Suspect | undefined> {
    const offloaded = this.observe.scanner?.scan(arrival, this.limits.maxJsonDepth, marks, cuts)
    if (offloaded) return offloaded
    const state = { ...jsonScanStart(), ...(marks ? { marks } : {}), cuts }
    const max = this.limits.maxJsonDepth
    for (; arrival.state === 'arriving'; await arrival.more(READ_AHEAD)) {
      if (!scanJsonFrom(arrival.bytes, max, state, arrival.length - SCAN_LOOKAHEAD)) return undefined
    }
    return arrival.state === 'complete' ? scanToEnd(arrival.bytes, max, state, arrival.length) : undefined
  }

  /**
   * Whether no expression of the target reads its objects' managedFields, the related objects
   * being those before the objects' map (before) and after its end (mapEnd): its matchPolicy, and
   * the attributes of every profile the body holds (the child picks one of them). False whenever
   * that cannot be told from the bytes: the children then parse the managedFields as they come.
   */
  private unread(body: Buffer, before: readonly Member[], mapEnd: number, spec: Partial<KollectTargetSpec> | undefined): boolean {
    const after = mapEnd > 0 ? membersAfter(body, mapEnd) : null
    if (!after) return false
    const profiles = [...before, ...after].filter((m) => m.key === PROFILE_KEY)
    if (profiles.length === 0) return false
    const attributes: unknown[] = []
    for (const m of profiles) {
      if (m.end - m.start > MAX_PARENT_BYTES) return false
      const read = readJson(body.subarray(m.start, m.end), this.limits.maxJsonDepth)
      if (!read.ok || !isMap(read.value)) return false
      for (const profile of Object.values(read.value)) {
        const list = isMap(profile) && isMap(profile['spec']) ? profile['spec']['attributes'] : undefined
        if (!Array.isArray(list)) return false
        attributes.push(...list)
      }
    }
    return !expressionsRead(MANAGED_FIELDS, attributes, spec?.matchPolicy)
  }

  /**
   * The whole body's extraction by two children at once, each given the body with half of the
   * objects (SyncPlan.split), and their records tallied together: the answer and report one child
   * gives for the whole body. Null when that is for one child to say: a half that is bad (the
   * whole body's own message), a half stopped, or records that do not add up.
   */
  private async inHalves(plan: SyncPlan, split: Split, job: JobInfo, run: Run): Promise<Halves | null> {
    const body = plan.body
    // Each half's records are read as soon as it is done, while the other child works.
    const half = async (parts: Buffer[]) => {
      const outcome = await run(parts, job)
      const done = performance.now()
      const r = outcome.kind === 'done' ? outcome.result : null
      const records = r?.records && r.report && !r.stopped ? decodeRecords(r.records.meta, r.report.json)?.records ?? null : null
      return { outcome, done, records }
    }
    const { cuts } = plan
    const skipped = this.observe.skipped
    const [first, second] = await Promise.all([
      half(cutOut(body, [[0, split.at], [split.mapEnd - 1, body.length]], cuts, skipped)),
      half(cutOut(body, [[0, split.mapStart + 1], [split.next, body.length]], cuts, skipped)),
    ])
    const outcomes = [first.outcome, second.outcome]
    if (first.outcome.kind !== 'done' || second.outcome.kind !== 'done') {
      // A deadline or a heap limit the whole body meets as well.
      const stop = outcomes.find((o) => o.kind === 'aborted' || o.kind === 'queued' || o.kind === 'busy')
      return stop && !outcomes.some((o) => o.kind === 'bad') ? { outcome: stop } : null
    }
    const joining = Math.max(first.done, second.done)
    const a = first.outcome.result
    const [fromA, fromB] = [first.records, second.records]
    if (!a.report || !fromA || !fromB) return null
    // The first half's map takes the second's records (no copy of either); a key in both halves
    // (a duplicate key in the map) leaves it smaller, and the whole body says which one counts.
    const expected = fromA.size + fromB.size
    const fresh = fromA
    for (const [key, record] of fromB) fresh.set(key, record)
    if (fresh.size !== expected) return null
    const tally = new TargetTally<string>()
    // In the body's order, as syncTarget tallies them: the first half's, then the second's.
    for (const [key, record] of fresh) tally.add(key, record)
    const tallied = tally.finish()
    if (tallied.itemBytes > this.limits.maxRequestItemBytes) return null
    const { response, head } = answerFor(a.response, a.report, tallied)
    // The records kept from an earlier sync, whose report the exporter may hold: only what changed since goes to it.
    const previous = plan.previous
    let whole: Buffer | undefined
    const report = {
      ...head,
      itemCount: tallied.items.length,
      get json(): Buffer {
        return (whole ??= reportJson(head, tallied))
      },
      ...(previous ? { changes: changes(previous.records, fresh, fresh, { ...head, base: previous.checksum }, tallied.failedKeys) } : {}),
    }
    const result: ChildResult = { response, report }
    // The phases of the half that took longer.
    const slower = first.done >= second.done ? first.outcome : second.outcome
    return { outcome: { kind: 'done', result, phases: slower.phases }, fresh, mergeMs: performance.now() - joining }
  }

  /** A reduced plan's child answer, with the kept records added in: the answer for the whole body. */
  private merge(plan: SyncPlan, result: ChildResult): Merged {
    if (!result.records || !result.report) return { kind: 'as-is' }
    const fresh = decodeRecords(result.records.meta, result.report.json)?.records
    if (!fresh || fresh.size !== plan.extracting) return { kind: 'whole' }
    const entry = this.entry(plan, fresh)
    if (!entry) return { kind: 'whole' }
    const { tallied } = entry
    if (tallied.itemBytes > this.limits.maxRequestItemBytes) return { kind: 'whole' }
    const { items } = tallied
    const { response, head } = answerFor(result.response, result.report, tallied)
    // The whole report is written only if the exporter asks for it (it did not hold the base).
    let whole: Buffer | undefined
    const report = {
      ...head,
      itemCount: items.length,
      get json(): Buffer {
        return (whole ??= reportJson(head, tallied))
      },
      ...(plan.base === undefined ? {} : { changes: changes(plan.kept, fresh, entry.entry.records, { ...head, base: plan.base }, tallied.failedKeys) }),
    }
    return { kind: 'merged', result: { response, report }, entry: entry.entry }
  }

  /**
   * After a whole plan's sync was answered and its report taken whole: reads the rest of the body
   * and keeps the child's records for the next sync. Off the sync's path: its answer has gone.
   */
  private async remember(
    plan: SyncPlan, reportBytes: number, records: () => ReadonlyMap<string, ObjectRecord<string>> | null, keyed?: (digest: string) => void,
  ): Promise<void> {
    try {
      // A batch at a time: other hooks are answered in between.
      do await setImmediate()
      while (plan.advance(BATCH))
      // Records cost at least their items' text: a report past the share would be read only to be dropped.
      const tooLarge = reportBytes > this.cache.namespaceBytes
      const fresh = !tooLarge && plan.finish() !== null ? records() : null
      const built = fresh && fresh.size === plan.members.length ? this.entry(plan, fresh) : null
      if (built) {
        this.commit(plan, built.entry)
        // The key the next identical body will be known by, from the digests just taken.
        keyed?.(plan.key(built.entry.known))
        return
      }
    } catch (err) {
      // Nothing is lost: the target's next sync extracts every object.
      this.observe.failed?.((err as Error).message)
    }
    this.forget(plan)
  }

  /** The sync's report was taken whole: its records serve the target's next sync. */
  private commit(plan: SyncPlan, entry: CacheEntry): void {
    this.cache.set(plan.target, entry)
  }

  private forget(plan: SyncPlan): void {
    this.cache.delete(plan.target)
  }

  /** Every object's record (the child's, else the kept one), tallied in key order as syncTarget does, and the entry that keeps them. */
  private entry(plan: SyncPlan, fresh: ReadonlyMap<string, ObjectRecord<string>>): Entry | null {
    const changed = plan.reduced && plan.previous ? this.changedEntry(plan, plan.previous, fresh) : null
    if (changed) return changed
    const tally = new TargetTally<string>()
    const records = new Map<string, ObjectRecord<string>>()
    let bytes = 0
    // In key order: the objects' scan takes them only as their keys rise (MemberScan, sorted).
    for (const m of plan.members) {
      const record = fresh.get(m.key) ?? (m.digest !== undefined ? plan.kept.get(m.key) : undefined)
      if (!record) return null
      tally.add(m.key, record)
      records.set(m.key, record)
      bytes += recordBytes(m.key, record)
    }
    return this.entryOf(plan, records, tally.finish(), bytes)
  }

  /**
   * A reduced plan's entry from the one it was scanned against: the records it kept with the
   * child's in place of the changed ones, tallied and charged for what changed (retally). Null
   * when retally cannot, or the records are not one per member: the caller tallies them all.
   */
  private changedEntry(plan: SyncPlan, previous: CacheEntry, fresh: ReadonlyMap<string, ObjectRecord<string>>): Entry | null {
    const records = new Map(previous.records)
    const before: ObjectRecord<string>[] = []
    let { bytes } = previous
    const drop = (key: string, record: ObjectRecord<string>) => {
      before.push(record)
      bytes -= recordBytes(key, record)
    }
    for (const [key, record] of fresh) {
      const old = records.get(key)
      if (old) drop(key, old)
      records.set(key, record)
      bytes += recordBytes(key, record)
    }
    if (records.size !== plan.members.length) {
      // Objects gone from the related set.
      const present = new Set(plan.members.map((m) => m.key))
      for (const [key, record] of records) {
        if (present.has(key)) continue
        if (fresh.has(key)) return null
        drop(key, record)
        records.delete(key)
      }
      if (records.size !== plan.members.length) return null
    }
    const tallied = retally(previous.tallied, before, [...fresh.values()])
    return tallied && this.entryOf(plan, records, tallied, bytes)
  }

  private entryOf(plan: SyncPlan, records: Map<string, ObjectRecord<string>>, tallied: Tallied<string>, bytes: number): Entry {
    const known = knownMembers(plan.source, plan.members, plan.previous?.known)
    const fingerprint = plan.finish() as string
    const entry = { namespace: plan.namespace, fingerprint, checksum: tallied.checksum, known, records, tallied, bytes, at: this.now(), useful: plan.useful }
    return { entry, tallied }
  }
}

/**
 * The report of what changed since the report that kept made: new and changed items (of fresh,
 * the records extracted now), and the keys of the items gone (kept ones not in records, the new
 * whole set).
 */
function changes(
  kept: ReadonlyMap<string, ObjectRecord<string>>, fresh: ReadonlyMap<string, ObjectRecord<string>>, records: ReadonlyMap<string, ObjectRecord<string>>,
  head: ReportHead, failedKeys: string[],
): Buffer {
  // An item's key differs from another's of the same target only by its uid (order[5]).
  const keyOf = (item: ItemRecord<string>) => `${head.target.namespace}/${head.target.name}/${item.order[5]}`
  const removedKeys: string[] = []
  const items: ItemRecord<string>[] = []
  let added = 0
  for (const [key, record] of fresh) {
    const old = kept.get(key)
    if (!old) added++
    const before = old?.item
    const now = record.item
    const moved = before !== undefined && now !== undefined && before.order[5] !== now.order[5]
    if (before && (!now || moved)) removedKeys.push(keyOf(before))
    if (now && (!before || moved || before.hash !== now.hash || before.generation !== now.generation)) items.push(now)
  }
  // Objects gone from the related set (none when the records are the kept ones and the added ones).
  if (kept.size + added !== records.size) {
    for (const [key, record] of kept) if (record.item && !records.has(key)) removedKeys.push(keyOf(record.item))
  }
  return reportJson({ ...head, removedKeys }, { items, failedKeys })
}

/**
 * The answer and the report's head for every object's records, tallied: the rest of the status
 * (the resource, conditions other than Ready) is the child's, which no object changes.
 */
function answerFor(
  child: SyncResponse<TargetStatus>, report: ReportSummary, tallied: Tallied<string>,
): { response: SyncResponse<TargetStatus>; head: ReportHead } {
  const { counts, checksum } = tallied
  const { generation } = report
  const status = child.status
  const conditions = [extractedCondition(counts, generation), ...(status.conditions ?? []).filter((c) => c.type !== 'Ready')]
  return { response: targetResponse(counts, checksum, status.resource, conditions, generation), head: heldReport({ ...report, checksum }) }
}

/**
 * A key for the whole body from the digests the scan took of its objects (hashing the body again
 * would cost as much as the scan): its length, the bytes before and after the objects' map, and
 * each object's digest. Two bodies with the same key hold the same bytes but for the white space
 * between objects, where JSON holds nothing.
 */
function bodyKey(body: Buffer, members: readonly ScannedMember[], mapStart: number, mapEnd: number, known?: Known): string {
  return 'members:' + createHash('sha256')
    .update(`${body.length}\n`)
    .update(body.subarray(0, mapStart + 1))
    .update(memberDigests(body, members, known))
    .update(body.subarray(mapEnd - 1))
    .digest('base64')
}

