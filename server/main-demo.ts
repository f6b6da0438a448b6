// npm run demo: Kollect's main job end to end on the embedded default, no cluster, no server.
// It starts hooks + exporter in this process, sends the example hook requests exactly as
// Metacontroller would, waits for the debounced export and prints the resulting Git history.
import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { InventoryStatus, ProfileStatus, SinkStatus, TargetStatus } from '../api/types.js'
import { createPluralResolver } from './cluster/discovery.js'
import { createExporter } from './exporter-wiring.js'
import { authHeader } from './guards/auth.js'
import { buildHooksApp } from './http/hooks-app.js'
import { configure } from './process/lifecycle.js'
import { createMetrics } from './process/metrics.js'
import { enableLinearRegExps } from './process/regexp-engine.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
// Its own data directory, emptied on every run: the history it prints is always the same two
// commits, and npm start's (./.data/dev) never starts from the demo's state. KOLLECT_DATA_DIR is
// ignored on purpose, so the demo never empties a directory someone else set.
const dataDir = path.resolve('.data', 'demo')
rmSync(dataDir, { recursive: true, force: true })
// Nothing listens (requests go through app.inject); with no token set, the hooks run open, as npm start does.
const env = { ...process.env, KOLLECT_DATA_DIR: dataDir, KOLLECT_LOG_LEVEL: process.env['KOLLECT_LOG_LEVEL'] ?? 'warn' }
const { config, logger } = configure('kollect-demo', env, { host: '127.0.0.1', port: 0, allowPrivateSinks: true, loopbackAuth: 'none' })
enableLinearRegExps()
const metrics = createMetrics()
const exporter = createExporter(config, logger, metrics)
const app = await buildHooksApp({ config, logger, metrics, exporter, resolvePlural: createPluralResolver(null) })

/** Whichever kind's status a hook answered with; the summary prints the counts that kind has. */
type AnyStatus = Partial<TargetStatus & InventoryStatus & ProfileStatus & SinkStatus>
const COUNTS = ['matchedCount', 'extractedCount', 'failedCount', 'itemCount', 'attributeCount'] as const

async function send(route: string, example: string): Promise<void> {
  const res = await app.inject({
    method: 'POST', url: route, headers: { 'content-type': 'application/json', ...authHeader(config.hookAuth) },
    payload: readFileSync(path.join(root, 'examples', 'requests', `${example}.json`)),
  })
  const body = res.json() as { status?: AnyStatus }
  console.log(`POST ${route} (${example}) → ${res.statusCode} ${body.status ? summary(body.status) : JSON.stringify(body).slice(0, 160)}`)
}

function summary(status: AnyStatus): string {
  const pick = COUNTS.filter((k) => k in status).map((k) => `${k}=${status[k]}`)
  return [...pick, ...(status.conditions ?? []).map((c) => `${c.type}=${c.status}(${c.reason})`)].join(' ')
}

await send('/hooks/profiles/sync', 'profile-sync')
await send('/hooks/sinks/sync', 'sink-sync')
await send('/hooks/targets/customize', 'target-customize')
await send('/hooks/targets/sync', 'target-sync')
// A real install holds each change for the inventory's debounce; the demo says so rather than sit silent.
const { debounce } = (JSON.parse(readFileSync(path.join(root, 'examples', 'requests', 'inventory-sync.json'), 'utf8')) as {
  parent: { spec: { debounce: string } }
}).parent.spec
async function exportNow(): Promise<void> {
  console.log(`… exporting now: a cluster would wait ${debounce} (the inventory's debounce) first; the demo skips the wait`)
  exporter.flush()
  await exporter.idle()
}

await send('/hooks/inventories/sync', 'inventory-sync')
await exportNow()
await send('/hooks/targets/sync', 'target-sync-changed')
await exportNow()
await send('/hooks/inventories/sync', 'inventory-sync')

const repo = path.join(config.dataDir, 'sinks', 'team-a', 'git-demo')
console.log(`\nGit history of the inventory (${repo}):\n`)
console.log(execFileSync('git', ['-C', repo, 'log', '--stat', '-p', '-2', '--format=commit %h%n%B'], { encoding: 'utf8' }))
await app.close()
await exporter.close()
