import type { Item, ObjectRef, ReportResult } from '../api/types.js'

// What the exporter charges for holding an item, and the budgets it charges against.
//
// The charge is an upper bound of the heap an item takes once parsed, not its JSON length:
// measured on V8, realistic items cost about 1.9 times their canonical JSON, and hostile shapes
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
/** Key sequences remembered as seen; past either bound a sequence is charged as new. */
const SHAPES_MAX = 4096
const SHAPE_CHARS_MAX = 512

// Strings that JSON writes byte for byte (printable ASCII without quote or backslash).
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

function stringBytes(s: string): number {
  return STRING_HEADER + (PLAIN.test(s) ? s.length + 2 : Buffer.byteLength(JSON.stringify(s)))
}

/**
 * Charges items, remembering the key sequences it has seen: objects of a known sequence share
 * V8's hidden classes and interned keys, so they cost their slots only. What the memory can
 * undercount is bounded by SHAPES_MAX sequences of SHAPE_CHARS_MAX characters (about 10 MiB of
 * hidden classes), a fixed margin the sizing leaves.
 */
export class ItemCharger {
  private readonly shapes = new Set<string>()
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

  /** Whether the key sequence was seen before; remembers it when there is room. */
  private knownShape(keys: string[]): boolean {
    if (keys.length === 0) return true
    let chars = 0
    for (const k of keys) chars += k.length + 1
    if (chars > SHAPE_CHARS_MAX) return false
    const shape = keys.join('\u0000')
    if (this.shapes.has(shape)) return true
    if (this.shapes.size < SHAPES_MAX) this.shapes.add(shape)
    return false
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

  /** Bytes charged for holding the item (see ItemCharger). */
  charge(item: Item): number {
    return this.charger.charge(item)
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
      ? `${what}: namespace ${target.namespace} holds ${this.namespaceBytes(target.namespace)} bytes of items and its share is ${this.namespaceMaxBytes} bytes; split the target, trim the profile, or raise KOLLECT_EXPORTER_NAMESPACE_SHARE`
      : `${what}: the exporter holds ${this.total} bytes of items and its budget is ${this.maxBytes} bytes; split the target, trim the profile, or raise KOLLECT_EXPORTER_ITEM_BUDGET_BYTES with the exporter's memory limit`
    return { accepted: false, reason: 'ResourceLimit', message }
  }
}
