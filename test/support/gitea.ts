import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { freePort } from './ports.js'
import { pollUntil, startServerProcess, waitForExit, type ServerProcess } from './process.js'
import { ensureTool, toolPaths } from './tools.js'

// A real Gitea (scripts/install-gitea.sh builds it) on a loopback port, in a fresh directory with
// SQLite: the forge of the review-mode tests. It starts in a few seconds; a missing binary is
// built, and a Gitea that cannot start fails the test.

const execFileAsync = promisify(execFile)

export interface GiteaServer {
  /** http://127.0.0.1:port (no trailing slash). */
  readonly url: string
  /** url + /api/v1 */
  readonly apiUrl: string
  /** An admin's access token with every scope. */
  readonly token: string
  readonly user: string
  /** A public repository of `user` with one commit on main; resolves to its HTTP clone URL. */
  createRepo(name: string): Promise<string>
  /** Stop Gitea and delete its directory. */
  stop(): Promise<void>
}

function appIni(root: string, port: number, staticRoot: string): string {
  const asRoot = process.getuid?.() === 0
  return `APP_NAME = kollect-test
RUN_USER = ${os.userInfo().username}
RUN_MODE = prod
WORK_PATH = ${root}
${asRoot ? 'I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\n' : ''}
[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = ${port}
DOMAIN = 127.0.0.1
ROOT_URL = http://127.0.0.1:${port}/
DISABLE_SSH = true
START_SSH_SERVER = false
OFFLINE_MODE = true
LFS_START_SERVER = false
STATIC_ROOT_PATH = ${staticRoot}
APP_DATA_PATH = ${root}/data

[database]
DB_TYPE = sqlite3
PATH = ${root}/data/gitea.db

[repository]
ROOT = ${root}/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = ${randomBytes(24).toString('hex')}
INTERNAL_TOKEN = ${randomBytes(32).toString('hex')}

[oauth2]
JWT_SECRET = ${randomBytes(32).toString('base64url')}

[service]
DISABLE_REGISTRATION = true

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[mailer]
ENABLED = false

[cron.update_checker]
ENABLED = false

[log]
MODE = file
LEVEL = Warn
ROOT_PATH = ${root}/log
`
}

async function apiAnswers(apiUrl: string): Promise<boolean> {
  try {
    const res = await fetch(`${apiUrl}/version`, { signal: AbortSignal.timeout(2000) })
    return res.ok
  } catch {
    return false
  }
}

export async function startGitea(): Promise<GiteaServer> {
  const binary = ensureTool('install-gitea.sh', 'GITEA')
  const staticRoot = toolPaths('install-gitea.sh').GITEA_STATIC_ROOT
  if (!staticRoot) throw new Error('scripts/install-gitea.sh --print-paths names no GITEA_STATIC_ROOT')
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-gitea-'))
  const config = path.join(root, 'custom', 'conf', 'app.ini')
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const apiUrl = `${url}/api/v1`
  const user = 'kollect-admin'
  mkdirSync(path.dirname(config), { recursive: true })
  writeFileSync(config, appIni(root, port, staticRoot))
  // Gitea's git runs and hooks read these; nothing of the host's git configuration leaks in.
  const env: NodeJS.ProcessEnv = { ...process.env, GITEA_WORK_DIR: root, GITEA_CUSTOM: path.join(root, 'custom'), HOME: root }
  const gitea = async (...args: string[]): Promise<string> => {
    try {
      const { stdout } = await execFileAsync(binary, ['--config', config, '--work-path', root, ...args], { env, timeout: 120_000 })
      return stdout
    } catch (err) {
      const e = err as { stderr?: string; stdout?: string; message: string }
      throw new Error(`gitea ${args.slice(0, 3).join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`)
    }
  }

  let proc: ServerProcess | undefined
  const stop = async (): Promise<void> => {
    if (proc && !proc.hasExited()) {
      proc.signalGroup('SIGTERM')
      await waitForExit(proc, 10_000)
    }
    rmSync(root, { recursive: true, force: true })
  }

  try {
    await gitea('migrate')
    await gitea('admin', 'user', 'create', '--admin', '--username', user, '--password', randomBytes(16).toString('hex'),
      '--email', 'admin@kollect.test', '--must-change-password=false')
    const printed = await gitea('admin', 'user', 'generate-access-token', '--username', user, '--token-name', 'kollect-tests',
      '--scopes', 'all', '--raw')
    // As root Gitea warns on stdout before the token: the token is the last line.
    const token = printed.trim().split('\n').pop()?.trim() ?? ''
    if (!/^[0-9a-f]{40}$/.test(token)) throw new Error(`gitea generate-access-token printed no token: ${printed.slice(-300)}`)
    proc = startServerProcess(binary, ['--config', config, '--work-path', root, 'web'], path.join(root, 'gitea.log'), env)
    await pollUntil(`gitea on port ${port}`, () => apiAnswers(apiUrl), { timeoutMs: 60_000, proc, intervalMs: 200 })

    return {
      url,
      apiUrl,
      token,
      user,
      async createRepo(name: string): Promise<string> {
        const res = await fetch(`${apiUrl}/user/repos`, {
          method: 'POST',
          headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ name, auto_init: true, default_branch: 'main', private: false, readme: 'Default' }),
        })
        const body = (await res.json()) as { clone_url?: string; message?: string }
        if (res.status !== 201 || !body.clone_url) throw new Error(`gitea: creating repository ${name}: HTTP ${res.status}: ${body.message ?? ''}`)
        return body.clone_url
      },
      stop,
    }
  } catch (err) {
    const log = proc?.logTail() ?? ''
    await stop()
    throw log ? new Error(`${(err as Error).message}\n${log}`) : err
  }
}
