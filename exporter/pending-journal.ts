import { readdir, rm } from 'node:fs/promises'
import path from 'node:path'
import { refKey, sha256 } from '../api/canonical.js'
import type { InventoryComposition, ObjectRef, Snapshot } from '../api/types.js'
import { readTextIfExists, writeFileAtomic } from '../sinks/document.js'
import { SerialQueue } from '../sinks/serial.js'

/** An export some sinks still owe: what a restarted exporter resumes before any target re-reports. */
export interface PendingExport {
  composition: InventoryComposition
  snapshot: Snapshot
  /** refKey of each sink that has not confirmed the snapshot. */
  sinks: string[]
}

const VERSION = 1

/**
 * One file per inventory under the exporter's data directory, replaced atomically. Written when
 * a sink starts failing and at shutdown, removed once every sink confirmed; a torn or foreign
 * file is reported and skipped, never fatal.
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
        if (parsed?.version !== VERSION || !parsed.composition?.inventory || !parsed.snapshot?.checksum || !Array.isArray(parsed.sinks)) throw new Error('not a pending export of this version')
        if (name !== path.basename(this.fileOf(parsed.composition.inventory))) throw new Error('file name does not match its inventory')
        entries.push({ composition: parsed.composition, snapshot: parsed.snapshot, sinks: parsed.sinks })
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
