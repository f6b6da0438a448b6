import { UsageError, type Io } from './io.js'

export const HUB_USAGE = `Usage: kollect hub [--config <file>]

Run in hub mode: consume the spokes' NATS JetStream events and export each cluster's inventory
to the hub's sinks (docs/operations.md#hub-mode). Runs until SIGTERM.

Options:
  --config <file>   the hub config file (default: KOLLECT_HUB_CONFIG, else /etc/kollect/hub.yaml)
`

export async function runHub(argv: string[], _io: Io): Promise<number> {
  const env = { ...process.env }
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--config' && argv[i + 1] !== undefined) env.KOLLECT_HUB_CONFIG = argv[++i]
    else throw new UsageError(`unknown argument ${JSON.stringify(argv[i])}`, true)
  }
  // Loaded here only: the other commands never open a listener.
  const { runHub: serve } = await import('../server/main-hub.js')
  await serve(env)
  return new Promise<number>(() => undefined)
}
