import { existsSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { isNamespaceName, isObjectName } from '../api/names.js'
import { DEFAULT_GIT_PATH } from '../sinks/git/config.js'
import { readStoredInventory } from '../sinks/git/read.js'
import { formatItems, OUTPUTS, type Output } from './format.js'
import { EXIT_OK, RunError, UsageError, type Io } from './io.js'

export const INVENTORY_USAGE = `Usage: kollect inventory [options] NAMESPACE/NAME

Prints the items of one inventory as a git sink stored them, at a revision of its repository:
the embedded default's local repository or a clone of a git sink's remote. Every layout
(document, perResource, sharded) reads back as the same items. Only git objects are read.

Options:
      --repo DIR        the repository (default: the current directory)
      --rev REV         the commit, branch or tag to read (default: HEAD)
      --cluster NAME    the sink's cluster label (required)
      --path TEMPLATE   the sink's path template (default: ${DEFAULT_GIT_PATH})
  -o, --output FORMAT   table (default), json or yaml; the summary goes to stderr
  -h, --help            show this help

Exit status: 0 the inventory was read; 1 the repository, revision or inventory is not there;
2 usage error.
`

export async function runInventory(argv: string[], io: Io): Promise<number> {
  let parsed
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        repo: { type: 'string', default: '.' },
        rev: { type: 'string', default: 'HEAD' },
        cluster: { type: 'string' },
        path: { type: 'string', default: DEFAULT_GIT_PATH },
        output: { type: 'string', short: 'o', default: 'table' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    })
  } catch (err) {
    throw new UsageError((err as Error).message, true)
  }
  const { values, positionals } = parsed
  if (values.help) {
    io.stdout.write(INVENTORY_USAGE)
    return EXIT_OK
  }
  const output = values.output as Output
  if (!OUTPUTS.includes(output)) throw new UsageError(`--output must be one of ${OUTPUTS.join(', ')}, got ${JSON.stringify(output)}`, true)
  if (positionals.length !== 1) throw new UsageError('give one inventory as NAMESPACE/NAME', true)
  const [namespace = '', name = '', ...rest] = (positionals[0] ?? '').split('/')
  if (rest.length > 0 || !isNamespaceName(namespace) || !isObjectName(name)) throw new UsageError(`${JSON.stringify(positionals[0])} is not NAMESPACE/NAME`)
  if (!values.cluster) throw new UsageError('--cluster is required: the sink\'s cluster label names the inventory\'s path', true)
  // A revision is data: one that git would read as an option is refused, not passed on.
  if (values.rev.startsWith('-')) throw new UsageError(`--rev ${JSON.stringify(values.rev)} is not a revision`)

  if (!existsSync(values.repo)) throw new RunError(`no such directory: ${values.repo}`)
  let stored
  try {
    stored = await readStoredInventory(values.repo, values.rev, values.path, { cluster: values.cluster, namespace, name })
  } catch (err) {
    throw new RunError(`cannot read ${values.rev} in ${values.repo}: ${firstLine(err)}`)
  }
  if (!stored) throw new RunError(`${namespace}/${name} (cluster ${values.cluster}) is not in ${values.repo} at ${values.rev}`)
  const attributes = [...new Set(stored.items.flatMap((item) => Object.keys(item.attributes)))].sort()
  io.stdout.write(formatItems(stored.items, attributes, output))
  io.stderr.write(`${stored.items.length} items, ${stored.layout} layout${stored.checksum ? `, checksum ${stored.checksum}` : ''}, at ${values.rev}\n`)
  return EXIT_OK
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n').find((line) => line.trim() !== '')?.trim() ?? 'unknown error'
}
