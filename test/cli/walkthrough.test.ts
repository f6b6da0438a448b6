import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { ROOT } from '../support/metacontroller.js'
import { freePort } from '../support/ports.js'
import { pollUntil, startServerProcess, waitForExit, type ServerProcess } from '../support/process.js'

// The README's first steps, run as a newcomer runs them: `npm run demo`, then `npm start` and the
// curl walk-through, in one clone. They must leave separate histories, each the one the README
// describes, and stopping npm must stop the server.

const sh = promisify(execFile)

/** A scratch clone: the built code and the examples, as links, so each test has its own .data. */
function scratchClone(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-walkthrough-'))
  for (const entry of ['dist', 'examples']) symlinkSync(path.join(ROOT, entry), path.join(dir, entry))
  return dir
}

/** What `npm start` runs after its build step: its own entry, as package.json says (npm puts the pinned node first on PATH). */
function startCommand(): string {
  const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts
  const parts = scripts['start']!.split('&&').map((p) => p.trim())
  // The build step compiles only what changed (test/cli/newcomer.test.ts); the suite's build is current.
  assert.equal(parts[0], 'node scripts/build-if-changed.mjs', scripts['start'])
  return parts.slice(1).join(' && ')
}

function localEnv(port: number): NodeJS.ProcessEnv {
  return { PATH: `${path.dirname(process.execPath)}:${process.env['PATH']}`, HOME: process.env['HOME'], PORT: String(port), KOLLECT_EXPORTER_PORT: '0' }
}

async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' })
    socket.once('connect', () => (socket.destroy(), resolve(true)))
    socket.once('error', () => resolve(false))
  })
}

async function startDev(dir: string, port: number, via = ''): Promise<ServerProcess> {
  const proc = startServerProcess('sh', ['-c', `cd '${dir}' && ${via}${startCommand()}`], path.join(dir, 'server.log'), localEnv(port))
  await pollUntil('npm start listening', () => listening(port), { timeoutMs: 60_000, proc, intervalMs: 200 })
  return proc
}

async function gitSubjects(repo: string): Promise<string[]> {
  const { stdout } = await sh('git', ['-C', repo, 'log', '--format=%s'])
  return stdout.trim().split('\n')
}

interface Step {
  command: string
  /** The `# →` line after it: what the answer shows. */
  claim?: string
}

/** The README's curl walk-through: the sh block that curls the hooks, as commands and claims. */
function walkthrough(): Step[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const block = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.includes('curl -s -X POST localhost:8080'))
  assert.ok(block, 'the README has no curl walk-through')
  const steps: Step[] = []
  for (const line of block.split('\n').filter((l) => l.trim() !== '')) {
    if (line.startsWith('# → ')) steps.at(-1)!.claim = line.slice(4).trim()
    else steps.push({ command: line })
  }
  return steps
}

type Answer = { status: { conditions?: { type: string; status: string; reason: string }[] } & Record<string, unknown> } & Record<string, unknown>

/** Each claim word is `field=value` (a status count or a field of the answer) or `Type=Status(Reason)`. */
function checkClaim(answer: Answer, claim: string, command: string): void {
  for (const word of claim.split(/\s+/)) {
    const condition = /^(\w+)=(True|False|Unknown)\((\w+)\)$/.exec(word)
    if (condition) {
      const c = answer.status.conditions?.find((x) => x.type === condition[1])
      assert.deepEqual(c && [c.status, c.reason], [condition[2], condition[3]], `${command}\nclaims ${word}, answered ${JSON.stringify(answer.status.conditions)}`)
      continue
    }
    const [field, value] = word.split('=')
    const actual = field! in answer.status ? answer.status[field!] : answer[field!]
    assert.equal(String(actual), value, `${command}\nclaims ${word}, answered ${field}=${JSON.stringify(actual)}`)
  }
}

test('npm run demo and npm start keep separate histories, each the one the README describes', { timeout: 180_000 }, async () => {
  const dir = scratchClone()
  let dev: ServerProcess | undefined
  try {
    // A demo run before leaves something behind, and a KOLLECT_DATA_DIR set for other work must not be emptied.
    mkdirSync(path.join(dir, '.data', 'demo'), { recursive: true })
    writeFileSync(path.join(dir, '.data', 'demo', 'left-over'), 'x')
    mkdirSync(path.join(dir, 'mine'))
    writeFileSync(path.join(dir, 'mine', 'keep'), 'x')
    const demo = await sh(process.execPath, ['dist/server/main-demo.js'], { cwd: dir, env: { ...localEnv(0), KOLLECT_DATA_DIR: path.join(dir, 'mine') }, timeout: 120_000 })
    // Never a silent pause: it says each export runs now rather than after the debounce.
    assert.equal(demo.stdout.split('\n').filter((l) => l.includes('exporting now: a cluster would wait 10s')).length, 2, demo.stdout)
    const demoRepo = path.join(dir, '.data', 'demo', 'sinks', 'team-a', 'git-demo')
    const demoHistory = ['kollect: team-a/prod-inventory +0 ~1 -0 (3 items)', 'kollect: team-a/prod-inventory +3 ~0 -0 (3 items)']
    assert.deepEqual(await gitSubjects(demoRepo), demoHistory)
    assert.equal(existsSync(path.join(dir, '.data', 'demo', 'left-over')), false, 'the demo starts from an empty directory')
    assert.equal(existsSync(path.join(dir, 'mine', 'keep')), true, 'the demo ignores KOLLECT_DATA_DIR')

    const port = await freePort()
    dev = await startDev(dir, port)
    const steps = walkthrough()
    assert.ok(steps.filter((s) => s.command.startsWith('curl')).length >= 3 && steps.every((s) => s.command.startsWith('sleep') || s.claim), JSON.stringify(steps))
    let askedResync: string | undefined
    for (const { command, claim } of steps) {
      if (command.startsWith('sleep')) {
        // The README waits as long as the answer before asked, no less.
        assert.equal(command.split(/\s+/)[1], askedResync, `${command}: the answer before asked for resyncAfterSeconds=${askedResync}`)
      }
      const { stdout } = await sh('sh', ['-c', command.replaceAll('localhost:8080', `127.0.0.1:${port}`)], { cwd: dir, timeout: 60_000 })
      if (command.startsWith('curl')) {
        const answer = JSON.parse(stdout) as Answer
        checkClaim(answer, claim!, command)
        askedResync = answer['resyncAfterSeconds'] === undefined ? undefined : String(answer['resyncAfterSeconds'])
      } else if (claim) {
        assert.equal(stdout.trim(), claim, command)
      }
    }
    // npm start's first export is the README's +3, in its own directory; the demo's is untouched.
    assert.deepEqual(await gitSubjects(path.join(dir, '.data', 'dev', 'sinks', 'team-a', 'git-demo')), ['kollect: team-a/prod-inventory +3 ~0 -0 (3 items)'])
    assert.deepEqual(await gitSubjects(demoRepo), demoHistory)
  } finally {
    if (dev) {
      dev.signalGroup('SIGTERM')
      await waitForExit(dev, 30_000)
    }
    rmSync(dir, { recursive: true, force: true })
  }
})

test('killing npm start with SIGKILL stops the server: port 8080 is not left taken', { timeout: 120_000 }, async () => {
  const dir = scratchClone()
  const port = await freePort()
  // npm's place: a parent that runs the start script through sh and is then killed outright.
  writeFileSync(path.join(dir, 'npm.cjs'), `require('node:child_process').spawn('sh', ['-c', process.argv[2]], { stdio: 'inherit' }); setInterval(() => {}, 60_000)\n`)
  const parent = startServerProcess(process.execPath, [path.join(dir, 'npm.cjs'), `cd '${dir}' && ${startCommand()}`], path.join(dir, 'server.log'), localEnv(port))
  try {
    await pollUntil('npm start listening', () => listening(port), { timeoutMs: 60_000, proc: parent, intervalMs: 200 })
    process.kill(parent.child.pid!, 'SIGKILL')
    await parent.exited
    // The server notices within its poll interval (0.5 s) and shuts down; 15 s leaves room for a busy machine.
    await pollUntil('port released after npm was killed', async () => !(await listening(port)), { timeoutMs: 15_000, intervalMs: 100 })
    const log = readFileSync(path.join(dir, 'server.log'), 'utf8')
    assert.match(log, /the parent process exited; shutting down/)
  } finally {
    parent.signalGroup('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
})
