import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, openSync, readFileSync } from 'node:fs'

// Every server a test starts runs in its own process group, so a crashed or interrupted test
// run can still take the whole group down (runuser + postgres + backends, or nats-server).
const live = new Set<ChildProcess>()

process.once('exit', () => {
  for (const child of live) killGroup(child, 'SIGKILL')
})

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    // already gone
  }
}

export interface ServerProcess {
  readonly child: ChildProcess
  /** Resolves when the process has exited, with its exit code or signal. */
  readonly exited: Promise<string>
  hasExited(): boolean
  /** Signal the whole process group. */
  signalGroup(signal: NodeJS.Signals): void
  logTail(lines?: number): string
}

/** Start a long-running server detached in its own process group, output appended to logFile. */
export function startServerProcess(command: string, args: string[], logFile: string, env?: NodeJS.ProcessEnv): ServerProcess {
  const fd = openSync(logFile, 'a')
  let child: ChildProcess
  try {
    child = spawn(command, args, { detached: true, stdio: ['ignore', fd, fd], env: env ?? process.env })
  } finally {
    closeSync(fd)
  }
  live.add(child)
  let exitedFlag = false
  const exited = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => {
      exitedFlag = true
      live.delete(child)
      resolve(signal ?? `exit ${code}`)
    })
    child.once('error', (err) => {
      exitedFlag = true
      live.delete(child)
      resolve(`spawn error: ${err.message}`)
    })
  })
  return {
    child,
    exited,
    hasExited: () => exitedFlag,
    signalGroup: (signal) => killGroup(child, signal),
    logTail: (lines = 30) => {
      try {
        return readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
      } catch {
        return '(no log)'
      }
    },
  }
}

/** Wait for an exit, escalating to SIGKILL on the group if it takes longer than graceMs. */
export async function waitForExit(proc: ServerProcess, graceMs: number): Promise<void> {
  if (proc.hasExited()) return
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), graceMs)
  })
  try {
    if ((await Promise.race([proc.exited, timeout])) === 'timeout') {
      proc.signalGroup('SIGKILL')
      await proc.exited
    }
  } finally {
    clearTimeout(timer)
  }
}

/** Poll `probe` until it returns true; fail with `describe()` when the process dies or time runs out. */
export async function pollUntil(
  what: string,
  probe: () => Promise<boolean>,
  opts: { timeoutMs: number; proc?: ServerProcess; intervalMs?: number },
): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs
  for (;;) {
    if (opts.proc?.hasExited()) {
      throw new Error(`${what}: process exited (${await opts.proc.exited}).\n${opts.proc.logTail()}`)
    }
    if (await probe()) return
    if (Date.now() > deadline) {
      throw new Error(`${what}: not ready after ${opts.timeoutMs} ms.\n${opts.proc?.logTail() ?? ''}`)
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 50))
  }
}

export function run(command: string, args: string[], what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout?.on('data', (d: Buffer) => (output += d.toString()))
    child.stderr?.on('data', (d: Buffer) => (output += d.toString()))
    child.once('error', (err) => reject(new Error(`${what}: ${err.message}`)))
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${what} failed (exit ${code}):\n${output.slice(-4000)}`)),
    )
  })
}
