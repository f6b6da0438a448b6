// Many literals found in one pass over a text, for redaction: the text may be long and hostile,
// so the work is linear in it whatever the literals are, and no regular expression is involved.

/** Masked ranges, added in any order and overlapping, rendered as one "***" per run. */
export class Masks {
  private readonly delta: Int32Array
  private any = false

  constructor(length: number) {
    this.delta = new Int32Array(length + 1)
  }

  add(start: number, end: number): void {
    if (end <= start) return
    this.delta[start]! += 1
    this.delta[end]! -= 1
    this.any = true
  }

  render(text: string): string {
    if (!this.any) return text
    let out = ''
    let depth = 0
    let from = 0
    for (let i = 0; i < text.length; i++) {
      const before = depth
      depth += this.delta[i]!
      if (before === 0 && depth > 0) out += `${text.slice(from, i)}***`
      else if (before > 0 && depth === 0) from = i
    }
    return depth === 0 ? out + text.slice(from) : out
  }
}

const NONE = -1
const MANY = -2

/**
 * Aho-Corasick over a set of literals: every occurrence found (overlapping ones too) in one pass,
 * and at the end the longest start of a literal that the text ends with. The root's transitions are a
 * table, as are a single child's; only branching states use a map, so a large secret (a PEM key)
 * costs memory in proportion to its length.
 */
export class LiteralMatcher {
  private readonly symbolOf = new Uint16Array(65536)
  private readonly rootNext: Int32Array
  /** Per state: the symbol of its only child, NONE, or MANY (children in `branches`). */
  private readonly childSymbol: Int32Array
  private readonly onlyChild: Int32Array
  private readonly branches = new Map<number, number>()
  private readonly width: number
  private readonly fail: Int32Array
  private readonly depth: Int32Array
  private readonly longest: Int32Array

  constructor(literals: readonly string[]) {
    // Symbol 0 is every character no literal contains.
    let width = 1
    for (const literal of literals) {
      for (let i = 0; i < literal.length; i++) {
        const code = literal.charCodeAt(i)
        if (this.symbolOf[code] === 0) this.symbolOf[code] = width++
      }
    }
    this.width = width
    this.rootNext = new Int32Array(width)
    const capacity = 1 + literals.reduce((n, l) => n + l.length, 0)
    this.childSymbol = new Int32Array(capacity).fill(NONE)
    this.onlyChild = new Int32Array(capacity)
    this.fail = new Int32Array(capacity)
    this.depth = new Int32Array(capacity)
    this.longest = new Int32Array(capacity)
    const children: number[][] = [[]]
    for (const literal of literals) {
      let s = 0
      for (let i = 0; i < literal.length; i++) {
        const a = this.symbolOf[literal.charCodeAt(i)]!
        let t = this.child(s, a)
        if (t <= 0) {
          t = children.length
          children.push([])
          children[s]!.push(a, t)
          this.depth[t] = i + 1
          this.link(s, a, t)
        }
        s = t
      }
      this.longest[s] = literal.length
    }
    // Breadth first: a state's fallback is shallower, so complete before the state is.
    const queue = [0]
    for (let q = 0; q < queue.length; q++) {
      const s = queue[q]!
      const kids = children[s]!
      for (let k = 0; k < kids.length; k += 2) {
        const a = kids[k]!
        const t = kids[k + 1]!
        this.fail[t] = s === 0 ? 0 : this.step(this.fail[s]!, a)
        this.longest[t] = Math.max(this.longest[t]!, this.longest[this.fail[t]!]!)
        queue.push(t)
      }
    }
  }

  private link(s: number, a: number, t: number): void {
    if (s === 0) this.rootNext[a] = t
    else if (this.childSymbol[s] === NONE) {
      this.childSymbol[s] = a
      this.onlyChild[s] = t
    } else {
      if (this.childSymbol[s] !== MANY) this.branches.set(s * this.width + this.childSymbol[s]!, this.onlyChild[s]!)
      this.childSymbol[s] = MANY
      this.branches.set(s * this.width + a, t)
    }
  }

  /** The child of s on symbol a: 0 at the root when there is none, else -1. */
  private child(s: number, a: number): number {
    if (s === 0) return this.rootNext[a]!
    const only = this.childSymbol[s]!
    if (only === a) return this.onlyChild[s]!
    return only === MANY ? (this.branches.get(s * this.width + a) ?? -1) : -1
  }

  private step(s: number, a: number): number {
    if (a === 0) return 0
    for (;;) {
      const t = this.child(s, a)
      if (t >= 0) return t
      s = this.fail[s]!
    }
  }

  /** Masks every occurrence of a literal; returns how many final characters start one. */
  scan(text: string, masks: Masks): number {
    if (this.width === 1) return 0
    let s = 0
    for (let i = 0; i < text.length; i++) {
      s = this.step(s, this.symbolOf[text.charCodeAt(i)]!)
      const found = this.longest[s]!
      if (found > 0) masks.add(i + 1 - found, i + 1)
    }
    return this.depth[s]!
  }
}
