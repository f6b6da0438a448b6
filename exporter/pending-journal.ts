import { readdir, rm } from 'node:fs/promises'
import path from 'node:path'
import { refKey, sha256 } from '../api/canonical.js'
import type { InventoryComposition, ObjectRef, Snapshot } from '../api/types.js'
import { readTextIfExists, writeFileAtomic } from '../api/files.js'
import { SerialQueue } from '../sinks/serial.js'

/** What a sink last confirmed: status shows it after a restart, until the sink is written again. */
export interface ConfirmedExport {
  checksum: string
  itemCount: number
  /** Epoch ms of the confirmation. */
  at: number
}

/**
 * An inventory's journal entry: the export some sinks still owe (snapshot and sinks, which a
 * restarted exporter resumes through the completeness gate), and the last export each sink confirmed.
 */
export interface PendingExport {
  composition: InventoryComposition
  /** Present when some sink owes it. */
  snapshot?: Snapshot
  /** refKey of each sink that has not confirmed the snapshot. */
  sinks: string[]
  /** By sink refKey. */
  confirmed?: Record<string, ConfirmedExport>
}

const VERSION = 1

/**
 * One file per inventory under the exporter's data directory, replaced atomically. Written when
 * a sink starts failing, when one confirms and at shutdown; removed when the inventory is
 * finalized. A torn or foreign file is reported and skipped, never fatal.
 */
export class PendingJournal {
  private readonly queue = new SerialQueue()

  constructor(readonly dir: string) {}

  save(entry: PendingExport): Promise<void> {
    return this.queue.run(() => writeFileAtomic(this.fileOf(entry.composition.inventory), JSON.stringify({ version: VERSION, ...entry })))
  }

  remove(inventory: ObjectRef): Promise<void> {
    return this.queue.run(() => rm(this.fileOf(inventory), { force: true }))
  }

  /** Resolves once every queued save and removal has ended. */
  drain(): Promise<void> {
    return this.queue.drain()
  }

  async load(): Promise<{ entries: PendingExport[]; problems: string[] }> {
    const entries: PendingExport[] = []
    const problems: string[] = []
    const names = await readdir(this.dir).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? [] : Promise.reject(err)))
    for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
      const file = path.join(this.dir, name)
      try {
        const parsed = JSON.parse((await readTextIfExists(file)) ?? 'null') as (PendingExport & { version?: number }) | null
        if (parsed?.version !== VERSION || !parsed.composition?.inventory || !Array.isArray(parsed.sinks)) {
          throw new Error('not a pending export of this version')
        }
        if (parsed.sinks.length > 0 && !parsed.snapshot?.checksum) throw new Error('sinks owe an export, but the entry has no snapshot')
        if (name !== path.basename(this.fileOf(parsed.composition.inventory))) throw new Error('file name does not match its inventory')
        const confirmed = validConfirmed(parsed.confirmed)
        entries.push({
          composition: parsed.composition,
          sinks: parsed.sinks,
          ...(parsed.sinks.length > 0 && parsed.snapshot ? { snapshot: parsed.snapshot } : {}),
          ...(confirmed ? { confirmed } : {}),
        })
      } catch (err) {
        problems.push(`${name}: ${(err as Error).message}`)
      }
    }
    return { entries, problems }
  }

  /** Names are data: the file is named by a hash of the inventory, never by its name. */
  private fileOf(inventory: ObjectRef): string {
    return path.join(this.dir, `${sha256(refKey(inventory)).slice(0, 32)}.json`)
  }
}

/** The confirmed exports of an entry, when well formed; entries before issue 25 have none. */
function validConfirmed(value: unknown): Record<string, ConfirmedExport> | undefined {
  if (value === undefined) return undefined
  const ok = typeof value === 'object' && value !== null && !Array.isArray(value) && Object.values(value).every((c: Partial<ConfirmedExport> | null) =>
    typeof c?.checksum === 'string' && typeof c.itemCount === 'number' && Number.isFinite(c.at))
  if (!ok) throw new Error('confirmed exports are not well formed')
  return value as Record<string, ConfirmedExport>
}
