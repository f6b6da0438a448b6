import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { jetstreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import { createBareRemote } from '../support/git.js'
import { get } from '../support/hooks-server.js'
import { ROOT } from '../support/metacontroller.js'
import { startNats, type NatsServer } from '../support/nats.js'
import { freePort } from '../support/ports.js'
import { pollUntil, startServerProcess, waitForExit } from '../support/process.js'

// The entry points as an operator starts them: through a symlink (an image's /app -> /opt/...,
// a versioned install) and from a directory with a space in its name. Each must start, or stop
// with one `fatal` line naming the bad setting and exit code 1: never exit 0 having done
// nothing, never a stack trace.

let dir: string
/** dist/ reached through a symlink, and a copy of it whose real path has a space. */
const layouts: Record<string, () => string> = {
  symlink: () => path.join(dir, 'link', 'dist'),
  'space in the path': () => path.join(dir, 'with space', 'dist'),
}

before(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-entry-'))
  symlinkSync(ROOT, path.join(dir, 'link'))
  // A real directory with a space: a symlink would be resolved away before node names the module.
  const spaced = path.join(dir, 'with space')
  mkdirSync(spaced)
  for (const entry of readdirSync(ROOT)) {
    if (entry === 'dist') cpSync(path.join(ROOT, 'dist'), path.join(spaced, 'dist'), { recursive: true })
    else if (!entry.startsWith('.')) symlinkSync(path.join(ROOT, entry), path.join(spaced, entry))
  }
})
after(() => rmSync(dir, { recursive: true, force: true }))

interface Exit {
  code: number | null
  output: string
}

/** Run `script` to its exit (bounded generously) with a clean environment plus `env`. */
function runToExit(script: string, args: string[], env: Record<string, string>): Promise<Exit> {
  const cwd = mkdtempSync(path.join(dir, 'cwd-'))
  const child = spawn(process.execPath, [script, ...args], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env['PATH'], HOME: process.env['HOME'], KOLLECT_DATA_DIR: path.join(cwd, 'data'), ...env },
  })
  let output = ''
  child.stdout.on('data', (b: Buffer) => (output += b.toString()))
  child.stderr.on('data', (b: Buffer) => (output += b.toString()))
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  return new Promise((resolve) => {
    child.once('close', (code) => {
      clearTimeout(killer)
      resolve({ code, output })
    })
  })
}

/** Exit code 1 and exactly one line: a pino `fatal` whose message matches. */
function assertOneFatalLine(exit: Exit, message: RegExp): void {
  const lines = exit.output.split('\n').filter(Boolean)
  assert.equal(exit.code, 1, exit.output)
  assert.equal(lines.length, 1, `one line, got:\n${exit.output}`)
  const line = JSON.parse(lines[0] as string) as { level: number; msg: string }
  assert.equal(line.level, 60, exit.output)
  assert.match(line.msg, message)
}

describe('entry points started through a symlink or a path with a space', () => {
  for (const [layout, dist] of Object.entries(layouts)) {
    test(`main-hub (${layout}) without its config stops with one configuration error`, async () => {
      const exit = await runToExit(path.join(dist(), 'server', 'main-hub.js'), [], { KOLLECT_HUB_CONFIG: path.join(dir, 'no-such.yaml') })
      assertOneFatalLine(exit, /^invalid configuration: hub config .*no-such\.yaml: cannot be read \(ENOENT\)/)
    })

    test(`kollect hub (${layout}) without its config stops with one configuration error`, async () => {
      const exit = await runToExit(path.join(dist(), 'cli', 'main.js'), ['hub', '--config', path.join(dir, 'no-such.yaml')], {})
      assertOneFatalLine(exit, /^invalid configuration: hub config .*no-such\.yaml: cannot be read/)
    })

    test(`main-dev (${layout}) listens`, async () => {
      const port = await freePort()
      const cwd = mkdtempSync(path.join(dir, 'dev-'))
      const proc = startServerProcess(process.execPath, [path.join(dist(), 'server', 'main-dev.js')], path.join(cwd, 'out.log'), {
        PATH: process.env['PATH'],
        HOME: process.env['HOME'],
        PORT: String(port),
        KOLLECT_DATA_DIR: path.join(cwd, 'data'),
      })
      try {
        await pollUntil('main-dev /healthz', async () => (await get(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 30_000, proc })
      } finally {
        proc.signalGroup('SIGTERM')
        await waitForExit(proc, 10_000)
      }
    })
  }
})

describe('the hub ignores the hook settings it does not serve', () => {
  let nats: NatsServer
  before(async () => {
    nats = await startNats()
    const nc = await connect({ servers: nats.url })
    await (await jetstreamManager(nc)).streams.add({ name: 'KOLLECT', subjects: ['kollect.>'] })
    await nc.close()
  })
  after(() => nats.destroy())

  for (const [layout, dist] of Object.entries(layouts)) {
    test(`main-hub (${layout}) with KOLLECT_HOOK_TOKEN set consumes`, async () => {
      const work = mkdtempSync(path.join(dir, 'hub-'))
      const config = path.join(work, 'hub.yaml')
      const remote = await createBareRemote(work)
      writeFileSync(config, JSON.stringify({
        nats: { url: nats.url },
        clusters: ['east'],
        dataDir: path.join(work, 'data'),
        sinks: [{ name: 'fleet-git', spec: { type: 'git', git: { url: remote, branch: 'main' } } }],
      }))
      const port = await freePort()
      const proc = startServerProcess(process.execPath, [path.join(dist(), 'server', 'main-hub.js')], path.join(work, 'out.log'), {
        PATH: process.env['PATH'],
        HOME: process.env['HOME'],
        PORT: String(port),
        KOLLECT_HUB_CONFIG: config,
        KOLLECT_HOOK_TOKEN: 'the-hooks-token',
      })
      try {
        await pollUntil('main-hub /readyz', async () => (await get(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200, { timeoutMs: 30_000, proc })
      } finally {
        proc.signalGroup('SIGTERM')
        await waitForExit(proc, 10_000)
      }
    })
  }
})

describe('a bad setting stops every entry point with one line', { concurrency: 2 }, () => {
  for (const entry of ['main-hooks', 'main-exporter', 'main-dev', 'main-demo', 'main-hub']) {
    test(`${entry}: KOLLECT_LOG_FORMAT=bogus`, async () => {
      const exit = await runToExit(path.join(ROOT, 'dist', 'server', `${entry}.js`), [], { KOLLECT_LOG_FORMAT: 'bogus', KOLLECT_HOOK_TOKEN: 'token' })
      assertOneFatalLine(exit, /^invalid configuration: KOLLECT_LOG_FORMAT must be auto, json, pretty, got "bogus"$/)
    })
  }

  test('main-hub: a hub config that is not YAML', async () => {
    const config = path.join(dir, 'broken.yaml')
    writeFileSync(config, 'nats: {url: [\n  oops\nclusters: :\n')
    const exit = await runToExit(path.join(ROOT, 'dist', 'server', 'main-hub.js'), [], { KOLLECT_HUB_CONFIG: config })
    assertOneFatalLine(exit, /^invalid configuration: hub config .*broken\.yaml: not YAML: /)
  })
})
