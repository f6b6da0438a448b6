import { mkdir, readdir, readFile, rm, rmdir, unlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { Item } from '../../api/types.js'
import { parseItem } from '../document.js'
import { sinkFailure, type Secrets, type SinkLabel } from '../errors.js'
import type { FilePlan } from './encode.js'
import type { TreeChange } from './service.js'

// The files of the working tree: reading what a managed path holds and applying a FilePlan. No
// git here: what is staged and committed is decided in service.ts.

const IO_BATCH = 64

export class WorkTree {
  constructor(
    readonly dir: string,
    private readonly sink: SinkLabel,
    private readonly secrets: Secrets,
  ) {}

  /** A filesystem step in the tree; its failure becomes a retriable SinkError naming the directory. */
  async io<T>(op: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      throw sinkFailure(this.sink, `${op} in ${this.dir}`, err, true, this.secrets)
    }
  }

  /** Every item file under dir that parses, with its path relative to the repository. */
  async readItemFiles(dir: string): Promise<{ path: string; item: Item }[]> {
    const files = await this.listFiles(dir)
    const out: { path: string; item: Item }[] = []
    await inBatches(files, async (rel) => {
      const item = parseItem(await this.io('read', () => readFile(this.abs(rel), 'utf8')))
      if (item) out.push({ path: rel, item })
    })
    return out
  }

  async applyPlan(plan: FilePlan): Promise<TreeChange> {
    const made = new Set<string>()
    await inBatches([...plan.write], async ([rel, text]) => {
      const file = this.abs(rel)
      const dir = path.dirname(file)
      await this.io('write', async () => {
        if (!made.has(dir)) {
          await mkdir(dir, { recursive: true })
          made.add(dir)
        }
        await writeFile(file, text, 'utf8')
      })
    })
    const written = [...plan.write.keys()]
    const removed = plan.remove ?? []
    await this.removeFiles(removed)
    if (!plan.prune) return { written, removed }
    const { dir, keep } = plan.prune
    const stale = (await this.listFiles(dir)).filter((rel) => !keep.has(rel))
    await inBatches(stale, (rel) => this.io('delete', () => unlink(this.abs(rel))))
    if (stale.length > 0) await removeEmptyDirs(this.abs(dir))
    return { written, removed: [...removed, ...stale] }
  }

  /** Removes files, whether or not they are there. */
  async removeFiles(files: readonly string[]): Promise<void> {
    await inBatches(files, (rel) => this.io('delete', () => rm(this.abs(rel), { force: true })))
  }

  /** Removes a file or a directory with everything in it. */
  async removePath(relPath: string): Promise<void> {
    await this.io('delete', () => rm(this.abs(relPath), { recursive: true, force: true }))
  }

  private async listFiles(dir: string): Promise<string[]> {
    const out: string[] = []
    const walk = async (rel: string): Promise<void> => {
      let entries
      try {
        entries = await readdir(this.abs(rel), { withFileTypes: true })
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return
        throw sinkFailure(this.sink, `list ${rel}`, err, true, this.secrets)
      }
      for (const entry of entries) {
        const child = `${rel}/${entry.name}`
        if (entry.isDirectory()) await walk(child)
        else out.push(child)
      }
    }
    await walk(dir)
    return out
  }

  private abs(relPath: string): string {
    return path.join(this.dir, ...relPath.split('/'))
  }
}

async function removeEmptyDirs(dir: string): Promise<boolean> {
  let entries
  try {
    entries = await readdir(dir, { withFileTypes: true })
  } catch {
    return false
  }
  let empty = true
  for (const entry of entries) {
    if (!entry.isDirectory() || !(await removeEmptyDirs(path.join(dir, entry.name)))) empty = false
  }
  if (!empty) return false
  await rmdir(dir).catch(() => undefined)
  return true
}

async function inBatches<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += IO_BATCH) await Promise.all(items.slice(i, i + IO_BATCH).map(fn))
}
