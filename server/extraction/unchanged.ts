import { Gmac } from './body-scan.js'
import type { HeldReport, TargetStatus } from '../../api/types.js'
import type { SyncResponse } from '../../hooks/request.js'

/** How long an answer is reused at most: past it the sync runs again (a plural the discovery changed, a config). */
const MAX_AGE_MS = 10 * 60_000

interface Entry {
  at: number
  response: SyncResponse<TargetStatus>
  report: HeldReport
}

/**
 * The last answers to target syncs, by a digest of the whole body: a GMAC under the process's own
 * key, as a span's (body-scan.ts), four times as fast as SHA-256 on a body that has to be hashed
 * as it comes. Nobody who sends bodies knows the key or sees a digest, so no body can pass for
 * another. A resync in which nothing changed arrives byte for byte as the last one (Metacontroller sends the same objects, and the
 * target's status it wrote back from that answer), so its answer is the same: the route gives it
 * without parsing or extracting anything, once the exporter says it still holds the report that
 * answer sent (an exporter that restarted, or a replica that missed it, gets it again). Only an
 * answer whose report every exporter accepted whole is kept. Keyed by the bytes alone, a hit
 * answers exactly the request that was sent, whoever sends it.
 */
export class UnchangedSyncs {
  private readonly entries = new Map<string, Entry>()

  constructor(private readonly maxEntries: number, private readonly now: () => number = Date.now) {}

  get enabled(): boolean {
    return this.maxEntries > 0
  }

  /** The body's key, fed chunk by chunk while the body arrives (digest() gives it). */
  hasher(): Gmac {
    return new Gmac()
  }

  /** The answer kept for this body, if it is young enough. */
  get(digest: string): Entry | undefined {
    const entry = this.entries.get(digest)
    if (!entry) return undefined
    this.entries.delete(digest)
    if (this.now() - entry.at > MAX_AGE_MS) return undefined
    // Most recently used last: the first is the one to drop.
    this.entries.set(digest, entry)
    return entry
  }

  remember(digest: string, response: SyncResponse<TargetStatus>, report: HeldReport): void {
    if (!this.enabled) return
    this.entries.delete(digest)
    this.entries.set(digest, { at: this.now(), response, report })
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string)
  }

  /** The answer kept for one key is also the answer for another (the same body, keyed otherwise). */
  alias(digest: string, other: string): void {
    const entry = this.entries.get(digest)
    if (entry) this.remember(other, entry.response, entry.report)
  }

  /** A body that changed replaces its target's old entry only by LRU; forget drops one at once. */
  forget(digest: string): void {
    this.entries.delete(digest)
  }

  get size(): number {
    return this.entries.size
  }
}
