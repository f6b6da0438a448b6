import path from 'node:path'
import type { ObjectRef, Snapshot } from '../../api/types.js'
import type { ItemDiff } from '../diff.js'
import { itemPath, renderItem, renderSnapshot } from '../document.js'
import type { FencingToken } from '../fence.js'
import type { WriteResult } from '../sink.js'
import type { GitLayout, GitSettings } from './config.js'
import { planSharded } from './shards.js'

// Pure: which files a snapshot becomes in the repository, and what the commits say. Paths are
// relative to the repository root with "/" separators, as git names them.

export interface FilePlan {
  /** Files to create or replace. */
  write: Map<string, string>
  /** Files that go. */
  remove?: string[]
  /** perResource: every other file under `dir` goes. */
  prune?: { dir: string; keep: Set<string> }
}

/**
 * The path the layout owns for one inventory: the document, or the directory of item files. Only
 * the template's own extension is dropped: a dot in a name ("web.prod") is data, so two
 * inventories never share a directory.
 */
export function managedPath(documentPath: string, layout: GitLayout, template: string): string {
  if (layout === 'document') return documentPath
  const ext = path.posix.extname(template)
  if (ext === '' || /[{}]/.test(ext) || !documentPath.endsWith(ext)) return documentPath
  return documentPath.slice(0, -ext.length)
}

/**
 * `diffed` gives the items' diff against what the tip holds (a document does not ask for it);
 * `held` names the files under a sharded inventory's directory at the tip.
 */
export function planFiles(
  managed: string, settings: Pick<GitSettings, 'layout' | 'shards'>, snapshot: Snapshot, diffed: () => ItemDiff, held: ReadonlySet<string> = new Set(),
): FilePlan {
  if (settings.layout === 'document') return { write: new Map([[managed, renderSnapshot(snapshot)]]) }
  if (settings.layout === 'sharded') return planSharded(managed, snapshot, diffed(), held, settings.shards)
  // Unchanged items already sit at their path with this content (the held state was read from
  // exactly those files), so only the diff is written.
  const diff = diffed()
  const write = new Map<string, string>()
  for (const item of diff.added) write.set(itemPath(managed, item), renderItem(item))
  for (const { after } of diff.changed) write.set(itemPath(managed, after), renderItem(after))
  const keep = new Set(snapshot.items.map((item) => itemPath(managed, item)))
  return { write, prune: { dir: managed, keep } }
}

/** Subject and trailer paragraph; the checksum trailer finds this export in every other sink. */
export function writeMessage(snapshot: Snapshot, counts: WriteResult): string[] {
  const ref = refText(snapshot.inventory)
  return [
    `kollect: ${ref} +${counts.added} ~${counts.changed} -${counts.removed} (${snapshot.itemCount} items)`,
    trailers([
      ['Kollect-Inventory', ref],
      ['Kollect-Cluster', snapshot.cluster],
      ['Kollect-Checksum', snapshot.checksum],
    ]),
  ]
}

/** A repair says so, and carries the same trailers as the export it restores. */
export function repairMessage(snapshot: Snapshot, differences: number): string[] {
  const ref = refText(snapshot.inventory)
  return [
    `kollect: repair drift in ${ref} (${differences} items)`,
    trailers([
      ['Kollect-Inventory', ref],
      ['Kollect-Cluster', snapshot.cluster],
      ['Kollect-Checksum', snapshot.checksum],
    ]),
  ]
}

export function removeMessage(inventory: ObjectRef, cluster: string): string[] {
  const ref = refText(inventory)
  return [
    `kollect: remove ${ref}`,
    trailers([
      ['Kollect-Inventory', ref],
      ['Kollect-Cluster', cluster],
    ]),
  ]
}

function refText(ref: ObjectRef): string {
  return oneLine(`${ref.namespace}/${ref.name}`)
}

export const LEASE_TRAILER = 'Kollect-Lease'
export const EPOCH_TRAILER = 'Kollect-Epoch'

/** A commit message that also names the writer's fencing token (leader election), in its trailer block. */
export function withFencing(message: string[], token: FencingToken | undefined): string[] {
  if (!token) return message
  return [...message.slice(0, -1), `${message.at(-1)}\n${trailers([[LEASE_TRAILER, token.lease], [EPOCH_TRAILER, String(token.epoch)]])}`]
}

function trailers(pairs: [string, string][]): string {
  return pairs.map(([key, value]) => `${key}: ${oneLine(value)}`).join('\n')
}

// A line break in a label would end the trailer block early or forge another trailer.
function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, ' ')
}
