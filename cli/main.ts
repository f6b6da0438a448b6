#!/usr/bin/env node
// The kollect command: try a profile and a target over real objects before turning them on
// (preview), and check Kollect YAML before applying it (validate). Nothing here talks to the
// hooks service: both commands run the hooks' own code in this process.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { enableLinearRegExps } from '../server/process/regexp-engine.js'
import { HUB_USAGE, runHub } from './hub.js'
import { INVENTORY_USAGE, runInventory } from './inventory.js'
import { EXIT_OK, EXIT_USAGE, RunError, UsageError, type Io } from './io.js'
import { runPreview } from './preview.js'
import { PREVIEW_USAGE } from './preview-options.js'
import { runValidate, VALIDATE_USAGE } from './validate.js'

export const USAGE = `Usage: kollect <command> [options]

Commands:
  preview    run a KollectTarget and its KollectProfile over objects (a file, stdin or a
             cluster) and print the items the target would export
  validate   check Kollect resources in YAML files against their CRD schemas and compile
             every expression
  hub        run in hub mode: fan in the spokes' NATS events to the hub's sinks
  inventory  print the items of an inventory as a git sink stored them, at any revision

Options:
  -h, --help       show this help
  -v, --version    print the version

Run 'kollect <command> --help' for the options of a command.
`

const COMMANDS: Record<string, { run: (argv: string[], io: Io) => Promise<number>; usage: string }> = {
  preview: { run: runPreview, usage: PREVIEW_USAGE },
  validate: { run: runValidate, usage: VALIDATE_USAGE },
  hub: { run: runHub, usage: HUB_USAGE },
  inventory: { run: runInventory, usage: INVENTORY_USAGE },
}

/** The version in the package.json above this module (source tree, dist/ or an installed copy). */
export function version(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const file = join(dir, 'package.json')
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string }
      if (pkg.name === 'kollect' && pkg.version) return pkg.version
    }
    const parent = dirname(dir)
    if (parent === dir) return 'unknown'
    dir = parent
  }
}

export async function run(argv: string[], io: Io): Promise<number> {
  const [first, ...rest] = argv
  if (first === undefined) {
    io.stderr.write(USAGE)
    return EXIT_USAGE
  }
  if (first === '-h' || first === '--help' || first === 'help') {
    const topic = first === 'help' ? rest[0] : undefined
    if (topic !== undefined && COMMANDS[topic]) io.stdout.write(COMMANDS[topic].usage)
    else io.stdout.write(USAGE)
    return EXIT_OK
  }
  if (first === '-v' || first === '--version') {
    io.stdout.write(`kollect ${version()}\n`)
    return EXIT_OK
  }
  const command = Object.hasOwn(COMMANDS, first) ? COMMANDS[first] : undefined
  if (!command) {
    io.stderr.write(`kollect: ${first.startsWith('-') ? `unknown option ${first}` : `unknown command ${JSON.stringify(first)}`}\n\n${USAGE}`)
    return EXIT_USAGE
  }
  try {
    return await command.run(rest, io)
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`kollect ${first}: ${err.message}\n${err.showUsage ? `\n${command.usage}` : `Run 'kollect ${first} --help' for usage.\n`}`)
      return EXIT_USAGE
    }
    if (err instanceof RunError) {
      io.stderr.write(`kollect ${first}: ${err.message}\n`)
      return 1
    }
    throw err
  }
}

// A reader that closes the pipe early (`kollect preview … | head`) is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw err
})

// preview and validate compile CEL here, so this process needs the linear-time RegExp engine.
enableLinearRegExps()
process.exitCode = await run(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  stderrIsTTY: process.stderr.isTTY === true,
})
