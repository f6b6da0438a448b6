// The command line of `kollect preview`: its usage text and its options.
import { parseArgs } from 'node:util'
import { OUTPUTS, type Output } from './format.js'
import { UsageError } from './io.js'

export const PREVIEW_USAGE = `Usage: kollect preview --profile FILE --target FILE --objects FILE|-  [options]
       kollect preview --profile FILE --target FILE --kubeconfig FILE [--context NAME]  [options]

Runs a KollectTarget's selection and its KollectProfile's extraction over objects, exactly as
the target sync hook does in the cluster, and prints the items it would export. Nothing is
written anywhere.

Options:
  --profile FILE        YAML or JSON holding the KollectProfile (several documents allowed;
                        the one the target's profileRef names is used)
  --target FILE         YAML or JSON holding the KollectTarget (may be the profile's file)
  --target-name NAME    which KollectTarget, when the file holds several
  --objects FILE|-      the objects, as \`kubectl get -o json\` or \`-o yaml\` prints them (a List,
                        or single objects); - reads stdin
  --kubeconfig FILE     read the objects from the cluster instead, in every namespace the
                        target names (default: its own)
  --context NAME        the kubeconfig context to use (default: the current one)
  --scope FILE          KollectScopes of the target's namespace. Without it the target sees
                        only its own namespace, as in a namespace with no KollectScope
  -o, --output FORMAT   table (default), json or yaml; the summary goes to stderr
  --progress            a progress line on stderr every 1,000 objects (default: when stderr
                        is a terminal)
  -h, --help            show this help

Exit status: 0 every selected object extracted; 1 the profile or target is invalid, a file is
not valid YAML, or an object failed extraction; 2 usage error.
`

export interface PreviewOptions {
  profile: string
  target: string
  targetName?: string
  objects?: string
  kubeconfig?: string
  context?: string
  scope?: string
  output: Output
  progress?: boolean
}

export function parsePreviewArgs(argv: string[]): PreviewOptions | 'help' {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: argv,
      options: {
        profile: { type: 'string' },
        target: { type: 'string' },
        'target-name': { type: 'string' },
        objects: { type: 'string' },
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        scope: { type: 'string' },
        output: { type: 'string', short: 'o', default: 'table' },
        progress: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: false,
      strict: true,
    }).values
  } catch (err) {
    throw new UsageError((err as Error).message, true)
  }
  if (values.help) return 'help'
  const str = (k: string) => (typeof values[k] === 'string' ? (values[k] as string) : undefined)
  const profile = str('profile')
  const target = str('target')
  if (!profile) throw new UsageError('--profile FILE is required', true)
  if (!target) throw new UsageError('--target FILE is required', true)
  const output = str('output') as Output
  if (!OUTPUTS.includes(output)) throw new UsageError(`--output must be one of ${OUTPUTS.join(', ')}, got ${JSON.stringify(output)}`, true)
  const objects = str('objects')
  const live = str('kubeconfig') !== undefined || str('context') !== undefined
  if (objects !== undefined && live) throw new UsageError('give --objects, or --kubeconfig/--context to read a cluster, not both', true)
  if (objects === undefined && !live) throw new UsageError('give --objects FILE (- for stdin), or --kubeconfig/--context to read a cluster', true)
  return {
    profile,
    target,
    targetName: str('target-name'),
    objects,
    kubeconfig: str('kubeconfig'),
    context: str('context'),
    scope: str('scope'),
    output,
    progress: values.progress === true ? true : undefined,
  }
}
