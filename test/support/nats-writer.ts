// A NATS sink in a process of its own, so a test can kill -9 it in the middle of an export.
// Usage: node nats-writer.js <url> <stream> <subject> <namespace/name> <itemCount> <replicas>
// It writes one snapshot: makeItems(itemCount), each with `replicas` replicas.
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { createNatsSink } from '../../sinks/nats/index.js'
import { bumpReplicas, makeItems, snapshotOf } from './items.js'

/** The snapshot nats-writer writes for these arguments; the test builds the same one to compare. */
export function writerSnapshot(namespace: string, name: string, itemCount: number, replicas: number): ReturnType<typeof snapshotOf> {
  return snapshotOf({ namespace, name }, makeItems(itemCount).map((item) => bumpReplicas(item, replicas)))
}

async function main(args: string[]): Promise<void> {
  const [url, stream, subject, inventory, itemCount, replicas] = args
  const [namespace, name] = (inventory ?? '').split('/')
  if (!url || !stream || !subject || !namespace || !name || !itemCount || !replicas) throw new Error(`usage: nats-writer <url> <stream> <subject> <ns/name> <n> <replicas>`)
  const sink = createNatsSink({ id: 'platform/events', spec: { type: 'nats', nats: { url, stream, subject } }, credentials: {}, dataDir: '/nonexistent' })
  try {
    const result = await sink.write(writerSnapshot(namespace, name, Number(itemCount), Number(replicas)))
    console.log(JSON.stringify(result))
  } finally {
    await sink.close()
  }
}

/** The compiled script, for spawning. */
export const NATS_WRITER = fileURLToPath(import.meta.url)

// `node --test dist/test` also loads this file, with no arguments: only a spawn with arguments writes.
if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === NATS_WRITER && process.argv.length > 2) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err)
    process.exit(1)
  })
}
