import { existsSync } from 'node:fs'
import { mkdir, readdir, readFile, rm, rmdir, unlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { simpleGit, type SimpleGit } from 'simple-git'
import type { Item } from '../../api/types.js'
import { parseItem, parseSnapshotItems } from '../document.js'
import { sinkFailure, type Secrets, type SinkLabel } from '../errors.js'
import { SinkError } from '../sink.js'
import type { GitSettings } from './config.js'
import type { ObjectFormat } from './drift.js'
import type { FilePlan } from './encode.js'

// I/O only: git commands and the working tree. Which commits to make is decided by the sink.

/** A git process that prints nothing for this long is stuck (a dead connection) and is killed. */
const SILENCE_TIMEOUT_MS = 5 * 60_000
const IO_BATCH = 64

// Only what git needs from our environment: a developer's EDITOR, GIT_DIR or pager must not
// change what the sink does (and simple-git refuses several of them outright).
const PASSTHROUGH_ENV = [
  'PATH', 'HOME', 'TMPDIR', 'SYSTEMROOT',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'no_proxy', 'all_proxy',
  'SSL_CERT_FILE', 'SSL_CERT_DIR',
]

const PERMANENT_ERRORS = [
  /Authentication failed/i,
  /returned error: (401|403|404)\b/,
  /\b403\b/,
  /could not read (Username|Password)/i,
  /does not appear to be a git repository/i,
  /repository .*not found/i,
  /unable to find remote helper/i,
  /transport '.*' not allowed/i,
  /hook declined/i,
  /not permitted without enabling/i,
]

/**
 * A SinkError from a failed git command, classified on git's own words. The message is
 * redacted and the raw error is not kept as cause: its text is what could carry a credential.
 */
export function gitFailure(sink: SinkLabel, action: string, err: unknown, secrets: Secrets): SinkError {
  if (err instanceof SinkError) return err
  const raw = err instanceof Error ? err.message : String(err)
  const detail = raw
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('hint:'))
    .join('; ')
    .slice(0, 1000)
  return sinkFailure(sink, `git ${action}`, new Error(detail || 'unknown error'), !PERMANENT_ERRORS.some((re) => re.test(raw)), secrets)
}

export function gitEnvironment(settings: GitSettings, dataDir: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const key of PASSTHROUGH_ENV) {
    const value = process.env[key]
    if (value !== undefined) env[key] = value
  }
  const { name, email } = settings.author
  Object.assign(env, {
    // English messages: errors are classified by their text.
    LC_ALL: 'C',
    // Without a terminal a credential prompt would hang; fail instead.
    GIT_TERMINAL_PROMPT: '0',
    // The sink's behaviour must not depend on the host's git configuration (signing, hooks, helpers).
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    // Our paths are data: "*" or ":" in a name must never act as pathspec magic.
    GIT_LITERAL_PATHSPECS: '1',
    GIT_AUTHOR_NAME: name,
    GIT_AUTHOR_EMAIL: email,
    GIT_COMMITTER_NAME: name,
    GIT_COMMITTER_EMAIL: email,
  })
  const config: [string, string][] = [
    ['commit.gpgSign', 'false'],
    // A symlink pushed by another writer must not make us read or write outside the clone.
    ['core.symlinks', 'false'],
    // A volume mounted with another owner (fsGroup) would otherwise be refused as "dubious
    // ownership"; the directory is the sink's own. Only honoured from protected config, like this.
    ['safe.directory', repositoryDir(settings, dataDir)],
    // Inventory documents are large and rewritten often: delta search and strong zlib would
    // cost more per push than the bytes they save; loose objects are packed by gc later anyway.
    ['pack.window', '0'],
    ['pack.compression', '1'],
    ['core.looseCompression', '1'],
  ]
  // Credentials travel per process in the environment: never on a command line (visible in
  // ps), in the remote URL or in .git/config.
  if (settings.auth) config.push([settings.auth.configKey, settings.auth.configValue])
  env.GIT_CONFIG_COUNT = String(config.length)
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key
    env[`GIT_CONFIG_VALUE_${i}`] = value
  })
  return env
}

/** The data directory itself, or the clone of the remote inside it. */
function repositoryDir(settings: GitSettings, dataDir: string): string {
  return settings.url === undefined ? path.resolve(dataDir) : path.join(path.resolve(dataDir), 'work')
}

function openGit(dir: string, env: Record<string, string>): SimpleGit {
  return simpleGit({
    baseDir: dir,
    binary: 'git',
    maxConcurrentProcesses: 1,
    trimmed: false,
    timeout: { block: SILENCE_TIMEOUT_MS },
    // Both are set by us above (the config file paths and the config count), not by a user.
    unsafe: { allowUnsafeConfigPaths: true, allowUnsafeConfigEnvCount: true },
  }).env(env)
}

export type PushOutcome = 'pushed' | 'rejected'

interface Status {
  /** HEAD commit, "" while the branch has none. */
  head: string
  /** Current branch, undefined when HEAD is detached. */
  branch: string | undefined
  trackedChanges: boolean
  untracked: string[]
}

// simple-git waits an extra 50 ms after any git process that printed nothing, so commands here
// run without -q and queries use forms that always print (status --branch, rev-parse --verify,
// fetch -v): an export is a dozen commands, and silence would cost more than the work itself.

/** The repository a git sink writes in: the data directory itself, or a clone of the remote in it. */
export class GitRepository {
  readonly dir: string
  private readonly env: Record<string, string>
  private git: SimpleGit | undefined
  private format: ObjectFormat | undefined

  constructor(
    private readonly settings: GitSettings,
    dataDir: string,
    private readonly sink: SinkLabel,
  ) {
    this.dir = repositoryDir(settings, dataDir)
    this.env = gitEnvironment(settings, dataDir)
  }

  get remote(): boolean {
    return this.settings.url !== undefined
  }

  /**
   * Creates the repository on first use (and again if the data directory was wiped); clears
   * what a crashed process left behind.
   */
  async open(): Promise<void> {
    if (this.git && existsSync(path.join(this.dir, '.git'))) return
    await this.fs('create', () => mkdir(this.dir, { recursive: true }))
    this.git = openGit(this.dir, this.env)
    try {
      await this.prepare()
    } catch (err) {
      this.git = undefined
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
    await this.fs('unlock', () => rm(path.join(this.dir, '.git', 'index.lock'), { force: true }))
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
  private async fetch(): Promise<boolean> {
    const { branch } = this.settings
    try {
      await this.run('fetch', ['fetch', '-v', '--no-tags', 'origin', `+refs/heads/${branch}:refs/remotes/origin/${branch}`])
    } catch (err) {
      if (err instanceof SinkError && /couldn't find remote ref/i.test(err.message)) return false
      throw err
    }
    return true
  }

  private async status(pathspec?: string): Promise<Status> {
    const args = ['status', '--porcelain=v2', '--branch', '-z', '--untracked-files=all']
    if (pathspec !== undefined) args.push('--', pathspec)
    const status: Status = { head: '', branch: undefined, trackedChanges: false, untracked: [] }
    for (const entry of (await this.run('status', args)).split('\0')) {
      if (entry.startsWith('# branch.oid ')) {
        const oid = entry.slice('# branch.oid '.length)
        status.head = oid === '(initial)' ? '' : oid
      } else if (entry.startsWith('# branch.head ')) {
        const head = entry.slice('# branch.head '.length)
        status.branch = head === '(detached)' ? undefined : head
      } else if (entry.startsWith('? ')) status.untracked.push(entry.slice(2))
      else if (/^[12u] /.test(entry)) status.trackedChanges = true
    }
    return status
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
    return (await this.fetch()) ? this.resolve(`refs/remotes/origin/${branch}`) : ''
  }

  /** Object id of every file under dir at a commit, by path. */
  async fileIds(rev: string, dir: string): Promise<Map<string, string>> {
    const ids = new Map<string, string>()
    for (const entry of (await this.run('ls-tree', ['ls-tree', '-r', '-z', rev, '--', dir])).split('\0')) {
      // "<mode> <type> <id>\t<path>"
      const tab = entry.indexOf('\t')
      if (tab < 0) continue
      const [, type, id] = entry.slice(0, tab).split(' ')
      if (type === 'blob' && id) ids.set(entry.slice(tab + 1), id)
    }
    return ids
  }

  async readBlob(id: string): Promise<string> {
    return this.run('cat-file', ['cat-file', 'blob', id])
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

  async readDocumentItems(relPath: string): Promise<Item[]> {
    const text = await this.fs('read', async () => {
      try {
        return await readFile(this.abs(relPath), 'utf8')
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
        throw err
      }
    })
    return (text === undefined ? undefined : parseSnapshotItems(text)) ?? []
  }

  /** Every item file under dir that parses, with its path relative to the repository. */
  async readItemFiles(dir: string): Promise<{ path: string; item: Item }[]> {
    const files = await this.listFiles(dir)
    const out: { path: string; item: Item }[] = []
    await inBatches(files, async (rel) => {
      const item = parseItem(await this.fs('read', () => readFile(this.abs(rel), 'utf8')))
      if (item) out.push({ path: rel, item })
    })
    return out
  }

  async applyPlan(plan: FilePlan): Promise<void> {
    const made = new Set<string>()
    await inBatches([...plan.write], async ([rel, text]) => {
      const file = this.abs(rel)
      const dir = path.dirname(file)
      await this.fs('write', async () => {
        if (!made.has(dir)) {
          await mkdir(dir, { recursive: true })
          made.add(dir)
        }
        await writeFile(file, text, 'utf8')
      })
    })
    if (!plan.prune) return
    const { dir, keep } = plan.prune
    const stale = (await this.listFiles(dir)).filter((rel) => !keep.has(rel))
    await inBatches(stale, (rel) => this.fs('delete', () => unlink(this.abs(rel))))
    if (stale.length > 0) await this.removeEmptyDirs(this.abs(dir))
  }

  async removePath(relPath: string): Promise<void> {
    await this.fs('delete', () => rm(this.abs(relPath), { recursive: true, force: true }))
  }

  /** Stages the managed path and says whether a commit would change anything. */
  async stage(relPath: string): Promise<boolean> {
    const status = await this.status(relPath)
    if (!status.trackedChanges && status.untracked.length === 0) return false
    await this.run('add', ['add', '-A', '-v', '--', relPath])
    return true
  }

  async commit(message: string[]): Promise<void> {
    // Quiet despite the 50 ms: the summary git prints otherwise is a diffstat, which costs far
    // more on a large document.
    const args = ['commit', '-q', '--no-verify', '--cleanup=verbatim']
    for (const paragraph of message) args.push('-m', paragraph)
    await this.run('commit', args)
  }

  /** Pushes HEAD (or refspec) to the branch; a remote that moved on is "rejected", not an error. */
  async push(refspec = `HEAD:refs/heads/${this.settings.branch}`): Promise<PushOutcome> {
    try {
      await this.run('push', ['push', '--no-verify', 'origin', refspec])
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
  async rebaseOnRemote(managed: string, ours: string): Promise<boolean> {
    const { branch } = this.settings
    try {
      await this.run('pull', ['pull', '--rebase', '--no-autostash', 'origin', branch])
    } catch (err) {
      if (!(err instanceof SinkError) || !/conflict|could not apply|rebase/i.test(err.message)) throw err
      await this.abortRebase()
      return false
    }
    const [head, remoteTip] = await Promise.all([this.head(), this.resolve(`refs/remotes/origin/${branch}`)])
    if (head === remoteTip) return false
    return (await this.objectId(managed)) === ours
  }

  async lsRemote(): Promise<void> {
    const parent = path.dirname(this.dir)
    await this.fs('create', () => mkdir(parent, { recursive: true }))
    const git = openGit(parent, this.env)
    try {
      await git.raw(['ls-remote', '--heads', this.settings.url ?? ''])
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

  private async listFiles(dir: string): Promise<string[]> {
    const out: string[] = []
    const walk = async (rel: string): Promise<void> => {
      let entries
      try {
        entries = await readdir(this.abs(rel), { withFileTypes: true })
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return
        throw sinkFailure(this.sink, `list ${rel}`, err, true, this.settings.secrets)
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

  private async removeEmptyDirs(dir: string): Promise<boolean> {
    let entries
    try {
      entries = await readdir(dir, { withFileTypes: true })
    } catch {
      return false
    }
    let empty = true
    for (const entry of entries) {
      if (!entry.isDirectory() || !(await this.removeEmptyDirs(path.join(dir, entry.name)))) empty = false
    }
    if (!empty) return false
    await rmdir(dir).catch(() => undefined)
    return true
  }

  private abs(relPath: string): string {
    return path.join(this.dir, ...relPath.split('/'))
  }

  private async run(op: string, args: string[]): Promise<string> {
    if (!this.git) throw new Error('git repository used before open')
    try {
      return await this.git.raw(args)
    } catch (err) {
      throw gitFailure(this.sink, op, err, this.settings.secrets)
    }
  }

  private async fs<T>(op: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      throw sinkFailure(this.sink, `${op} in ${this.dir}`, err, true, this.settings.secrets)
    }
  }
}

function isUnder(file: string, dir: string): boolean {
  return file === dir || file.startsWith(`${dir}/`)
}

function isRejectedBecauseRemoteMoved(message: string): boolean {
  return (
    /\[rejected\]|non-fast-forward|fetch first/i.test(message) ||
    // Another push won the race for the ref lock on the remote.
    (/\[remote rejected\]/.test(message) && /cannot lock ref|failed to update ref|but expected/i.test(message))
  )
}

async function inBatches<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += IO_BATCH) await Promise.all(items.slice(i, i + IO_BATCH).map(fn))
}
