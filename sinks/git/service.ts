import { existsSync } from 'node:fs'
import { mkdir, rm } from 'node:fs/promises'
import path from 'node:path'
import { sinkFailure, type SinkLabel } from '../errors.js'
import { SinkError } from '../sink.js'
import type { GitSettings } from './config.js'
import type { ObjectFormat } from './drift.js'
import { EPOCH_TRAILER, LEASE_TRAILER, type FilePlan } from './encode.js'
import {
  gitEnvironment, gitFailure, isRejectedBecauseRemoteMoved, parseBlobIds, parseLooseCount, parseStatus, readBlobBatch, repositoryDir, runGit, type Status,
} from './process.js'
import { WorkTree } from './worktree.js'

// I/O only, and every git command the sink runs: which commits to make is decided by the sink,
// the files of the working tree are written by worktree.ts.

export type PushOutcome = 'pushed' | 'rejected'

/** What a change did to the files of the working tree: the paths stage() records. */
export interface TreeChange {
  written: string[]
  removed: string[]
}

/** The tree git names for no files, in each object format: what a branch without commits holds. */
const EMPTY_TREE: Record<ObjectFormat, string> = {
  sha1: '4b825dc642cb6eb9a060e54bf8d69288fbee4904',
  sha256: '6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321',
}

/** Files a plan may have for stagePlan to hash them from memory rather than write them to the tree. */
const FILES_STAGED_FROM_MEMORY = 8

/** A commit and its tree. */
interface Tip {
  commit: string
  tree: string
}

/**
 * Loose objects the exports leave before the sink packs them (maintain()): an export of the
 * document layout leaves a blob, a tree per directory of its path and the commit (six for the
 * default template), so a repack about every seventh export. Until then each loose version is a
 * whole compressed copy of the document; a repack's cost is per new object, so packing often
 * costs no more than packing rarely, in shorter pauses.
 */
export const LOOSE_OBJECTS_BEFORE_REPACK = 40
/**
 * Delta search per new object when packing: a document's versions sort next to each other (same
 * path, near sizes), so a window of 1 finds another version (each comparison of two 17 MB
 * documents costs ~90 ms; 2 cost twice that for the same size in a 200-export run).
 */
const REPACK_WINDOW = 1
/**
 * How long a delta chain may grow: every chain's end is a whole copy of the document, and a
 * thousand exports should leave one or two. Reading the oldest versions costs the chain
 * (~0.4 s for 150 deltas of a 17 MB document); the tip is read from the working tree.
 */
const REPACK_DEPTH = 1000

/** The repository a git sink writes in: the data directory itself, or a clone of the remote in it. */
export class GitRepository {
  readonly dir: string
  /** The files of the working tree, which the sink reads and writes between git commands. */
  readonly tree: WorkTree
  private readonly env: Record<string, string>
  private opened = false
  private format: ObjectFormat | undefined
  /**
   * Remote only: the branch tip this process last pushed, while HEAD, the index and the working
   * tree are still at it. The next export then starts from it without a fetch: if the remote
   * moved meanwhile, the push's lease refuses, and the rebase path fetches (issue 29).
   */
  private pushed: Tip | undefined
  /** HEAD as this process last set it: saves asking git for the parent of the next commit. */
  private headTip: Tip | undefined
  /** What stage() recorded: the tree to commit, its parent, and the ids of the files it wrote. */
  private staged: { tree: string; parent: string; ids: Map<string, string> } | undefined
  /** The last commit, what the remote's branch held under it (a push's lease), and the ids of the files it wrote. */
  private committed: { commit: string; tree: string; base: string; ids: Map<string, string> } | undefined
  private moves = 0
  /**
   * Loose objects at the last count, plus at most how many this process has written since: the
   * count (a process of its own) runs only when the two could reach the repack threshold.
   * Anything fetched makes it unknown.
   */
  private looseBound = Infinity
  /** Files staged from memory whose working-tree copy is older than the index's (stagePlan). */
  private readonly lagging = new Set<string>()
  /** Loose objects a repack left (unreachable ones, which it does not pack): the threshold counts from there. */
  private looseAfterRepack = 0

  constructor(
    private readonly settings: GitSettings,
    dataDir: string,
    private readonly sink: SinkLabel,
  ) {
    this.dir = repositoryDir(settings, dataDir)
    this.tree = new WorkTree(this.dir, sink, settings.secrets)
    this.env = gitEnvironment(settings, dataDir)
  }

  get remote(): boolean {
    return this.settings.url !== undefined
  }

  /**
   * How often HEAD has moved other than by this process's own commits (a checkout of another
   * writer's tip, a rebase). While it stays the same, what a path held at HEAD is what this
   * process last wrote or read there: its own commits change only the paths they staged.
   */
  get generation(): number {
    return this.moves
  }

  /**
   * Creates the repository on first use (and again if the data directory was wiped); clears
   * what a crashed process left behind.
   */
  async open(): Promise<void> {
    if (this.opened && existsSync(path.join(this.dir, '.git'))) return
    await this.tree.io('create', () => mkdir(this.dir, { recursive: true }))
    this.opened = true
    try {
      await this.prepare()
    } catch (err) {
      this.opened = false
      throw err
    }
  }

  /** Healthcheck of a local repository: it exists (or was just created) and git can read it. */
  async verify(): Promise<void> {
    await this.open()
    await this.status()
  }

  private async prepare(): Promise<void> {
    const { branch, url } = this.settings
    // Checked here and not by asking git: a data directory inside another repository must get
    // its own, not write into the enclosing one.
    if (!existsSync(path.join(this.dir, '.git'))) {
      await this.run('init', ['init', '-b', branch])
      if (url !== undefined) await this.run('remote add', ['remote', 'add', 'origin', url])
      return
    }
    // Writes are serialised per sink, so a lock or a rebase in progress at open time is a
    // leftover from a process that died, not a live writer.
    await this.tree.io('unlock', () => rm(path.join(this.dir, '.git', 'index.lock'), { force: true }))
    await this.abortRebase()
    if (url !== undefined) await this.run('remote set-url', ['remote', 'set-url', 'origin', url])
  }

  /**
   * Puts the working tree at the branch tip and returns the tip ("" while the branch has no
   * commit). Local: the branch as it is. Remote: the remote's branch, created with an empty
   * commit when the remote does not have it yet.
   */
  async syncToTip(managed: string): Promise<string> {
    await this.open()
    // What the caller stages next changes the tree: the tip is ours again only once pushed.
    const pushed = this.pushed
    this.pushed = undefined
    if (pushed) return pushed.commit
    this.headTip = undefined
    this.moves++
    await this.abortRebase()
    let status: Status
    if (this.remote) {
      await this.fetchOrCreateBranch()
      status = await this.status()
      // Usually we are already at the tip (our own last push): a checkout of a large tree then costs more than it does.
      const tip = await this.resolve(`refs/remotes/origin/${this.settings.branch}`)
      if (status.branch !== this.settings.branch || status.head !== tip || status.trackedChanges) {
        await this.run('checkout', ['checkout', '-f', '-B', this.settings.branch, `refs/remotes/origin/${this.settings.branch}`])
        status = await this.status()
      }
      // The checkout wrote every file that differed from the tip, those staged from memory too.
      this.lagging.clear()
    } else {
      status = await this.checkoutLocalBranch()
      if (status.trackedChanges) {
        // Only the tip counts: edits or staged files (ours from a crash, or a person's) go.
        if (status.head) await this.run('reset', ['reset', '--hard', 'HEAD'])
        else await this.run('read-tree', ['read-tree', '--empty'])
      }
    }
    if (status.untracked.some((file) => isUnder(file, managed))) {
      await this.run('clean', ['clean', '-fd', '--', managed])
    }
    return status.head
  }

  private async checkoutLocalBranch(): Promise<Status> {
    const { branch } = this.settings
    const status = await this.status()
    if (status.branch === branch) return status
    if (await this.resolve(`refs/heads/${branch}`)) await this.run('checkout', ['checkout', '-f', branch])
    else if (status.head) await this.run('checkout', ['checkout', '-f', '-b', branch])
    else await this.run('symbolic-ref', ['symbolic-ref', 'HEAD', `refs/heads/${branch}`])
    return this.status()
  }

  private async fetchOrCreateBranch(): Promise<void> {
    const { branch } = this.settings
    if (!(await this.fetch())) {
      // git knows the empty tree without storing it, so commit-tree on its well-known id leaves a
      // commit whose tree is missing from the object store (git fsck fails). Written, it is real.
      const emptyTree = (await this.run('hash-object', ['hash-object', '-w', '-t', 'tree', '/dev/null'])).trim()
      const initial = (
        await this.run('commit-tree', ['commit-tree', emptyTree, '-m', `kollect: initialise ${branch}`])
      ).trim()
      // Rejected means another writer created the branch first; theirs is as good as ours.
      await this.push(`${initial}:refs/heads/${branch}`)
      if (!(await this.fetch())) {
        throw sinkFailure(this.sink, 'fetch', new Error(`branch ${branch} is missing after creating it`), true, this.settings.secrets)
      }
    }
  }

  /** Fetches the branch; false when the remote does not have it. */
  private async fetch(branch = this.settings.branch): Promise<boolean> {
    // What a fetch brings is not counted: fewer than 100 objects arrive loose.
    this.looseBound = Infinity
    try {
      await this.run('fetch', ['fetch', '-v', '--no-tags', 'origin', `+refs/heads/${branch}:refs/remotes/origin/${branch}`])
    } catch (err) {
      if (err instanceof SinkError && /couldn't find remote ref/i.test(err.message)) return false
      throw err
    }
    return true
  }

  private async status(): Promise<Status> {
    return parseStatus(await this.run('status', ['status', '--porcelain=v2', '--branch', '-z', '--untracked-files=all']))
  }

  /** Object id of a path at HEAD or at a commit ("" when absent): equal ids mean equal content. */
  async objectId(relPath: string, rev = 'HEAD'): Promise<string> {
    return rev === '' ? '' : this.resolve(`${rev}:${relPath}`)
  }

  /**
   * The branch tip as the store holds it now ("" while the branch has no commit): for a remote,
   * its branch just fetched. Reads only: no branch is created and the working tree stays as it is.
   */
  async currentTip(): Promise<string> {
    await this.open()
    const { branch } = this.settings
    if (!this.remote) return this.resolve(`refs/heads/${branch}`)
    const tip = (await this.fetch()) ? await this.resolve(`refs/remotes/origin/${branch}`) : ''
    // Another writer moved the branch: the next export starts from a fetch, not from our push.
    if (tip !== this.pushed?.commit) this.pushed = undefined
    return tip
  }

  /** Another branch of the remote (a review branch), just fetched: its commit, or "" when absent. */
  async remoteBranch(branch: string): Promise<string> {
    await this.open()
    return (await this.fetch(branch)) ? this.resolve(`refs/remotes/origin/${branch}`) : ''
  }

  /** Object id of every file under dir at a commit, by path. */
  async fileIds(rev: string, dir: string): Promise<Map<string, string>> {
    return parseBlobIds(await this.run('ls-tree', ['ls-tree', '-r', '-z', rev, '--', dir]))
  }

  async readBlob(id: string): Promise<string> {
    return this.run('cat-file', ['cat-file', 'blob', id])
  }

  /** Many blobs in one process; undefined for an id that names no blob. */
  async readBlobs(ids: readonly string[]): Promise<(string | undefined)[]> {
    try {
      return await readBlobBatch(this.dir, this.env, ids)
    } catch (err) {
      throw gitFailure(this.sink, 'cat-file', err, this.settings.secrets)
    }
  }

  /** The hash git names objects with in this repository. */
  async objectFormat(): Promise<ObjectFormat> {
    if (this.format === undefined) {
      await this.open()
      const format = (await this.run('rev-parse', ['rev-parse', '--show-object-format'])).trim()
      this.format = format === 'sha256' ? 'sha256' : 'sha1'
    }
    return this.format
  }

  async head(): Promise<string> {
    return this.resolve('HEAD')
  }

  /** HEAD and its tree, both "" while the branch has no commit. */
  private async readHead(): Promise<Tip> {
    const commit = await this.head()
    return { commit, tree: commit === '' ? '' : await this.resolve(`${commit}^{tree}`) }
  }

  /**
   * The fencing epoch in the newest commit at or before `rev` that names `lease` in its trailers
   * (leader election), or undefined when none does. The lease is data: matched escaped, as a whole line.
   */
  async leaseEpoch(lease: string, rev: string): Promise<number | undefined> {
    if ((await this.resolve(rev)) === '') return undefined
    // A whole trailer line: a lease whose uid another one's begins with must not match.
    const line = `^${LEASE_TRAILER}: ${lease.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`
    const out = await this.run('log', ['log', '-1', '-E', `--grep=${line}`, `--format=%(trailers:key=${EPOCH_TRAILER},valueonly)`, rev, '--'])
    const epoch = Number(out.trim())
    return out.trim() !== '' && Number.isSafeInteger(epoch) ? epoch : undefined
  }

  /**
   * Puts a plan's files in the working tree and the index, and says whether a commit would change
   * anything. In a clone, a plan of a few files (a document, a shard and its envelope) is hashed
   * from memory and not written to the tree at all: nothing reads the clone's files but git, and
   * a rebase writes them first (settleTree).
   */
  async stagePlan(plan: FilePlan): Promise<boolean> {
    if (!this.remote || plan.prune || plan.write.size > FILES_STAGED_FROM_MEMORY) return this.stage(await this.tree.applyPlan(plan))
    // Started before anything is awaited: git hashes while the caller goes on (a diff).
    const written = [...plan.write]
    const hashing = Promise.all(written.map(([, text]) => this.run('hash-object', ['hash-object', '-w', '--no-filters', '--stdin'], text)))
    // Awaited below; a failure meanwhile must not count as unhandled.
    hashing.catch(() => undefined)
    const removed = plan.remove ?? []
    await this.tree.removeFiles(removed)
    const ids = await hashing
    for (const [file] of written) this.lagging.add(file)
    return this.record(new Map(written.map(([file], i) => [file, (ids[i] ?? '').trim()])), removed)
  }

  /** Removes a file, or a directory with everything in it, from the index and the tree; true when the commit would change anything. */
  async stageRemoval(relPath: string): Promise<boolean> {
    const files = (await this.run('ls-files', ['ls-files', '-z', '--', relPath])).split('\0').filter((f) => f !== '')
    await this.tree.removePath(relPath)
    return this.record(new Map(), files)
  }

  /**
   * Records exactly the files a change wrote and removed in the index, and says whether a commit
   * would change anything. Plumbing, not `git status` and `git add`: those scan and re-hash the
   * whole path, and an index entry written within a second of its file is hashed again at every
   * index write. The files are stored as written (no filters), the bytes drift compares.
   */
  private async stage(change: TreeChange): Promise<boolean> {
    const written = new Map<string, string>()
    // Written to the tree: no longer behind the index.
    for (const file of change.written) this.lagging.delete(file)
    if (change.written.length > 0) {
      const out = (await this.run('hash-object', ['hash-object', '-w', '--no-filters', '--stdin-paths'], change.written.map(stdinPath).join(''))).split('\n')
      change.written.forEach((file, i) => written.set(file, out[i] ?? ''))
    }
    return this.record(written, change.removed)
  }

  private async record(written: Map<string, string>, removed: string[]): Promise<boolean> {
    const parent = this.headTip ?? (await this.readHead())
    this.headTip = undefined
    const entries: string[] = []
    const ids = new Map<string, string>()
    if (removed.length > 0) {
      const none = '0'.repeat((await this.objectFormat()) === 'sha256' ? 64 : 40)
      for (const file of removed) {
        entries.push(`0 ${none}\t${file}`)
        ids.set(file, '')
        this.lagging.delete(file)
      }
    }
    for (const [file, id] of written) {
      entries.push(`100644 ${id}\t${file}`)
      ids.set(file, id)
    }
    if (entries.length > 0) await this.run('update-index', ['update-index', '-z', '--index-info'], entries.map((e) => `${e}\0`).join(''))
    const tree = (await this.run('write-tree', ['write-tree'])).trim()
    // The blobs, a tree per directory above a changed file, and the commit to come.
    this.looseBound += written.size + treesAbove([...ids.keys()]) + 1
    if (tree === (parent.commit === '' ? EMPTY_TREE[await this.objectFormat()] : parent.tree)) return false
    this.staged = { tree, parent: parent.commit, ids }
    return true
  }

  /** Writes the files staged from memory into the working tree, for a git command that reads it. */
  private async settleTree(): Promise<void> {
    if (this.lagging.size === 0) return
    const files = [...this.lagging]
    this.lagging.clear()
    await this.run('checkout-index', ['checkout-index', '-f', '-z', '--stdin'], files.map((f) => `${f}\0`).join(''))
  }

  /**
   * Commits what stage() recorded on the branch. Plumbing, not `git commit`, which refreshes the
   * index first. commit-tree writes the message verbatim, paragraphs as
   * `commit --cleanup=verbatim -m` joined them.
   */
  async commit(message: string[]): Promise<string> {
    const staged = this.staged
    if (!staged) throw new Error('git commit without a staged change')
    const { tree, parent, ids } = staged
    this.staged = undefined
    const args = ['commit-tree', tree]
    if (parent) args.push('-p', parent)
    for (const paragraph of message) args.push('-m', paragraph)
    const commit = (await this.run('commit-tree', args)).trim()
    // With the parent as the old value: a ref moved under us fails instead of being overwritten.
    await this.run('update-ref', ['update-ref', '-m', 'kollect: commit', 'HEAD', commit, parent])
    this.committed = { commit, tree, base: parent, ids }
    return commit
  }

  /** Object id of a path in the last commit ("" when absent), known without asking git when that commit wrote it. */
  async committedId(relPath: string): Promise<string> {
    const committed = this.committed
    if (!committed) throw new Error('git object id of a commit not made')
    return committed.ids.get(relPath) ?? this.objectId(relPath, committed.commit)
  }

  /**
   * Pushes the last commit to the branch, leased on the tip it was made on: a remote that moved
   * since, even to an ancestor (a rewind), is "rejected", not overwritten and not an error.
   */
  async pushCommit(): Promise<PushOutcome> {
    const { branch } = this.settings
    const committed = this.committed
    if (!committed) throw new Error('git push without a commit')
    const outcome = await this.push(`${committed.commit}:refs/heads/${branch}`, [`--force-with-lease=refs/heads/${branch}:${committed.base}`])
    if (outcome === 'pushed') this.pushed = this.headTip = { commit: committed.commit, tree: committed.tree }
    return outcome
  }

  /** Pushes a refspec; a remote that moved on is "rejected", not an error. */
  async push(refspec: string, options: string[] = []): Promise<PushOutcome> {
    try {
      await this.run('push', ['push', '--no-verify', ...options, 'origin', refspec])
      return 'pushed'
    } catch (err) {
      if (err instanceof SinkError && isRejectedBecauseRemoteMoved(err.message)) return 'rejected'
      throw err
    }
  }

  /**
   * Replays our commit on the remote's new tip. True when it applied cleanly and left `managed`
   * exactly as we rendered it (objectId `ours`), so it can be pushed as is; false when the
   * caller must start over from the new tip (conflict, our commit became empty, or another
   * writer's change to the same path survived the merge).
   */
  async rebaseOnRemote(managed: string): Promise<boolean> {
    const { branch } = this.settings
    this.pushed = this.headTip = undefined
    this.moves++
    this.looseBound = Infinity
    const committed = this.committed
    if (!committed) return false
    const ours = await this.committedId(managed)
    await this.settleTree()
    try {
      await this.run('pull', ['pull', '--rebase', '--no-autostash', 'origin', branch])
    } catch (err) {
      if (!(err instanceof SinkError) || !/conflict|could not apply|rebase/i.test(err.message)) throw err
      await this.abortRebase()
      return false
    }
    const [head, remoteTip] = await Promise.all([this.head(), this.resolve(`refs/remotes/origin/${branch}`)])
    if (head === remoteTip || (await this.objectId(managed)) !== ours) return false
    this.committed = { ...committed, commit: head, tree: await this.resolve('HEAD^{tree}'), base: remoteTip }
    return true
  }

  /**
   * The sink's own maintenance, at a bounded rate: once LOOSE_OBJECTS_BEFORE_REPACK loose objects
   * have accumulated since the last repack, packs everything with each document version a delta
   * of another. repack -a reuses the deltas of earlier packs, so a run costs the new objects'
   * delta search, not the history's. What a repack leaves loose (unreachable objects, which git
   * gc would prune after two weeks) does not count, or every export would repack. True when it
   * packed.
   */
  async maintain(): Promise<boolean> {
    const threshold = this.looseAfterRepack + LOOSE_OBJECTS_BEFORE_REPACK
    if (this.looseBound < threshold) return false
    await this.open()
    const count = async () => (this.looseBound = parseLooseCount(await this.run('count-objects', ['count-objects'])))
    if ((await count()) < threshold) return false
    await this.run('repack', ['repack', '-a', '-d', '-q', `--window=${REPACK_WINDOW}`, `--depth=${REPACK_DEPTH}`])
    this.looseAfterRepack = await count()
    return true
  }

  async lsRemote(): Promise<void> {
    const parent = path.dirname(this.dir)
    await this.tree.io('create', () => mkdir(parent, { recursive: true }))
    try {
      await runGit(parent, this.env, ['ls-remote', '--heads', this.settings.url ?? ''])
    } catch (err) {
      throw gitFailure(this.sink, 'ls-remote', err, this.settings.secrets)
    }
  }

  private async abortRebase(): Promise<void> {
    const gitDir = path.join(this.dir, '.git')
    if (existsSync(path.join(gitDir, 'rebase-merge')) || existsSync(path.join(gitDir, 'rebase-apply'))) {
      await this.run('rebase --abort', ['rebase', '--abort'])
    }
  }

  /** The object a revision names, or "" when it does not exist. */
  private async resolve(rev: string): Promise<string> {
    try {
      return (await this.run('rev-parse', ['rev-parse', '--verify', rev])).trim()
    } catch (err) {
      if (err instanceof SinkError && /Needed a single revision/.test(err.message)) return ''
      throw err
    }
  }

  private async run(op: string, args: string[], input?: string): Promise<string> {
    if (!this.opened) throw new Error('git repository used before open')
    try {
      return await runGit(this.dir, this.env, args, input)
    } catch (err) {
      throw gitFailure(this.sink, op, err, this.settings.secrets)
    }
  }
}

// `hash-object --stdin-paths` reads a line that starts with a quote as a C-quoted path.
function stdinPath(file: string): string {
  if (/[\n\r]/.test(file)) throw new Error(`a path with a line break cannot be staged: ${JSON.stringify(file)}`)
  return `${file.startsWith('"') ? `"${file.replace(/["\\]/g, '\\$&')}"` : file}\n`
}

/** How many trees hold these files: the root's and one per directory above any of them. */
function treesAbove(files: string[]): number {
  const dirs = new Set([''])
  for (const file of files) for (let at = file.indexOf('/'); at >= 0; at = file.indexOf('/', at + 1)) dirs.add(file.slice(0, at))
  return dirs.size
}

function isUnder(file: string, dir: string): boolean {
  return file === dir || file.startsWith(`${dir}/`)
}

