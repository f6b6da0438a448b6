import path from 'node:path'
import type { ObjectRef, Snapshot } from '../../api/types.js'
import type { SinkDescriptor } from '../descriptor.js'
import { diffItems, type HeldItem, type ItemDiff } from '../diff.js'
import { heldFromItems, itemPath, parseSnapshotItems, renderDocumentPath, renderSnapshot } from '../document.js'
import { configError, type SinkLabel } from '../errors.js'
import { NO_FENCE, refuseOlder, type WriteFence } from '../fence.js'
import type { SinkOptions } from '../options.js'
import { resultOf } from '../result.js'
import { SerialQueue } from '../serial.js'
import { emptyResult, SinkError, type DriftMode, type DriftResult, type Sink, type WriteResult } from '../sink.js'
import { gitEndpoints, resolveGitSettings, type GitSettings } from './config.js'
import { blobId, documentDrift, resourceDrift, type Drift } from './drift.js'
import { managedPath, planFiles, removeMessage, repairMessage, withFencing, writeMessage } from './encode.js'
import { createReviewProvider, ReviewFlow } from './review/propose.js'
import { parseShard, renderSharded, shardedDrift, shardedFiles, shardOfPath } from './shards.js'
import { GitRepository } from './service.js'

/** Push attempts per export before giving up with a retriable error. */
const MAX_ATTEMPTS = 5
/** Inventories whose held state is remembered between exports. */
const HELD_CACHE_SIZE = 64

interface HeldState {
  objectId: string
  held: Map<string, HeldItem>
  /** sharded: the files under the inventory's directory. */
  files?: ReadonlySet<string>
  rendered?: string
  /** The repository's generation when the state was taken: while it holds, the state is HEAD's. */
  generation?: number
}

interface Staged {
  message: string[]
  result: WriteResult
  held: Map<string, HeldItem>
  files?: ReadonlySet<string>
  rendered?: string
}

export const gitSink: SinkDescriptor = { type: 'git', create: createGitSink, endpoints: gitEndpoints, inPod: (spec) => !spec.git?.url?.trim() }

/**
 * The git sink: one commit per export that changes something. Without a URL it keeps a local
 * repository in the data directory (the embedded default); with one it works in a clone and
 * pushes, rebasing or re-rendering when another writer got there first.
 */
export function createGitSink(opts: SinkOptions): Sink {
  const label: SinkLabel = { kind: 'git', id: opts.id }
  const queue = new SerialQueue()
  let state: { settings: GitSettings; repo: GitRepository; review: ReviewFlow | undefined } | undefined
  // A bad spec surfaces on every call as a permanent error instead of throwing here, so the
  // exporter reports it in status like any other sink failure.
  const resolved = (): { settings: GitSettings; repo: GitRepository; review: ReviewFlow | undefined } => {
    if (!state) {
      const settings = resolveGitSettings(opts.spec, opts.credentials, label)
      const repo = new GitRepository(settings, opts.dataDir, label)
      const check = opts.checkEndpoint ?? (() => Promise.resolve(null))
      const review = settings.review && new ReviewFlow(settings, settings.review, createReviewProvider(settings.review, check), repo, label)
      state = { settings, repo, review }
    }
    return state
  }
  // What a managed path holds, valid while the path's object id at the tip is unchanged: equal
  // ids mean equal files, so a 10k-item inventory is not re-read for every export. `rendered`
  // names the snapshot the files were rendered from, when we wrote them ourselves.
  const heldCache = new Map<string, HeldState>()

  const managedFor = (inventory: ObjectRef, cluster: string): string => {
    const { settings, repo } = resolved()
    const full = renderDocumentPath(label, repo.dir, settings.pathTemplate, {
      cluster,
      namespace: inventory.namespace,
      name: inventory.name,
    })
    const rel = path.relative(repo.dir, full).split(path.sep).join('/')
    if (rel.split('/').some((part) => part.toLowerCase() === '.git')) {
      throw configError(label, `path template "${settings.pathTemplate}" points into .git`)
    }
    return managedPath(rel, settings.layout, settings.pathTemplate)
  }

  const readHeld = async (managed: string): Promise<HeldState> => {
    const { settings, repo } = resolved()
    const cached = heldCache.get(managed)
    if (cached?.generation === repo.generation) return cached
    const objectId = await repo.objectId(managed)
    if (cached && cached.objectId === objectId) return remember(managed, { ...cached, generation: repo.generation })
    if (objectId === '') return remember(managed, { objectId, held: new Map() })
    if (settings.layout === 'document') return remember(managed, { objectId, held: heldFromItems(parseSnapshotItems(await repo.readBlob(objectId)) ?? []) })
    if (settings.layout === 'sharded') {
      // Shards of another count hold their items too: a new count moves them, and adds none.
      const ids = await repo.fileIds('HEAD', managed)
      const shards = [...ids].flatMap(([file, id]) => {
        const at = shardOfPath(managed, file)
        return at ? [{ ...at, id }] : []
      })
      const texts = await repo.readBlobs(shards.map((s) => s.id))
      const items = shards.flatMap((s, i) => parseShard(texts[i] ?? '', s.shard, s.shards) ?? [])
      return remember(managed, { objectId, held: heldFromItems(items), files: new Set(ids.keys()) })
    }
    // A file not at its item's own path is not held: it is pruned and the item rewritten.
    const files = await repo.tree.readItemFiles(managed)
    return remember(managed, { objectId, held: heldFromItems(files.filter((f) => f.path === itemPath(managed, f.item)).map((f) => f.item)) })
  }

  /** The files a snapshot leaves under a sharded inventory's directory; none to remember otherwise. */
  const layoutFiles = (managed: string): ReadonlySet<string> | undefined => {
    const { settings } = resolved()
    return settings.layout === 'sharded' ? new Set(shardedFiles(managed, settings.shards)) : undefined
  }

  const remember = (managed: string, state: HeldState): HeldState => {
    heldCache.delete(managed)
    heldCache.set(managed, { ...state, generation: resolved().repo.generation })
    if (heldCache.size > HELD_CACHE_SIZE) heldCache.delete(heldCache.keys().next().value as string)
    return state
  }

  /**
   * Brings the working tree to the tip, lets `stage` change `managed`, commits and pushes.
   * Returns undefined when the tip already holds what `stage` produces.
   */
  const publish = async (managed: string, stage: () => Promise<Staged | undefined>, fence: WriteFence = NO_FENCE): Promise<Staged | undefined> => {
    const { repo } = resolved()
    let staged: Staged | undefined
    let ours = ''
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      if (staged === undefined) {
        await repo.syncToTip(managed)
        await refuseLaterLeader(fence, 'HEAD')
        staged = await stage()
        if (staged === undefined) return undefined
        if (!repo.remote) fence.check('committing')
        await repo.commit(withFencing(staged.message, fence.token))
        ours = await repo.committedId(managed)
      } else {
        // Rebased onto commits another writer pushed: the parent of ours is their tip.
        await refuseLaterLeader(fence, 'HEAD~1')
      }
      if (repo.remote) fence.check('pushing')
      if (!repo.remote || (await repo.pushCommit()) === 'pushed') {
        remember(managed, { objectId: ours, held: staged.held, files: staged.files, rendered: staged.rendered })
        return staged
      }
      // The remote moved. A clean rebase that leaves our files as rendered keeps our commit;
      // anything else starts over from the new tip, which re-renders the same snapshot.
      if (!(await repo.rebaseOnRemote(managed))) staged = undefined
    }
    heldCache.delete(managed)
    throw new SinkError(`git sink ${opts.id}: push still rejected after ${MAX_ATTEMPTS} attempts; the remote moves too fast`, {
      retriable: true,
    })
  }

  /** The branch names a later holder of our Lease in a commit at or before `rev`: this writer is stale. */
  const refuseLaterLeader = async (fence: WriteFence, rev: string): Promise<void> => {
    const token = fence.token
    if (!token) return
    const epoch = await resolved().repo.leaseEpoch(token.lease, rev)
    refuseOlder(fence, epoch === undefined ? undefined : { lease: token.lease, epoch }, `branch ${resolved().settings.branch}`)
  }

  const write = async (snapshot: Snapshot, fence: WriteFence): Promise<WriteResult> => {
    const { settings, repo, review } = resolved()
    const managed = managedFor(snapshot.inventory, snapshot.cluster)
    const rendered = snapshotId(snapshot)
    const stage = async (): Promise<Staged | undefined> => {
      const state = await readHeld(managed)
      // Files are a pure function of the snapshot: if we rendered these very files, done.
      if (state.rendered === rendered) return undefined
      let diff: ItemDiff | undefined
      const diffed = (): ItemDiff => (diff ??= diffItems(state.held, snapshot.items))
      // A document needs no diff to be rendered: git starts hashing it while the diff is computed.
      const staging = repo.stagePlan(planFiles(managed, settings, snapshot, diffed, state.files))
      diff = diffed()
      if (!(await staging)) {
        remember(managed, { ...state, rendered })
        return undefined
      }
      const result = resultOf(diff)
      return { message: writeMessage(snapshot, result), result, held: diff.next, files: layoutFiles(managed), rendered }
    }
    if (review) {
      await repo.syncToTip(managed)
      // Nothing is remembered of a proposal: the held cache describes the target branch alone.
      const staged = await stage()
      fence.check('proposing for review')
      return review.propose(snapshot, staged && { ...staged, rendered })
    }
    return (await publish(managed, stage, fence))?.result ?? emptyResult()
  }

  const remove = async (inventory: ObjectRef, cluster: string): Promise<void> => {
    const { repo, review } = resolved()
    // The record on the target branch changes only through review: finalize withdraws the proposal.
    if (review) return review.withdraw({ cluster, namespace: inventory.namespace, name: inventory.name })
    const managed = managedFor(inventory, cluster)
    await publish(managed, async () => {
      if (!(await repo.stageRemoval(managed))) return undefined
      return { message: removeMessage(inventory, cluster), result: emptyResult(), held: new Map() }
    })
  }

  /** What `tip` holds for the inventory against what the snapshot renders to; reads git objects only. */
  const compare = async (managed: string, snapshot: Snapshot, tip: string): Promise<{ drift: Drift; objectId: string }> => {
    const { settings, repo } = resolved()
    const [format, objectId] = await Promise.all([repo.objectFormat(), repo.objectId(managed, tip)])
    if (settings.layout === 'perResource') {
      const held = objectId === '' ? new Map<string, string>() : await repo.fileIds(tip, managed)
      return { drift: resourceDrift(managed, snapshot, held, format), objectId }
    }
    if (settings.layout === 'sharded') {
      const heldIds = objectId === '' ? new Map<string, string>() : await repo.fileIds(tip, managed)
      const rendered = renderSharded(managed, snapshot, settings.shards)
      const differing = new Set([...rendered].filter(([file, text]) => heldIds.get(file) !== blobId(text, format)).map(([file]) => file))
      // Only the files that differ are read.
      const held = [...differing].flatMap((file) => {
        const id = heldIds.get(file)
        return id === undefined ? [] : [{ file, id }]
      })
      const texts = await repo.readBlobs(held.map((h) => h.id))
      const heldTexts = new Map(held.map((h, i) => [h.file, texts[i] ?? '']))
      return { drift: shardedDrift(managed, snapshot, settings.shards, rendered, differing, heldTexts, heldIds), objectId }
    }
    const rendered = renderSnapshot(snapshot)
    // Equal ids are equal bytes: the document is read only when it differs.
    const held = objectId === '' ? undefined : objectId === blobId(rendered, format) ? rendered : await repo.readBlob(objectId)
    return { drift: documentDrift(managed, snapshot, rendered, held), objectId }
  }

  // A check that finds the store in step proves what the tip holds, so the next write of this
  // snapshot can stop early; one that finds drift drops the cache, so that write re-reads the tip.
  const recordCheck = (managed: string, snapshot: Snapshot, objectId: string, drift: Drift): void => {
    if (drift.differences > 0) heldCache.delete(managed)
    else remember(managed, { objectId, held: heldFromItems(snapshot.items), files: layoutFiles(managed), rendered: snapshotId(snapshot) })
  }

  const verify = async (snapshot: Snapshot, mode: DriftMode, fence: WriteFence): Promise<DriftResult> => {
    const { repo } = resolved()
    const managed = managedFor(snapshot.inventory, snapshot.cluster)
    // The check reads objects at the fetched tip and leaves the working tree alone; only a
    // repair pays for bringing the tree to the tip.
    const tip = await repo.currentTip()
    const checked = await compare(managed, snapshot, tip)
    recordCheck(managed, snapshot, checked.objectId, checked.drift)
    let drift = checked.drift
    if (mode === 'report' || drift.differences === 0) return { differences: drift.differences, examples: drift.examples, repaired: false }
    const staged = await publish(managed, async () => {
      // The tip may have moved since the check (and moves again on a rebase retry): then compare anew.
      const head = await repo.head()
      const now = head === tip ? checked : await compare(managed, snapshot, head)
      drift = now.drift
      recordCheck(managed, snapshot, now.objectId, drift)
      if (drift.differences === 0) return undefined
      if (!(await repo.stagePlan(drift.plan))) return undefined
      const held = heldFromItems(snapshot.items)
      return { message: repairMessage(snapshot, drift.differences), result: emptyResult(), held, files: layoutFiles(managed), rendered: snapshotId(snapshot) }
    }, fence)
    return { differences: drift.differences, examples: drift.examples, repaired: staged !== undefined }
  }

  // Maintenance follows every operation that may have committed, in the sink's queue, where
  // nothing else runs git in the clone. The operation's outcome stands whatever it does: a repack
  // that fails leaves the objects loose, and the next operation tries again.
  const maintained = <T>(op: () => Promise<T>): Promise<T> =>
    queue.run(async () => {
      try {
        return await op()
      } finally {
        await state?.repo.maintain().catch(() => false)
      }
    })

  return {
    id: opts.id,
    write: (snapshot, fence = NO_FENCE) => maintained(() => write(snapshot, fence)),
    // In review mode a repair would bypass the review; each poll of the request compares the target instead.
    ...(opts.spec.git?.review ? {} : {
      verify: (snapshot: Snapshot, mode: DriftMode, fence: WriteFence = NO_FENCE) => maintained(() => verify(snapshot, mode, fence)),
    }),
    remove: (inventory, cluster) => maintained(() => remove(inventory, cluster)),
    healthcheck: async () => {
      const { repo } = resolved()
      if (repo.remote) await repo.lsRemote()
      else await queue.run(() => repo.verify())
    },
    close: () => queue.drain(),
  }
}

function snapshotId(snapshot: Snapshot): string {
  return JSON.stringify([snapshot.schemaVersion, snapshot.cluster, snapshot.inventory.namespace, snapshot.inventory.name, snapshot.checksum])
}
