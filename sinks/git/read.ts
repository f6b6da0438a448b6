import path from 'node:path'
import { compareItems } from '../../api/canonical.js'
import type { Item } from '../../api/types.js'
import { itemPath, parseItem, parseSnapshotDocument } from '../document.js'
import { renderPath, type TemplateValues } from '../escape.js'
import type { GitLayout } from './config.js'
import { managedPath } from './encode.js'
import { isolatedGitEnvironment, parseBlobIds, readBlobBatch, runGit } from './process.js'
import { envelopePath, parseEnvelope, parseShard, shardOfPath } from './shards.js'

// Reading what the git sink stored, for tools (the CLI, the history read side): one inventory at
// one revision, whichever layout wrote it, as the same items in the snapshot's order. Reads git
// objects only; the working tree and the repository are left as they are.

export interface StoredInventory {
  layout: GitLayout
  /** The snapshot's items, sorted as in a snapshot. */
  items: Item[]
  /** The export's checksum: the document's or the envelope's; perResource keeps none. */
  checksum: string | undefined
}

/**
 * The inventory `template` names for `values` at `rev` in the repository at `dir`, or undefined
 * when neither its document nor its directory is there. Names are data: the path is rendered and
 * escaped as the sink renders it.
 */
export async function readStoredInventory(dir: string, rev: string, template: string, values: TemplateValues): Promise<StoredInventory | undefined> {
  const env = { ...isolatedGitEnvironment(), GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'safe.directory', GIT_CONFIG_VALUE_0: path.resolve(dir) }
  const document = path.relative(dir, renderPath(dir, template, values)).split(path.sep).join('/')
  const directory = managedPath(document, 'perResource', template)
  const ids = parseBlobIds(await runGit(dir, env, ['ls-tree', '-r', '-z', rev, '--', document, directory]))
  const read = (files: string[]) => readBlobBatch(dir, env, files.map((file) => ids.get(file) ?? ''))

  if (ids.has(document)) {
    const [text] = await read([document])
    const parsed = text === undefined ? undefined : parseSnapshotDocument(text)
    return { layout: 'document', items: parsed?.items ?? [], checksum: checksumOf(parsed?.envelope) }
  }
  const inside = [...ids.keys()].filter((file) => file.startsWith(`${directory}/`))
  if (inside.length === 0) return undefined
  if (ids.has(envelopePath(directory))) {
    const [envelopeText] = await read([envelopePath(directory)])
    const envelope = parseEnvelope(envelopeText ?? '')
    const shards = Number(envelope?.['shards'])
    const files = inside.filter((file) => shardOfPath(directory, file)?.shards === shards)
    const texts = await read(files)
    const items = files.flatMap((file, i) => {
      const at = shardOfPath(directory, file)
      return at ? (parseShard(texts[i] ?? '', at.shard, at.shards) ?? []) : []
    })
    return { layout: 'sharded', items: items.sort(compareItems), checksum: checksumOf(envelope) }
  }
  const texts = await read(inside)
  // As the sink holds them: an item file not at its item's own path is not part of the inventory.
  const items = inside.flatMap((file, i) => {
    const item = parseItem(texts[i] ?? '')
    return item && itemPath(directory, item) === file ? [item] : []
  })
  return { layout: 'perResource', items: items.sort(compareItems), checksum: undefined }
}

function checksumOf(envelope: Record<string, unknown> | undefined): string | undefined {
  return typeof envelope?.['checksum'] === 'string' ? envelope['checksum'] : undefined
}
