import { spawn } from 'node:child_process'
import path from 'node:path'
import { bounded, sinkFailure, type Secrets, type SinkLabel } from '../errors.js'
import { SinkError } from '../sink.js'
import type { GitSettings } from './config.js'

// How a git process is started (environment, config, timeouts) and how its output and failures
// read. Which commands the sink runs is in service.ts.

/** A git process that prints nothing for this long is stuck (a dead connection) and is killed. */
const SILENCE_TIMEOUT_MS = 5 * 60_000

// Only what git needs from our environment: a developer's EDITOR, GIT_DIR or pager must not
// change what the sink does.
const PASSTHROUGH_ENV = [
  'PATH', 'HOME', 'TMPDIR', 'SYSTEMROOT',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'no_proxy', 'all_proxy',
  'SSL_CERT_FILE', 'SSL_CERT_DIR',
  // A private CA (the chart's extraCACerts): Debian's git (libcurl-gnutls, CA path /etc/ssl/certs
  // and no CA file) reads this file in addition to the system's CAs.
  'GIT_SSL_CAINFO',
]

// git's words for an HTTP redirect it did not follow (http.followRedirects=false).
const REDIRECTED = /returned error: 30[1278]\b/

const PERMANENT_ERRORS = [
  REDIRECTED,
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
  const output = err instanceof Error ? err.message : String(err)
  // git's stderr carries what the remote sent: only its start is classified. The detail is cut
  // by sinkFailure, which knows the secrets a cut could split.
  const raw = bounded(output)
  const detail = output
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('hint:'))
    .join('; ')
  // git's own words for refused credentials name a prompt it may not show, not the cause: the
  // cause leads, git's text follows (and is what a length cut drops first).
  const cause = /could not read (Username|Password)|Authentication failed/i.test(raw) ? 'the remote refused the credentials: check the sink secret'
    : REDIRECTED.test(raw) ? 'the remote redirected; redirects are not followed: set the url to the final address' : ''
  const message = cause ? `${cause}; git said: ${detail}` : detail || 'unknown error'
  return sinkFailure(sink, `git ${action}`, new Error(message), !PERMANENT_ERRORS.some((re) => re.test(raw)), secrets)
}

export function isRejectedBecauseRemoteMoved(message: string): boolean {
  return (
    /\[rejected\]|non-fast-forward|fetch first/i.test(message) ||
    // Another push won the race for the ref lock on the remote.
    (/\[remote rejected\]/.test(message) && /cannot lock ref|failed to update ref|but expected/i.test(message))
  )
}

export interface Status {
  /** HEAD commit, "" while the branch has none. */
  head: string
  /** Current branch, undefined when HEAD is detached. */
  branch: string | undefined
  trackedChanges: boolean
  untracked: string[]
}

/** `git status --porcelain=v2 --branch -z` */
export function parseStatus(output: string): Status {
  const status: Status = { head: '', branch: undefined, trackedChanges: false, untracked: [] }
  for (const entry of output.split('\0')) {
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

/** `git count-objects`: "<n> objects, <k> kilobytes", the loose objects (0 when unreadable). */
export function parseLooseCount(output: string): number {
  const n = Number(/^(\d+) objects/.exec(output)?.[1])
  return Number.isSafeInteger(n) ? n : 0
}

/** `git ls-tree -r -z`: the object id of every blob, by path. */
export function parseBlobIds(output: string): Map<string, string> {
  const ids = new Map<string, string>()
  for (const entry of output.split('\0')) {
    // "<mode> <type> <id>\t<path>"
    const tab = entry.indexOf('\t')
    if (tab < 0) continue
    const [, type, id] = entry.slice(0, tab).split(' ')
    if (type === 'blob' && id) ids.set(entry.slice(tab + 1), id)
  }
  return ids
}

/** What every git Kollect runs gets from its environment: git's own, none of the host's configuration. */
export function isolatedGitEnvironment(): Record<string, string> {
  const env: Record<string, string> = {}
  for (const key of PASSTHROUGH_ENV) {
    const value = process.env[key]
    if (value !== undefined) env[key] = value
  }
  return Object.assign(env, {
    // English messages: errors are classified by their text.
    LC_ALL: 'C',
    // Without a terminal a credential prompt would hang; fail instead.
    GIT_TERMINAL_PROMPT: '0',
    // The sink's behaviour must not depend on the host's git configuration (signing, hooks, helpers).
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    // Our paths are data: "*" or ":" in a name must never act as pathspec magic.
    GIT_LITERAL_PATHSPECS: '1',
  })
}

export function gitEnvironment(settings: GitSettings, dataDir: string): Record<string, string> {
  const env = isolatedGitEnvironment()
  const { name, email } = settings.author
  Object.assign(env, {
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
    // cost more per push than the bytes they save. The sink's own maintenance (maintain() in
    // service.ts) packs the loose objects with deltas. No core.bigFileThreshold: above it git
    // never stores a file as a delta, and the clone grew by a whole copy of the document at
    // every export, gc or not (issue 29).
    ['pack.window', '0'],
    ['pack.compression', '1'],
    ['core.looseCompression', '1'],
    // The SSRF guard checked the remote's host, not wherever it redirects to (git's default
    // follows the first request's redirect, to loopback or the metadata service alike).
    ['http.followRedirects', 'false'],
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
export function repositoryDir(settings: Pick<GitSettings, 'url'>, dataDir: string): string {
  return settings.url === undefined ? path.resolve(dataDir) : path.join(path.resolve(dataDir), 'work')
}

/**
 * Runs git in dir, with `input` on its stdin, and resolves with its stdout; a non-zero exit
 * rejects with stderr then stdout as the message (the text failures are classified on). Spawned
 * directly, args as an array and no shell, so names stay data and nothing waits once the process
 * has exited.
 */
export async function runGit(dir: string, env: Record<string, string>, args: string[], input?: string): Promise<string> {
  return (await runGitBytes(dir, env, args, input)).toString('utf8')
}

/** runGit, with stdout as bytes: what `cat-file --batch` sizes its objects in. */
function runGitBytes(dir: string, env: Record<string, string>, args: string[], input?: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { cwd: dir, env, stdio: ['pipe', 'pipe', 'pipe'] })
    // A git that exits before reading all of it closes the pipe: its exit code tells, not EPIPE.
    child.stdin.on('error', () => undefined)
    child.stdin.end(input)
    const out: Buffer[] = []
    const err: Buffer[] = []
    let timer: NodeJS.Timeout | undefined
    let silent = false
    const watch = (): void => {
      clearTimeout(timer)
      timer = setTimeout(() => {
        silent = true
        child.kill('SIGKILL')
      }, SILENCE_TIMEOUT_MS)
    }
    watch()
    child.stdout.on('data', (chunk: Buffer) => (out.push(chunk), watch()))
    child.stderr.on('data', (chunk: Buffer) => (err.push(chunk), watch()))
    child.on('error', (e) => (clearTimeout(timer), reject(e)))
    child.on('close', (code) => {
      clearTimeout(timer)
      const stdout = Buffer.concat(out)
      if (code === 0) return resolve(stdout)
      const stderr = Buffer.concat(err).toString('utf8')
      const detail = silent ? `git ${args[0] ?? ''} printed nothing for ${SILENCE_TIMEOUT_MS / 1000} s and was killed` : `${stderr}\n${stdout.toString('utf8')}`
      reject(new Error(detail.trim() || `git ${args[0] ?? ''} exited with ${String(code)}`))
    })
  })
}

/** Many blobs read by one `git cat-file --batch`: each one's text in the order of `ids`, undefined for one that names no blob. */
export async function readBlobBatch(dir: string, env: Record<string, string>, ids: readonly string[]): Promise<(string | undefined)[]> {
  if (ids.length === 0) return []
  return parseBlobBatch(await runGitBytes(dir, env, ['cat-file', '--batch'], ids.map((id) => `${id}\n`).join('')), ids)
}

/** `git cat-file --batch` for `ids`: each object's text in their order, undefined for one that is missing or not a blob. */
function parseBlobBatch(output: Buffer, ids: readonly string[]): (string | undefined)[] {
  const texts: (string | undefined)[] = []
  let at = 0
  for (let i = 0; i < ids.length; i++) {
    const eol = output.indexOf(0x0a, at)
    if (eol < 0) break
    // "<oid> <type> <size>", or "<name> missing"
    const [, type, size] = output.subarray(at, eol).toString('utf8').split(' ')
    const bytes = Number(size)
    if (!Number.isSafeInteger(bytes)) {
      texts.push(undefined)
      at = eol + 1
      continue
    }
    texts.push(type === 'blob' ? output.subarray(eol + 1, eol + 1 + bytes).toString('utf8') : undefined)
    at = eol + 1 + bytes + 1
  }
  return texts
}
