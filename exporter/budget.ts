import type { Item, ObjectRef, ReportResult } from '../api/types.js'

// What the exporter charges for holding an item, and the budgets it charges against.
//
// The charge is an upper bound of the heap an item takes once parsed, not its JSON length:
// measured on V8, realistic items cost 1.7-1.9 times their canonical JSON, and hostile shapes
// far more (a list of empty maps, 21 times; maps with keys of their own, 14 times), so a budget
// in JSON bytes would let a profile multiply it. Every node is charged what V8 spends on it at
// most (headers, 8-byte slots, boxed numbers), every string its UTF-8 JSON length (never less
// than its heap size nor than its bytes on the wire), and every object whose key sequence is new
// the hidden classes V8 builds for it. Measured ratios: docs/operations.md#sizing.

/** Map entry, item key string, item hash string and WeakMap entries, per held item. */
const PER_ITEM = 256
const SLOT = 8
const STRING_HEADER = 24
const NUMBER = 16
const ARRAY_HEADER = 48
const OBJECT_HEADER = 64
/** A hidden class, its descriptor and transition entries, per key of a key sequence not seen before. */
const NEW_PROPERTY = 160
/** Keys remembered in key sequences seen; past either bound a key is charged as new. */
const SHAPE_KEYS_MAX = 16_384
const SHAPE_KEY_CHARS_MAX = 128

// Strings that JSON writes byte for byte (printable ASCII without quote or backslash).
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

function stringBytes(s: string): number {
  return STRING_HEADER + (PLAIN.test(s) ? s.length + 2 : Buffer.byteLength(JSON.stringify(s)))
}

/** A key sequence seen, as a trie: V8's hidden classes form the same tree of transitions. */
interface ShapeNode {
  next: Map<string, ShapeNode> | null
}

/**
 * Charges items, remembering the key sequences it has seen: objects whose keys follow a known
 * path share V8's hidden classes and interned keys, so they cost their slots only. What this
 * can undercount is bounded by SHAPE_KEYS_MAX remembered keys (a few MiB of hidden classes), a
 * fixed margin the sizing leaves.
 */
export class ItemCharger {
  private readonly shapes: ShapeNode = { next: null }
  private shapeKeys = 0
  /** Keys remembered while charging one report, so a refused report leaves no trace. */
  private remembered: [Map<string, ShapeNode>, string][] | null = null

  /**
   * Charges a report's items. What it learnt of key sequences on the way is forgotten by
   * forget(), so refusing a report leaves the charger as it was: an identical report is then
   * charged the same, and gets the same refusal.
   */
  chargeReport(items: Iterable<Item>): { bytes: number; forget(): void } {
    return this.learning(() => {
      let bytes = 0
      for (const item of items) bytes += this.charge(item)
      return bytes
    })
  }

  /**
   * The same for a change of held items that were charged bytes: what the items that stay were
   * charged is cached by identity, so the sum is the one chargeReport gives for them all.
   */
  chargeChange(bytes: number, gone: Iterable<Item>, come: Iterable<Item>): { bytes: number; forget(): void } {
    return this.learning(() => {
      let n = bytes
      for (const item of gone) n -= this.charge(item)
      for (const item of come) n += this.charge(item)
      return n
    })
  }

  private learning(charging: () => number): { bytes: number; forget(): void } {
    const remembered: [Map<string, ShapeNode>, string][] = []
    this.remembered = remembered
    let bytes: number
    try {
      bytes = charging()
    } finally {
      this.remembered = null
    }
    return {
      bytes,
      forget: () => {
        for (const [map, key] of remembered) map.delete(key)
        this.shapeKeys -= remembered.length
      },
    }
  }
  // Items are immutable once held, and an unchanged item keeps its object from report to report.
  private readonly charged = new WeakMap<Item, number>()

  /** Bytes charged for holding the item: an upper bound of its heap size and of its JSON length. */
  charge(item: Item): number {
    let n = this.charged.get(item)
    if (n === undefined) {
      n = PER_ITEM + this.valueBytes(item)
      this.charged.set(item, n)
    }
    return n
  }

  private valueBytes(value: unknown): number {
    switch (typeof value) {
      case 'string':
        return SLOT + stringBytes(value)
      case 'number':
        return SLOT + NUMBER
      case 'object': {
        if (value === null) return SLOT
        if (Array.isArray(value)) {
          let n = SLOT + ARRAY_HEADER
          for (const v of value) n += this.valueBytes(v)
          return n
        }
        const keys = Object.keys(value)
        let n = SLOT + OBJECT_HEADER + keys.length * SLOT
        if (!this.knownShape(keys)) for (const key of keys) n += NEW_PROPERTY + stringBytes(key)
        for (const key of keys) n += this.valueBytes((value as Record<string, unknown>)[key])
        return n
      }
      default:
        return SLOT
    }
  }

  /** Whether the key sequence was seen before (as a sequence or a prefix); remembers it when there is room. */
  private knownShape(keys: string[]): boolean {
    let node = this.shapes
    let known = true
    for (const key of keys) {
      let child = node.next?.get(key)
      if (child === undefined) {
        known = false
        if (this.shapeKeys >= SHAPE_KEYS_MAX || key.length > SHAPE_KEY_CHARS_MAX) return false
        child = { next: null }
        const next = (node.next ??= new Map())
        next.set(key, child)
        this.remembered?.push([next, key])
        this.shapeKeys++
      }
      node = child
    }
    return known
  }
}

export interface BudgetOptions {
  /** Bytes of items the exporter holds at most, over all targets. */
  maxBytes: number
  /** Fraction of maxBytes the targets of one namespace may hold together. */
  namespaceShare: number
}

/** Nothing bounded: for embedders and tests that do not care. */
export const UNBOUNDED: BudgetOptions = { maxBytes: Number.MAX_SAFE_INTEGER, namespaceShare: 1 }

export type BudgetLimit = 'namespace' | 'exporter'

/** The bytes held per namespace of a target and in total; refuses a change that would go over. */
export class ItemBudget {
  readonly maxBytes: number
  readonly namespaceMaxBytes: number
  private total = 0
  private readonly namespaces = new Map<string, number>()
  private readonly charger = new ItemCharger()

  constructor(options: BudgetOptions) {
    this.maxBytes = options.maxBytes
    this.namespaceMaxBytes = Math.floor(options.maxBytes * options.namespaceShare)
  }

  /** Bytes charged for holding a report's items (see ItemCharger.chargeReport). */
  chargeReport(items: Iterable<Item>): { bytes: number; forget(): void } {
    return this.charger.chargeReport(items)
  }

  /** The same for a change of held items (see ItemCharger.chargeChange). */
  chargeChange(bytes: number, gone: Iterable<Item>, come: Iterable<Item>): { bytes: number; forget(): void } {
    return this.charger.chargeChange(bytes, gone, come)
  }

  get totalBytes(): number {
    return this.total
  }

  namespaceBytes(namespace: string): number {
    return this.namespaces.get(namespace) ?? 0
  }

  /**
   * Which limit a target going from `before` to `after` bytes would break, or null. Shrinking is
   * always allowed, so a target can always get back under.
   */
  check(target: ObjectRef, before: number, after: number): BudgetLimit | null {
    if (after <= before) return null
    if (this.namespaceBytes(target.namespace) - before + after > this.namespaceMaxBytes) return 'namespace'
    if (this.total - before + after > this.maxBytes) return 'exporter'
    return null
  }

  /** Record a target going from `before` to `after` bytes. */
  move(target: ObjectRef, before: number, after: number): void {
    const ns = this.namespaceBytes(target.namespace) - before + after
    if (ns === 0) this.namespaces.delete(target.namespace)
    else this.namespaces.set(target.namespace, ns)
    this.total += after - before
  }

  /** The refusal for a report of `count` items charged `bytes`, over `limit`. Deterministic in the held state. */
  refusal(target: ObjectRef, limit: BudgetLimit, count: number, bytes: number): ReportResult {
    const what = `the exporter refused ${count} items (${bytes} bytes)`
    const message = limit === 'namespace'
      ? `${what}: namespace ${target.namespace} holds ${this.namespaceBytes(target.namespace)} bytes of items ` +
        `and its share is ${this.namespaceMaxBytes} bytes; split the target, trim the profile, or raise KOLLECT_EXPORTER_NAMESPACE_SHARE`
      : `${what}: the exporter holds ${this.total} bytes of items and its budget is ${this.maxBytes} bytes; ` +
        'split the target, trim the profile, or raise KOLLECT_EXPORTER_ITEM_BUDGET_BYTES with the exporter\'s memory limit'
    return { accepted: false, reason: 'ResourceLimit', message }
  }
}
