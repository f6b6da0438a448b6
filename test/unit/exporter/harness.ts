// Shared fixtures for the exporter unit tests: a recording Sink (a test double of our own Sink
// interface), a factory that hands them out, and builders for compositions and target reports.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { TestContext } from 'node:test'
import { buildSnapshot, itemKey, itemsChecksum, compareItems } from '../../../api/canonical.js'
import type {
  InventoryComposition, Item, KollectSinkSpec, ObjectRef, ResolvedSink, Snapshot, TargetReport,
} from '../../../api/types.js'
import { diffItems, type HeldItem } from '../../../sinks/diff.js'
import { NO_FENCE, type FencingToken, type WriteFence } from '../../../sinks/fence.js'
import { Exporter, type ExporterOptions } from '../../../exporter/index.js'
import { SinkError, type Sink, type WriteResult } from '../../../sinks/sink.js'
import { FakeClock } from '../../support/clock.js'
import { makeItem } from '../../support/items.js'

export const CLUSTER = 'lab-west'
export const FAST_BACKOFF = { minMs: 1, maxMs: 5, factor: 2 }
/** Per-test limit: a hang fails the test (and runs its cleanup) instead of stalling the run. */
export const LIMIT = { timeout: 10_000 }

export const INV: ObjectRef = { namespace: 'team-a', name: 'prod' }
export const T1: ObjectRef = { namespace: 'team-a', name: 't1' }
export const T2: ObjectRef = { namespace: 'team-a', name: 't2' }

export interface WriteRecord {
  checksum: string
  itemCount: number
  inventory: ObjectRef
  cluster: string
  /** Fake-clock time of the call. */
  at: number
  snapshot: Snapshot
  /** The fencing token the exporter handed the write (leader election). */
  token: FencingToken | undefined
}

export interface RemoveRecord {
  inventory: ObjectRef
  cluster: string
}

/**
 * Records every snapshot written to it. It can fail the next N writes (or removes) with a
 * retriable SinkError, or hold writes until released.
 */
export class RecordingSink implements Sink {
  /** Every call to write, including failed and held ones, in call order. */
  readonly attempts: WriteRecord[] = []
  /** Writes that succeeded, in completion order. */
  readonly writes: WriteRecord[] = []
  readonly removes: RemoveRecord[] = []
  closeCount = 0
  failureMessage = 'sink unavailable: connection refused (test)'
  /** Set: every write proposes its snapshot for review instead of holding it (git review mode). */
  reviewing: { url: string; pollMs: number } | null = null
  private failWrites = 0
  private failRemoves = 0
  private writeError: (() => Error) | null = null
  private gate: Promise<void> | null = null
  private openGate: (() => void) | null = null
  private held = new Map<string, HeldItem>()

  constructor(
    readonly id: string,
    readonly resolved: ResolvedSink | null,
    private readonly clock: { now(): number },
  ) {}

  /** Fail the next n writes (Infinity: until failWrites(0)). */
  failNextWrites(n: number, makeError?: () => Error): void {
    this.failWrites = n
    this.writeError = makeError ?? null
  }

  failNextRemoves(n: number): void {
    this.failRemoves = n
  }

  /** Writes block (after being recorded as attempts) until release(). */
  hold(): void {
    if (this.gate) return
    this.gate = new Promise((resolve) => { this.openGate = resolve })
  }

  release(): void {
    this.openGate?.()
    this.gate = null
    this.openGate = null
  }

  get checksums(): string[] {
    return this.writes.map((w) => w.checksum)
  }

  get lastWrite(): WriteRecord | undefined {
    return this.writes[this.writes.length - 1]
  }

  async write(snapshot: Snapshot, fence: WriteFence = NO_FENCE): Promise<WriteResult> {
    const record: WriteRecord = {
      token: fence.token,
      checksum: snapshot.checksum,
      itemCount: snapshot.itemCount,
      inventory: { ...snapshot.inventory },
      cluster: snapshot.cluster,
      at: this.clock.now(),
      snapshot: structuredClone(snapshot),
    }
    this.attempts.push(record)
    if (this.failWrites > 0) {
      this.failWrites--
      throw this.writeError ? this.writeError() : new SinkError(this.failureMessage, { retriable: true })
    }
    if (this.gate) await this.gate
    // The commit point, after whatever the gate held the write for: a real sink asks here too.
    fence.check('committing (test)')
    const diff = diffItems(this.held, snapshot.items)
    this.held = diff.next
    this.writes.push(record)
    const result = { added: diff.added.length, changed: diff.changed.length, removed: diff.removed.length }
    return this.reviewing ? { ...result, review: { ...this.reviewing } } : result
  }

  async remove(inventory: ObjectRef, cluster: string): Promise<void> {
    this.removes.push({ inventory: { ...inventory }, cluster })
    if (this.failRemoves > 0) {
      this.failRemoves--
      throw new SinkError('remove failed: permission denied (test)', { retriable: true })
    }
    this.held = new Map()
  }

  async healthcheck(): Promise<void> {}

  async close(): Promise<void> {
    this.closeCount++
  }
}

/** createSink for the Exporter: every call makes a new RecordingSink and remembers it. */
class SinkFactory {
  readonly created: RecordingSink[] = []
  readonly calls: (ResolvedSink | null)[] = []

  constructor(private readonly clock: { now(): number }) {}

  readonly creationError = 'secret team-a/sink-credentials not found (test)'
  private failCreates = 0

  /** The next n createSink calls reject with a retriable SinkError (Infinity: until failNextCreates(0)). */
  failNextCreates(n: number): void {
    this.failCreates = n
  }

  readonly createSink = async (resolved: ResolvedSink | null): Promise<Sink> => {
    this.calls.push(resolved)
    if (this.failCreates > 0) {
      this.failCreates--
      throw new SinkError(this.creationError, { retriable: true })
    }
    const id = resolved ? `${resolved.namespace}/${resolved.name}` : 'embedded/default'
    const sink = new RecordingSink(id, resolved, this.clock)
    this.created.push(sink)
    return sink
  }

  /** Every instance created for the sink namespace/name, oldest first. */
  all(id: string): RecordingSink[] {
    return this.created.filter((s) => s.id === id)
  }

  /** The newest instance created for the sink namespace/name. */
  sink(id: string): RecordingSink {
    const all = this.all(id)
    const last = all[all.length - 1]
    if (!last) throw new Error(`no sink ${id} was created (created: ${this.created.map((s) => s.id).join(', ') || 'none'})`)
    return last
  }
}

export interface Harness {
  clock: FakeClock
  factory: SinkFactory
  exporter: Exporter
  logs: { level: string; msg: string; fields?: Record<string, unknown> }[]
}

/**
 * A fresh exporter on a fake clock with recording sinks. When the test ends (passed or not) every
 * sink is released and stops failing and the exporter is closed, so no retry loop keeps the
 * test process alive.
 */
export function harness(t: TestContext, options: Partial<ExporterOptions> = {}): Harness {
  const clock = new FakeClock()
  const factory = new SinkFactory(clock)
  const logs: Harness['logs'] = []
  const exporter = new Exporter({
    cluster: CLUSTER,
    createSink: factory.createSink,
    clock,
    backoff: FAST_BACKOFF,
    log: (level, msg, fields) => { logs.push({ level, msg, fields }) },
    ...options,
  })
  t.after(async () => {
    factory.failNextCreates(0)
    for (const sink of factory.created) {
      sink.failNextWrites(0)
      sink.failNextRemoves(0)
      sink.release()
    }
    await exporter.close()
  })
  return { clock, factory, exporter, logs }
}

export function resolvedSink(name: string, spec: Partial<KollectSinkSpec> = {}, namespace = 'team-a'): ResolvedSink {
  return { namespace, name, spec: { type: 'postgres', ...spec } }
}

export function composition(overrides: Partial<InventoryComposition> = {}): InventoryComposition {
  return {
    inventory: INV,
    generation: 1,
    targets: [T1],
    sinks: [resolvedSink('primary')],
    debounceMs: 2_000,
    maxWaitMs: 60_000,
    suspend: false,
    ...overrides,
  }
}

/** n items of one target, deterministic in (from, n). */
export function itemsOf(target: ObjectRef, n: number, from = 0): Item[] {
  return Array.from({ length: n }, (_, k) => makeItem(from + k, { target }))
}

export function report(target: ObjectRef, items: Item[], failedKeys: string[] = [], generation = 1): TargetReport {
  return { target, generation, checksum: itemsChecksum([...items].sort(compareItems)), items, failedKeys }
}

/** The snapshot the exporter must build for these items. */
export function expected(items: readonly Item[], inventory: ObjectRef = INV, cluster = CLUSTER): Snapshot {
  return buildSnapshot(inventory, cluster, items)
}

export function keysOf(items: readonly Item[]): string[] {
  return items.map(itemKey).sort()
}

/**
 * Wait (in real time) until cond() holds; sink retries run on real timers. Fails with `what`
 * instead of hanging when it does not happen within timeoutMs.
 */
export async function eventually(cond: () => boolean, what: string, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`)
    await new Promise((r) => setTimeout(r, 1))
  }
}

/** Let already-scheduled promise callbacks and I/O run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r))
}

/**
 * A journal directory removed after the test. The test's exporters close in hooks that may run
 * after this one, and a journal file they settle meanwhile makes a plain rmdir fail (ENOTEMPTY).
 */
export async function journalDir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'kollect-journal-'))
  t.after(() => rm(dir, { recursive: true, force: true, maxRetries: 5 }))
  return dir
}
