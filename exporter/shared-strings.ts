import type { Item } from '../api/types.js'

// Items parsed from JSON carry their own copy of every string value longer than V8 internalizes
// (10 characters): an image shared by every Deployment, a condition reason, the target's name.
// Held by the hundred thousand, those copies are a fifth of an item's heap. A table of strings
// seen lately lets every held item point at one copy. It is cleared when full, so strings that
// never repeat (uids, names) cannot grow it: what repeats is shared again within the next items.

/** Distinct strings remembered; at the cap the table starts over. */
const TABLE_MAX = 16_384
/** Longer strings are left alone: rarely repeated, and a table of them would be large. */
const STRING_MAX = 256

export class SharedStrings {
  private table = new Map<string, string>()

  /**
   * Points the item's string values (and its target) at shared copies, in place. Values stay
   * equal, so what is cached by the item's identity (its hash, its charge) stays true; held items
   * are never mutated otherwise.
   */
  share(item: Item, target: Item['target']): void {
    if (item.target !== target && item.target.namespace === target.namespace && item.target.name === target.name) {
      ;(item as { target: Item['target'] }).target = target
    }
    for (const key of ['group', 'version', 'kind', 'namespace'] as const) {
      const v = item[key]
      if (typeof v === 'string') item[key] = this.string(v)
    }
    this.walk(item.attributes)
  }

  private walk(value: object): void {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const v: unknown = value[i]
        if (typeof v === 'string') value[i] = this.string(v)
        else if (v !== null && typeof v === 'object') this.walk(v)
      }
      return
    }
    const obj = value as Record<string, unknown>
    for (const key of Object.keys(obj)) {
      const v = obj[key]
      if (typeof v === 'string') obj[key] = this.string(v)
      else if (v !== null && typeof v === 'object') this.walk(v)
    }
  }

  private string(s: string): string {
    if (s.length > STRING_MAX) return s
    const shared = this.table.get(s)
    if (shared !== undefined) return shared
    if (this.table.size >= TABLE_MAX) this.table = new Map()
    this.table.set(s, s)
    return s
  }
}
