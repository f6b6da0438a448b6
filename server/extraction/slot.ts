import { fork, type ChildProcess } from 'node:child_process'
import type { Socket } from 'node:net'
import { getPriority, setPriority } from 'node:os'
import type { FromChild, ToChild } from './child.js'
import { encodeFrame, FrameDecoder } from './frames.js'

const CHILD_URL = new URL('./child.js', import.meta.url)
/** Niceness the shared extraction children add to the server's: under CPU contention the reserve child runs first. */
const SHARED_NICENESS = 5

/** One extraction child process, its frame pipe, its role and the job it runs. */
export interface Slot<J> {
  child: ChildProcess
  pipe: Socket
  reserve: boolean
  job: J | null
  ready: boolean
}

export interface SlotEvents<J> {
  message(slot: Slot<J>, msg: FromChild, payload: Buffer): void
  exit(slot: Slot<J>, code: number | null, signal: NodeJS.Signals | null): void
}

/**
 * Where a child's old generation starts (MiB): a sync's parse moves its objects there (70 MB for
 * half of a 25 MiB body), and from V8's small initial limit each sync set off a full collection
 * mid-sync, marking on both cores while the other half's child worked (bench/README.md, cold).
 */
const INITIAL_OLD_SPACE_MB = 256

/** A new child with its own heap limit; it takes a role (shared or reserve) through assignRole. */
export function spawnSlot<J>(memoryMb: number, on: SlotEvents<J>): Slot<J> {
  const heap = [`--max-old-space-size=${memoryMb}`, `--initial-old-space-size=${Math.min(INITIAL_OLD_SPACE_MB, Math.floor(memoryMb / 2))}`]
  const execArgv = [...process.execArgv.filter((a) => !a.startsWith('--max-old-space-size') && !a.startsWith('--initial-old-space-size')), ...heap]
  const child = fork(CHILD_URL, [], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'pipe', 'ipc'] })
  const pipe = child.stdio[3] as Socket
  const slot: Slot<J> = { child, pipe, reserve: false, job: null, ready: false }
  const decoder = new FrameDecoder<FromChild>()
  pipe.on('data', (chunk: Buffer) => {
    for (const { header, payload } of decoder.push(chunk)) on.message(slot, header, payload)
  })
  pipe.on('error', () => undefined)
  child.on('error', () => undefined)
  child.once('exit', (code, signal) => on.exit(slot, code, signal))
  // Jobs keep the server busy, not idle children.
  child.unref()
  child.channel?.unref()
  pipe.unref()
  return slot
}

/**
 * Shared children run at a lower CPU priority than the reserve, so under contention the
 * reserve, which serves namespaces with short syncs, gets the CPU a flood on the shared ones
 * would take. Raising niceness needs no privilege and lowering it would, so a standby stays at
 * the server's priority until it takes a shared role.
 */
export function assignRole<J>(slot: Slot<J>, reserve: boolean): Slot<J> {
  slot.reserve = reserve
  if (!reserve && slot.child.pid) {
    try {
      setPriority(slot.child.pid, Math.min(19, getPriority(slot.child.pid) + SHARED_NICENESS))
    } catch {
      // Not permitted here: fairness then rests on the queue alone.
    }
  }
  return slot
}

export function sendToSlot<J>(slot: Slot<J>, header: ToChild, payload?: Uint8Array | readonly Uint8Array[]): void {
  // Corked, a payload in many parts (a body without its objects' managedFields) goes to the pipe as one writev.
  slot.pipe.cork()
  for (const part of encodeFrame(header, payload)) slot.pipe.write(part)
  slot.pipe.uncork()
}

/** Kill the child and wait for its exit; its own exit handler no longer runs. */
export function stopSlot<J>(slot: Slot<J>): Promise<void> {
  slot.child.removeAllListeners('exit')
  slot.pipe.removeAllListeners('data')
  if (slot.child.exitCode !== null || slot.child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    // Referenced again, so that close() waits for the exit instead of the loop giving up.
    slot.child.ref()
    slot.child.once('exit', () => resolve())
    slot.child.kill('SIGKILL')
  })
}
