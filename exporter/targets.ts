import { itemHash, itemKey, refKey, seedItemHash } from '../api/canonical.js'
import type { HeldReport, Item, ObjectRef, ReportResult, TargetReport } from '../api/types.js'
import { ItemBudget, UNBOUNDED, type BudgetOptions } from './budget.js'
import { SharedStrings } from './shared-strings.js'
import type { ExporterObserver, Log } from './options.js'
import { isStaleItem, isStaleReport, type ReportStamp } from './report-order.js'

/** Finalized targets remembered, oldest forgotten first. */
const FINALIZED_TARGETS_KEPT = 10_000
/** Held items whose strings are shared per turn of the event loop, so other requests wait for one slice at most. */
const SHARE_SLICE = 8_192

interface TargetState {
  items: Map<string, Item>
  /** What the budget charged for items. */
  bytes: number
  /** Of the last accepted report: what orders the next one (isStaleReport), and what a stale one is told. */
  stamp: ReportStamp
  checksum: string
  /** metadata.generation of the held items that had one, by item key. */
  generations: Map<string, number>
  /**
   * Held keys the last accepted report did not name: items kept for objects that failed. What a
   * report of changes applies to is every other held key (a record per reported item, which
   * nothing read, cost accepting 100,000 items as many objects and a third map).
   */
  unreported: Set<string>
  /** Keys of that report's items that were older than the held ones. */
  stale: Set<string>
}

/** A report's items placed against the held ones. */
interface Placed {
  items: Map<string, Item>
  generations: Map<string, number>
  unreported: Set<string>
  /** Keys whose reported item was older than the held one, which stayed. */
  stale: Set<string>
  /**
   * A report of changes is placed in the held target's own maps: before is what each key it
   * moved held, which undo() puts back (a refused report). A whole report gets new maps.
   */
  before?: Map<string, Saved>
  /** The report's items that are held now, not an equal one held before: their strings are shared once accepted. */
  fresh: [Item, ObjectRef][]
}

/** What a key held in the four maps before a report of changes moved it. */
interface Saved {
  item: Item | undefined
  generation: number | undefined
  unreported: boolean
  stale: boolean
}

/**
 * The latest items per target, charged against the item budget. A failed key keeps its last good
 * item, an item older than the held one keeps the held one, and a report older than the held
 * one is dropped as stale.
 */
export class TargetStore {
  private readonly targets = new Map<string, TargetState>()
  /** uid of each finalized target, so a sync still in flight at its finalize cannot bring it back. */
  private readonly finalizedTargets = new Map<string, string>()
  private readonly budget: ItemBudget
  private readonly strings = new SharedStrings()
  /**
   * Accepted items whose strings are not shared yet. Sharing saves memory, not time, so it runs
   * after the report's answer (a fifth of accepting 100,000 items); what reads held items shares
   * them first, so a snapshot always renders shared ones.
   */
  private unshared: [Item, ObjectRef][] = []
  private sharedUpTo = 0
  private sharing: NodeJS.Immediate | undefined

  constructor(budget: BudgetOptions | undefined, private readonly observer: ExporterObserver | undefined, private readonly log: Log) {
    this.budget = new ItemBudget(budget ?? UNBOUNDED)
  }

  /** The configured bounds, in bytes. */
  get budgetBytes(): { exporter: number; namespace: number } {
    return { exporter: this.budget.maxBytes, namespace: this.budget.namespaceMaxBytes }
  }

  has(target: ObjectRef): boolean {
    return this.targets.has(refKey(target))
  }

  /** Whether the target's latest accepted report is this one: same uid, generation and checksum. */
  holds(report: HeldReport): boolean {
    const held = this.targets.get(refKey(report.target))
    return held !== undefined && held.stamp.uid === report.uid && held.stamp.generation === report.generation && held.checksum === report.checksum
  }

  /** The held items of a target the caller knows is held (has()). */
  items(target: ObjectRef): Iterable<Item> {
    this.shareHeld()
    return (this.targets.get(refKey(target)) as TargetState).items.values()
  }

  /** The report's result, and whether the held items changed (what makes inventories export). */
  report(report: TargetReport): { result: ReportResult; changed: boolean } {
    const key = refKey(report.target)
    const finalizedUid = this.finalizedTargets.get(key)
    if (finalizedUid !== undefined) {
      if (report.uid === finalizedUid) {
        this.log('info', 'target report dropped: the target was finalized', { target: key, generation: report.generation, sequence: report.sequence })
        const message = 'the target was finalized; a report of it that arrives later was dropped as stale'
        return { changed: false, result: { accepted: false, reason: 'Stale', message, heldGeneration: report.generation, heldChecksum: '' } }
      }
      this.finalizedTargets.delete(key) // recreated under the same name
    }
    const previous = this.targets.get(key)
    if (previous && isStaleReport(previous.stamp, report)) {
      const { generation, sequence } = previous.stamp
      // The sequences are arrival times: the log may have them, status may not (it must not move with the clock).
      this.log('info', 'target report dropped: older than the one held', {
        target: key, generation: report.generation, sequence: report.sequence, heldGeneration: generation, heldSequence: sequence,
      })
      return {
        changed: false,
        result: {
          accepted: false,
          reason: 'Stale',
          message: report.generation < generation
            ? `the exporter holds a report of generation ${generation}; this one, of generation ${report.generation}, was dropped as stale`
            : `the exporter holds a later report of generation ${generation}; this one, of the same generation but an earlier sync, was dropped as stale`,
          heldGeneration: generation,
          heldChecksum: previous.checksum,
        },
      }
    }
    if (report.base === undefined) return this.accept(report, previous, this.placeAll(report, previous))
    if (!previous || previous.checksum !== report.base || previous.stamp.uid !== report.uid) {
      const message = `the exporter does not hold the report of checksum ${report.base} that this report of changes applies to; send the whole report`
      return { changed: false, result: { accepted: false, reason: 'BaseMismatch', message } }
    }
    // Placed in the held maps (copying four maps of 10,000 items cost more than the change):
    // whatever does not take the report puts them back.
    const { items, generations, unreported, stale } = previous
    const placed: Placed = { items, generations, unreported, stale, before: new Map(), fresh: [] }
    let taken = false
    try {
      this.placeChanges(report, previous, placed)
      const answer = this.accept(report, previous, placed)
      taken = answer.result.accepted
      return answer
    } finally {
      if (!taken) undo(placed, previous)
    }
  }

  /** Charges what was placed, and holds it unless the budget refuses it. */
  private accept(report: TargetReport, previous: TargetState | undefined, placed: Placed): { result: ReportResult; changed: boolean } {
    const key = refKey(report.target)
    const { items, generations, unreported, stale } = placed
    const staleItems = stale.size
    const moved = placed.before && [...placed.before].filter(([k, saved]) => saved.item !== items.get(k))
    // A periodic resync reports the same items: exporting nothing new must not flip status to Pending.
    const changed = moved ? moved.length > 0 : !previous || previous.items.size !== items.size || [...items].some(([k, item]) => previous.items.get(k) !== item)
    const before = previous?.bytes ?? 0
    const { bytes, forget } = moved
      ? this.budget.chargeChange(before, moved.flatMap(([, saved]) => saved.item ?? []), moved.flatMap(([k]) => items.get(k) ?? []))
      : this.budget.chargeReport(items.values())
    const over = this.budget.check(report.target, before, bytes)
    if (over) {
      forget()
      this.observer?.onReportRefused?.(report.target, over)
      const refusal = this.budget.refusal(report.target, over, items.size, bytes)
      this.log('warn', 'target report refused: over the item budget', { target: key, limit: over, items: items.size, bytes })
      return { changed: false, result: refusal }
    }
    const stamp: ReportStamp = { uid: report.uid, generation: report.generation, sequence: report.sequence }
    this.targets.set(key, { items, bytes, stamp, checksum: report.checksum, generations, unreported, stale })
    this.charge(report.target, before, bytes)
    this.share(placed.fresh)
    if (staleItems > 0) {
      this.log('info', 'target report had items older than the held ones; kept the held ones', { target: key, staleItems, sequence: report.sequence })
    }
    return { changed, result: staleItems > 0 ? { accepted: true, staleItems } : { accepted: true } }
  }

  /** Where each item of a whole report goes, against what is held. */
  private placeAll(report: TargetReport, previous: TargetState | undefined): Placed {
    const placed: Placed = { items: new Map(), generations: new Map(), unreported: new Set(), stale: new Set(), fresh: [] }
    report.items.forEach((item, i) => this.place(placed, previous, report.target, item, report.itemHashes?.[i], report.itemGenerations?.[i]))
    this.keepFailed(placed, previous, report.failedKeys)
    return placed
  }

  /**
   * The same for a report of changes to the held report: what it does not name stays as placed
   * last time, which is what the whole report would place again (same item, same generation).
   */
  private placeChanges(changes: TargetReport, previous: TargetState, placed: Placed): void {
    const forget = (k: string) => {
      touch(placed, k)
      placed.items.delete(k)
      placed.generations.delete(k)
      placed.unreported.delete(k)
      placed.stale.delete(k)
    }
    for (const k of changes.removedKeys ?? []) forget(k)
    // Items kept last time for objects that failed: kept again only while they fail.
    const failed = new Set(changes.failedKeys ?? [])
    for (const k of [...previous.unreported]) if (!failed.has(k)) forget(k)
    changes.items.forEach((item, i) => {
      const k = itemKey(item)
      forget(k)
      this.place(placed, previous, changes.target, item, changes.itemHashes?.[i], changes.itemGenerations?.[i])
    })
    this.keepFailed(placed, previous, changes.failedKeys)
  }

  /** One reported item: the held one stays when it is newer (stale) or the same (its hash and rendered text are cached by identity). */
  private place(
    placed: Placed, previous: TargetState | undefined, target: ObjectRef, item: Item, sentHash: string | undefined, generation: number | null | undefined,
  ): void {
    const k = itemKey(item)
    const was = held(placed, previous, k)
    const old = was?.item
    const heldGeneration = was?.generation
    touch(placed, k)
    if (old && isStaleItem(heldGeneration, generation)) {
      placed.stale.add(k)
      placed.items.set(k, old)
      placed.generations.set(k, heldGeneration as number)
      return
    }
    const hash = sentHash ?? itemHash(item)
    if (typeof generation === 'number') placed.generations.set(k, generation)
    const kept = old && itemHash(old) === hash ? old : item
    if (kept === item) {
      seedItemHash(item, hash)
      placed.fresh.push([item, target])
    }
    placed.items.set(k, kept)
  }

  /** Queues accepted items to have their strings shared, a slice per turn of the event loop. */
  private share(fresh: readonly [Item, ObjectRef][]): void {
    if (fresh.length === 0) return
    for (const f of fresh) this.unshared.push(f)
    this.sharing ??= setImmediate(() => this.shareSome(SHARE_SLICE)).unref()
  }

  /** Shares the strings of every accepted item now. */
  private shareHeld(): void {
    if (this.unshared.length > this.sharedUpTo) this.shareSome(Infinity)
  }

  private shareSome(max: number): void {
    const queue = this.unshared
    const end = Math.min(queue.length, this.sharedUpTo + max)
    for (let i = this.sharedUpTo; i < end; i++) {
      const [item, target] = queue[i] as [Item, ObjectRef]
      this.strings.share(item, target)
    }
    this.sharedUpTo = end
    clearImmediate(this.sharing)
    this.sharing = undefined
    if (end < queue.length) {
      this.sharing = setImmediate(() => this.shareSome(SHARE_SLICE)).unref()
    } else {
      this.unshared = []
      this.sharedUpTo = 0
    }
  }

  /** An object whose extraction failed keeps its last good item instead of vanishing downstream. */
  private keepFailed(placed: Placed, previous: TargetState | undefined, failedKeys: readonly string[] | undefined): void {
    for (const failed of failedKeys ?? []) {
      const was = held(placed, previous, failed)
      if (was?.item && !placed.items.has(failed)) {
        touch(placed, failed)
        placed.items.set(failed, was.item)
        placed.unreported.add(failed)
        if (was.generation !== undefined) placed.generations.set(failed, was.generation)
      }
    }
  }

  /** Forget a target's items; true when some were held. With a uid, a later report of it is stale. */
  remove(target: ObjectRef & { uid?: string }): boolean {
    const key = refKey(target)
    if (target.uid) {
      this.finalizedTargets.delete(key)
      this.finalizedTargets.set(key, target.uid)
      // Only late syncs need it, and they come within a hook timeout: a bound keeps churn from growing it.
      if (this.finalizedTargets.size > FINALIZED_TARGETS_KEPT) this.finalizedTargets.delete(this.finalizedTargets.keys().next().value as string)
    }
    const previous = this.targets.get(key)
    if (!previous) return false
    this.targets.delete(key)
    this.charge(target, previous.bytes, 0)
    return true
  }

  private charge(target: ObjectRef, before: number, after: number): void {
    if (before === after) return
    this.budget.move(target, before, after)
    this.observer?.onHeldChange?.(target.namespace, this.budget.namespaceBytes(target.namespace), this.budget.totalBytes)
  }
}

/** Saves what key k holds before a report of changes moves it (the first time). */
function touch(placed: Placed, k: string): void {
  if (!placed.before || placed.before.has(k)) return
  placed.before.set(k, { item: placed.items.get(k), generation: placed.generations.get(k), unreported: placed.unreported.has(k), stale: placed.stale.has(k) })
}

/** Puts back what a report of changes moved in the held target's maps. */
function undo(placed: Placed, held: TargetState): void {
  const restore = <V>(map: Map<string, V>, k: string, v: V | undefined) => (v === undefined ? map.delete(k) : map.set(k, v))
  for (const [k, saved] of placed.before ?? []) {
    restore(held.items, k, saved.item)
    restore(held.generations, k, saved.generation)
    if (saved.unreported) held.unreported.add(k)
    else held.unreported.delete(k)
    if (saved.stale) held.stale.add(k)
    else held.stale.delete(k)
  }
}

/** What the target held for key k before this report: placed in its own maps, what they held before it moved k. */
function held(placed: Placed, previous: TargetState | undefined, k: string): { item: Item | undefined; generation: number | undefined } | undefined {
  const saved = placed.before?.get(k)
  if (saved) return saved
  return previous && { item: previous.items.get(k), generation: previous.generations.get(k) }
}
