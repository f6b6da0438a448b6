import { readFileSync } from 'node:fs'
import type { Readable, Writable } from 'node:stream'

// What every command gets from the process, so that the commands never touch `process`
// themselves: the streams, and whether stderr is a terminal (for progress lines).
export interface Io {
  stdin: Readable
  stdout: Writable
  stderr: Writable
  stderrIsTTY: boolean
}

/** A wrong invocation: exit 2, with the command's usage when the flags themselves are wrong. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly showUsage = false,
  ) {
    super(message)
  }
}

/** A failure that is not the user's invocation (a cluster that cannot be read): exit 1. */
export class RunError extends Error {}

export const EXIT_OK = 0
export const EXIT_INVALID = 1
export const EXIT_USAGE = 2

/** A file's text, or stdin's for "-". An unreadable file is a usage error. */
export async function readInput(file: string, io: Io): Promise<string> {
  if (file === '-') {
    const chunks: Buffer[] = []
    for await (const chunk of io.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer))
    return Buffer.concat(chunks).toString('utf8')
  }
  try {
    return readFileSync(file, 'utf8')
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${describeFsError(err)}`)
  }
}

export function describeFsError(err: unknown): string {
  const e = err as NodeJS.ErrnoException
  switch (e.code) {
    case 'ENOENT':
      return 'no such file'
    case 'EACCES':
    case 'EPERM':
      return 'permission denied'
    case 'EISDIR':
      return 'is a directory'
    default:
      return e.message ?? String(err)
  }
}

/**
 * One line on stderr every `every` objects. On a terminal the line is rewritten in place and
 * ended by done(); elsewhere (--progress into a file or a pipe) each report is its own line.
 */
export class Progress {
  private next: number
  private wrote = false
  constructor(
    private readonly io: Io,
    private readonly enabled: boolean,
    private readonly every = 1000,
  ) {
    this.next = every
  }

  /** Report `count` objects done of `total` (when known), if a multiple of `every` was crossed. */
  update(count: number, verb: string, total?: number): void {
    if (!this.enabled || count < this.next) return
    while (this.next <= count) this.next += this.every
    const line = `kollect: ${verb} ${count}${total === undefined ? '' : ` of ${total}`} objects`
    if (this.io.stderrIsTTY) this.io.stderr.write(`\r${line}\x1b[K`)
    else this.io.stderr.write(line + '\n')
    this.wrote = true
  }

  /** Start counting again from zero (a new phase). */
  reset(): void {
    this.done()
    this.next = this.every
  }

  done(): void {
    if (this.wrote && this.io.stderrIsTTY) this.io.stderr.write('\n')
    this.wrote = false
  }
}
