import { execFile } from 'node:child_process'
import { chmod, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import type { GitSinkSettings } from '../../api/types.js'
import { parseLooseCount } from '../../sinks/git/process.js'
import type { SinkOptions } from '../../sinks/options.js'
import type { Sink } from '../../sinks/sink.js'

// Real git, driven the way a person would inspect what the git sink left behind.

const run = promisify(execFile)

/** The test's own git runs are as isolated from the host's configuration as the sink's. */
function testEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('GIT_')) env[key] = value
  return {
    ...env,
    LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_AUTHOR_NAME: 'other writer',
    GIT_AUTHOR_EMAIL: 'other@example.com',
    GIT_COMMITTER_NAME: 'other writer',
    GIT_COMMITTER_EMAIL: 'other@example.com',
  }
}

export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', args, { cwd, env: testEnv(), maxBuffer: 256 * 1024 * 1024 })
  return stdout
}

/** The repository's loose objects, as the git sink counts them before packing. */
export async function looseObjects(repo: string): Promise<number> {
  return parseLooseCount(await git(repo, 'count-objects'))
}

/** The repository's packed blobs: how many are stored whole and their bytes, and the deltas' (verify-pack: a delta's line has 7 fields). */
export async function packedBlobs(repo: string): Promise<{ whole: number; wholeBytes: number; deltas: number; deltaBytes: number }> {
  const dir = path.join(repo, '.git', 'objects', 'pack')
  const indexes = (await readdir(dir)).filter((f) => f.endsWith('.idx')).map((f) => path.join(dir, f))
  const out = { whole: 0, wholeBytes: 0, deltas: 0, deltaBytes: 0 }
  if (indexes.length === 0) return out
  for (const line of (await git(repo, 'verify-pack', '-v', ...indexes)).split('\n')) {
    const f = line.split(/\s+/)
    if (f[1] !== 'blob') continue
    if (f.length === 5) {
      out.whole++
      out.wholeBytes += Number(f[3])
    } else if (f.length === 7) {
      out.deltas++
      out.deltaBytes += Number(f[3])
    }
  }
  return out
}

/** A fresh directory, removed when the test ends. */
export async function tempDir(t: { after(fn: () => Promise<void>): void }, prefix = 'kollect-git-'): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix))
  t.after(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** An empty bare repository whose default branch is main, as a hosting service creates it. */
export async function createBareRemote(root: string, name = 'remote.git'): Promise<string> {
  const dir = path.join(root, name)
  await run('git', ['init', '-q', '--bare', '-b', 'main', dir], { env: testEnv() })
  return dir
}

export async function cloneRemote(url: string, dir: string, branch = 'main'): Promise<string> {
  await run('git', ['clone', '-q', '-b', branch, url, dir], { env: testEnv() })
  return dir
}

export interface LogEntry {
  sha: string
  subject: string
  author: string
  trailers: Record<string, string>
}

export async function gitLog(dir: string, ref = 'HEAD'): Promise<LogEntry[]> {
  const out = await git(dir, 'log', '--format=%H%x1f%s%x1f%an <%ae>%x1f%(trailers:only,unfold)%x1e', ref)
  return out
    .split('\x1e')
    .map((record) => record.trim())
    .filter((record) => record !== '')
    .map((record) => {
      const [sha = '', subject = '', author = '', trailerText = ''] = record.split('\x1f')
      const trailers: Record<string, string> = {}
      for (const line of trailerText.split('\n')) {
        const at = line.indexOf(': ')
        if (at > 0) trailers[line.slice(0, at)] = line.slice(at + 2)
      }
      return { sha, subject, author, trailers }
    })
}

export interface NumstatRow {
  added: number
  deleted: number
  path: string
}

export async function numstat(dir: string, from: string, to = 'HEAD'): Promise<NumstatRow[]> {
  const out = await git(dir, 'diff', '--numstat', from, to)
  return out
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const [added = '', deleted = '', file = ''] = line.split('\t')
      return { added: Number(added), deleted: Number(deleted), path: file }
    })
}

/** The +/- lines of a diff without context or headers. */
export async function changedLines(dir: string, from: string, to = 'HEAD'): Promise<string[]> {
  const out = await git(dir, 'diff', '-U0', from, to)
  return out.split('\n').filter((line) => /^[+-]/.test(line) && !/^(\+\+\+|---) /.test(line))
}

export async function showFile(dir: string, ref: string, file: string): Promise<string> {
  return git(dir, 'show', `${ref}:${file}`)
}

export async function listTree(dir: string, ref: string, under: string): Promise<string[]> {
  // -z: paths as they are, never C-quoted.
  const out = await git(dir, 'ls-tree', '-r', '-z', '--name-only', ref, '--', under)
  return out.split('\0').filter((line) => line !== '')
}

// The sink commits with plumbing (update-ref), which runs no post-commit hook; the
// reference-transaction hook sees every ref update, so it acts on the branch taking a commit the
// remote does not have yet (a checkout of the remote's tip moves the branch too, and is not one).
const RACE_HOOK = 'reference-transaction'

/**
 * Makes another writer push right after the sink's next commit, before its push: the race a
 * second replica or a person editing the repository produces. 'once' pushes the commit prepared
 * in `otherClone` beforehand; 'always' pushes a new empty commit after every commit the sink
 * makes, so the sink never wins the race.
 */
export async function pushFromOtherWriterAfterCommit(repoDir: string, otherClone: string, mode: 'once' | 'always'): Promise<void> {
  const hook = path.join(repoDir, '.git', 'hooks', RACE_HOOK)
  const other = shellQuote(otherClone)
  const script = [
    '#!/bin/sh',
    '[ "$1" = committed ] || exit 0',
    'remote_tip="$(git rev-parse -q --verify refs/remotes/origin/main)"',
    'fire=',
    'while read -r old new ref; do [ "$ref" = refs/heads/main ] && [ "$new" != "$remote_tip" ] && fire=1; done',
    '[ -n "$fire" ] || exit 0',
    'marker="$(git rev-parse --git-dir)/other-writer-pushed"',
    mode === 'once' ? '[ -e "$marker" ] && exit 0' : '',
    ': > "$marker"',
    // The hook runs inside the sink's git process; the other clone must not inherit its repository.
    'unset $(git rev-parse --local-env-vars)',
    mode === 'always' ? `git -C ${other} pull -q --rebase origin main && git -C ${other} commit -q --allow-empty -m race || exit 1` : '',
    `exec git -C ${other} push -q origin HEAD:main`,
    '',
  ].join('\n')
  await writeFile(hook, script)
  await chmod(hook, 0o755)
}

export async function removeHooks(repoDir: string): Promise<void> {
  await rm(path.join(repoDir, '.git', 'hooks', RACE_HOOK), { force: true })
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`
}

export function gitSinkOptions(dataDir: string, git: GitSinkSettings = {}, credentials: Record<string, string> = {}): SinkOptions {
  return { id: 'team-a/git', spec: { type: 'git', cluster: 'lab-west', git }, credentials, dataDir }
}

/** The sink, closed when the test ends. */
export function withSink(t: { after(fn: () => Promise<void>): void }, sink: Sink): Sink {
  t.after(() => sink.close())
  return sink
}
