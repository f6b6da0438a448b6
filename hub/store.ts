import { mkdir, readdir, readFile, rm } from 'node:fs/promises'
import path from 'node:path'
import { writeFileAtomic } from '../api/files.js'
import { escapePathSegment } from '../sinks/escape.js'
import { inventoryKey, type FleetState, type HeldInventory } from './fleet.js'

// What the hub holds, on disk next to the consumer it belongs to: one file per spoke inventory,
// written after the hub sinks confirmed and before the messages are acknowledged, plus the
// creation time of the durable consumer the files follow.

const CONSUMER_FILE = 'consumer'

export class HubStore {
  private readonly dir: string
  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'hub')
  }

  /** The consumer these files follow (its creation time), or null when there is none. */
  async consumer(): Promise<string | null> {
    return readFile(path.join(this.dir, CONSUMER_FILE), 'utf8').then((s) => s.trim(), () => null)
  }

  /** Drop every inventory and follow a new consumer. */
  async reset(consumerCreated: string): Promise<void> {
    await rm(this.dir, { recursive: true, force: true })
    await mkdir(this.dir, { recursive: true })
    await writeFileAtomic(path.join(this.dir, CONSUMER_FILE), consumerCreated)
  }

  async load(): Promise<FleetState> {
    const state: FleetState = {}
    for (const name of await readdir(this.dir)) {
      if (!name.endsWith('.json')) continue
      const held = JSON.parse(await readFile(path.join(this.dir, name), 'utf8')) as HeldInventory
      state[inventoryKey(held.cluster, held.inventory)] = held
    }
    return state
  }

  /** One inventory as last saved: its last marker whose checksum held, or undefined. */
  async loadOne(key: string): Promise<HeldInventory | undefined> {
    const text = await readFile(this.file(key), 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined
      throw err
    })
    return text === undefined ? undefined : (JSON.parse(text) as HeldInventory)
  }

  async save(key: string, held: HeldInventory | undefined): Promise<void> {
    const file = this.file(key)
    if (held) await writeFileAtomic(file, JSON.stringify(held))
    else await rm(file, { force: true })
  }

  private file(key: string): string {
    return path.join(this.dir, `${escapePathSegment(key)}.json`)
  }
}
