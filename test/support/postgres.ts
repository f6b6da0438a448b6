import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { freePort } from './ports.js'
import { pollUntil, run, startServerProcess, waitForExit, type ServerProcess } from './process.js'

export interface PgServer {
  /** postgres://user:password@127.0.0.1:port/postgres (password auth over TCP). */
  readonly dsn: string
  readonly port: number
  readonly user: string
  readonly password: string
  /** Fast shutdown (SIGINT): in-flight transactions are rolled back, clients disconnected. */
  stop(): Promise<void>
  /** Start again on the same data directory and port. */
  start(): Promise<void>
  /** Immediate shutdown (SIGQUIT), as after a crash: recovery runs on the next start. */
  kill(): Promise<void>
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params?: unknown[]): Promise<R[]>
  /** Stop and delete the data directory. */
  destroy(): Promise<void>
}

function postgresBinDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(path.join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : []
  if (versions.length === 0) throw new Error(`no PostgreSQL binaries under ${root} (set PG_BIN)`)
  return path.join(root, versions[0]!, 'bin')
}

// Postgres refuses to run as root; as root we hand the directory to the postgres user.
function asServerUser(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args]
}

function chownToServerUser(dir: string): void {
  if (process.getuid?.() !== 0) return
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim())
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim())
  const walk = (p: string): void => {
    chownSync(p, uid, gid)
    for (const entry of readdirSync(p, { withFileTypes: true })) {
      const child = path.join(p, entry.name)
      if (entry.isDirectory()) walk(child)
      else chownSync(child, uid, gid)
    }
  }
  walk(dir)
}

export interface PgOptions {
  /** Serve TLS (ssl=on) with this certificate and key; plain connections still work. */
  tls?: { certFile: string; keyFile: string }
}

export async function startPostgres(options: PgOptions = {}): Promise<PgServer> {
  const bin = postgresBinDir()
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-pg-'))
  const dataDir = path.join(root, 'data')
  const socketDir = path.join(root, 'sock')
  const logFile = path.join(root, 'postgres.log')
  const user = 'kollect'
  const password = 'kollect-test-pw'
  const port = await freePort()
  writeFileSync(path.join(root, 'pwfile'), password + '\n')
  mkdirSync(socketDir)
  // The server reads its key only when the server user owns it and nobody else can read it.
  const tlsArgs: string[] = []
  if (options.tls) {
    copyFileSync(options.tls.certFile, path.join(root, 'server.crt'))
    copyFileSync(options.tls.keyFile, path.join(root, 'server.key'))
    chmodSync(path.join(root, 'server.key'), 0o600)
    tlsArgs.push('-c', 'ssl=on', '-c', `ssl_cert_file=${path.join(root, 'server.crt')}`, '-c', `ssl_key_file=${path.join(root, 'server.key')}`)
  }
  chownToServerUser(root)

  const [initCmd, initArgs] = asServerUser(path.join(bin, 'initdb'), [
    '-D', dataDir, '-U', user, `--pwfile=${path.join(root, 'pwfile')}`,
    '--auth-host=scram-sha-256', '--auth-local=trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions',
  ])
  try {
    await run(initCmd, initArgs, 'initdb')
  } catch (err) {
    rmSync(root, { recursive: true, force: true })
    throw err
  }

  const dsn = `postgres://${user}:${password}@127.0.0.1:${port}/postgres`
  let proc: ServerProcess | undefined

  const probe = async (): Promise<boolean> => {
    const client = new pg.Client({ connectionString: dsn, connectionTimeoutMillis: 1000 })
    client.on('error', () => undefined)
    try {
      await client.connect()
      await client.query('SELECT 1')
      return true
    } catch {
      return false
    } finally {
      await client.end().catch(() => undefined)
    }
  }

  const start = async (): Promise<void> => {
    if (proc && !proc.hasExited()) throw new Error('postgres is already running')
    const [cmd, args] = asServerUser(path.join(bin, 'postgres'), [
      '-D', dataDir, '-p', String(port), '-k', socketDir,
      '-c', 'listen_addresses=127.0.0.1',
      '-c', 'fsync=off', '-c', 'full_page_writes=off',
      '-c', 'max_connections=60', '-c', 'logging_collector=off',
      ...tlsArgs,
    ])
    proc = startServerProcess(cmd, args, logFile)
    await pollUntil(`postgres on port ${port}`, probe, { timeoutMs: 30_000, proc })
  }

  // Signals go to the postmaster itself (not runuser), named by its pid file.
  const signalPostmaster = async (signal: NodeJS.Signals): Promise<void> => {
    if (!proc || proc.hasExited()) return
    const pidFile = path.join(dataDir, 'postmaster.pid')
    const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : NaN
    if (Number.isInteger(pid) && pid > 0) {
      try {
        process.kill(pid, signal)
      } catch {
        proc.signalGroup(signal)
      }
    } else {
      proc.signalGroup(signal)
    }
    await waitForExit(proc, 15_000)
  }

  try {
    await start()
  } catch (err) {
    await signalPostmaster('SIGKILL')
    rmSync(root, { recursive: true, force: true })
    throw err
  }

  return {
    dsn,
    port,
    user,
    password,
    start,
    stop: () => signalPostmaster('SIGINT'),
    kill: () => signalPostmaster('SIGQUIT'),
    async query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> {
      const client = new pg.Client({ connectionString: dsn, connectionTimeoutMillis: 5000 })
      client.on('error', () => undefined)
      await client.connect()
      try {
        return (await client.query<R>(sql, params)).rows
      } finally {
        await client.end().catch(() => undefined)
      }
    },
    async destroy(): Promise<void> {
      await signalPostmaster('SIGINT')
      rmSync(root, { recursive: true, force: true })
    },
  }
}
