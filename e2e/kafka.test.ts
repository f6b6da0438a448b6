// The Kafka sink through the real processes: the hooks server and the exporter sidecar as in a
// pod, against an Apache Kafka broker (KRaft) started here, with SASL SCRAM credentials from the
// sink's Secret. Requests are shaped as Metacontroller sends them.
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import type { KubeObject } from '../api/types.js'
import { kafkaSettings } from '../sinks/kafka/config.js'
import { HEADER_EVENT, partitionFor } from '../sinks/kafka/encode.js'
import { KafkaService } from '../sinks/kafka/service.js'
import { exampleDeployments } from '../test/support/gen-examples.js'
import { get, post } from '../test/support/hooks-server.js'
import { startKafka, type KafkaBroker } from '../test/support/kafka.js'
import { ROOT, TYPES, controllerFor, customizeRequest, goJson, loadExampleCr, relatedMap, syncRequest, targetSyncRequest } from '../test/support/metacontroller.js'
import { freePort } from '../test/support/ports.js'
import { pollUntil, startServerProcess, waitForExit, type ServerProcess } from '../test/support/process.js'

const TOKEN = 'e2e-kafka-token-0123456789'
const auth = { Authorization: `Bearer ${TOKEN}` }
const TOPIC = 'inventory-events'

let root: string
let kafka: KafkaBroker
let hooksUrl: string
let hooks: ServerProcess
let exporter: ServerProcess
let env: NodeJS.ProcessEnv
let sink: KubeObject

const inventory = (): KubeObject => {
  const inv = loadExampleCr('inventory.yaml')
  inv['spec'] = { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name: 'kafka-events' }], debounce: '300ms', maxWait: '5s' }
  return inv
}
const inventorySync = (inv: KubeObject = inventory(), finalizing = false) =>
  goJson(syncRequest(controllerFor('kollect-inventories'), inv, relatedMap([TYPES.scope, TYPES.target, TYPES.sink], { [TYPES.target]: [loadExampleCr('target-deployments.yaml')], [TYPES.sink]: [sink] }), finalizing))

async function hook(route: string, body: string): Promise<Record<string, unknown>> {
  const res = await post(hooksUrl + route, body, auth)
  assert.equal(res.status, 200, `${route}: ${res.status} ${res.text}`)
  return res.json() as Record<string, unknown>
}

interface InventoryStatus { itemCount: number; checksum: string; conditions: { type: string; status: string; reason: string }[]; sinks: { name: string; state: string; message: string }[] }

async function waitSynced(checksum?: string): Promise<InventoryStatus> {
  let last: InventoryStatus | undefined
  await pollUntil('inventory Synced', async () => {
    last = (await hook('/hooks/inventories/sync', inventorySync()))['status'] as InventoryStatus
    const synced = last.conditions.find((c) => c.type === 'Synced')?.status === 'True'
    return synced && (checksum === undefined || last.checksum !== checksum)
  }, { timeoutMs: 60_000, proc: exporter }).catch((err: Error) => {
    throw new Error(`${err.message}\nlast status: ${JSON.stringify(last)}\n${exporter.logTail()}`)
  })
  return last as InventoryStatus
}

/** The kollect-event header of every committed record of the inventory, as a read_committed consumer sees them. */
async function published(): Promise<string[]> {
  const reader = new KafkaService(kafkaSettings({ id: 'e2e/reader', spec: { type: 'kafka', kafka: { brokers: kafka.bootstrap, topic: TOPIC } }, credentials: {}, dataDir: root }))
  try {
    const { partitions } = await reader.topics()
    const partition = partitionFor({ cluster: 'e2e', inventory: { namespace: 'team-a', name: 'prod-inventory' } }, partitions)
    await reader.settled(TOPIC, partition)
    const records = await reader.readCommitted(TOPIC, partition)
    return records.map((r) => r.headers[HEADER_EVENT] ?? '?')
  } finally {
    await reader.close()
  }
}

function startExporter(): ServerProcess {
  return startServerProcess(process.execPath, [path.join(ROOT, 'dist/server/main-exporter.js')], path.join(root, 'exporter.log'), env)
}

const ready = (proc: ServerProcess) => pollUntil('hooks ready (exporter reachable)', async () => (await get(hooksUrl + '/readyz').catch(() => ({ status: 0 }))).status === 200, { timeoutMs: 20_000, proc })

before(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'kollect-e2e-kafka-'))
  kafka = await startKafka()
  sink = {
    apiVersion: 'kollect.dev/v1alpha1',
    kind: 'KollectSink',
    metadata: { name: 'kafka-events', namespace: 'team-a', uid: 'sink-kafka', generation: 1 },
    spec: { type: 'kafka', cluster: 'e2e', deletionPolicy: 'Delete', secretRef: { name: 'kafka-creds' }, kafka: { brokers: kafka.saslBootstrap, topic: TOPIC, partitions: 2, saslMechanism: 'SCRAM-SHA-256' } },
  }
  const exporterPort = await freePort()
  const hooksPort = await freePort()
  hooksUrl = `http://127.0.0.1:${hooksPort}`
  env = {
    PATH: process.env['PATH'],
    HOME: process.env['HOME'],
    PORT: String(hooksPort),
    HOST: '127.0.0.1',
    KOLLECT_EXPORTER_PORT: String(exporterPort),
    KOLLECT_EXPORTER_URL: `http://127.0.0.1:${exporterPort}`,
    KOLLECT_HOOK_TOKEN: TOKEN,
    KOLLECT_DATA_DIR: path.join(root, 'data'),
    KOLLECT_ALLOW_PRIVATE_SINKS: 'true',
    KOLLECT_SECRET_TEAM_A__KAFKA_CREDS__USERNAME: kafka.user,
    KOLLECT_SECRET_TEAM_A__KAFKA_CREDS__PASSWORD: kafka.password,
    KOLLECT_LOG_LEVEL: 'info',
  }
  exporter = startExporter()
  hooks = startServerProcess(process.execPath, [path.join(ROOT, 'dist/server/main-hooks.js')], path.join(root, 'hooks.log'), env)
  await ready(hooks)
})

after(async () => {
  for (const p of [hooks, exporter]) if (p) { p.signalGroup('SIGTERM'); await waitForExit(p, 5000) }
  await kafka?.destroy()
  if (root) rmSync(root, { recursive: true, force: true })
})

test('a kafka sink: Ready and Reachable; the first export and one change reach the topic exactly once; a restart publishes nothing new', async () => {
  const st = (await hook('/hooks/sinks/sync', goJson(syncRequest(controllerFor('kollect-sinks'), sink, {}))))['status'] as InventoryStatus
  assert.deepEqual(st.conditions.map((c) => [c.type, c.status, c.reason]), [['Ready', 'True', 'Valid'], ['Reachable', 'True', 'Reachable']], JSON.stringify(st))
  await hook('/hooks/targets/sync', goJson(targetSyncRequest(exampleDeployments())))
  await hook('/hooks/inventories/customize', goJson(customizeRequest(controllerFor('kollect-inventories'), inventory())))
  const first = await waitSynced()
  assert.equal(first.itemCount, 3)
  assert.deepEqual(await published(), ['added', 'added', 'added', 'snapshot'])

  await hook('/hooks/targets/sync', goJson(targetSyncRequest(exampleDeployments(true))))
  await waitSynced(first.checksum)
  assert.deepEqual((await published()).slice(4), ['changed', 'snapshot'])

  // A restarted exporter reads the state topic: the same objects publish nothing.
  exporter.signalGroup('SIGTERM')
  await waitForExit(exporter, 10_000)
  exporter = startExporter()
  await ready(exporter)
  await hook('/hooks/targets/sync', goJson(targetSyncRequest(exampleDeployments(true))))
  const synced = await waitSynced()
  assert.equal(synced.sinks[0]?.state, 'Synced')
  assert.equal((await published()).length, 6, 'no duplicate after the restart')
})

test('deleting the inventory with deletionPolicy Delete publishes a tombstone per item and for the marker before finalize says done', async () => {
  const inv = inventory()
  inv.metadata = { ...inv.metadata, generation: 2, deletionTimestamp: '2026-11-02T10:00:00Z', finalizers: ['metacontroller.io/compositecontroller-kollect-inventories'] }
  await pollUntil('finalized', async () => (await hook('/hooks/inventories/finalize', inventorySync(inv, true)))['finalized'] === true, { timeoutMs: 30_000, proc: exporter })
  assert.deepEqual((await published()).slice(6), ['removed', 'removed', 'removed', 'tombstone'])
})

test('the logs carry no Kafka credentials', () => {
  for (const file of ['hooks.log', 'exporter.log']) {
    const text = readFileSync(path.join(root, file), 'utf8')
    assert.ok(!text.includes(kafka.password), `${file} contains the Kafka password`)
    assert.ok(!text.includes(TOKEN), `${file} contains the hook token`)
  }
})
