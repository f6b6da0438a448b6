// The Kafka sink through the real processes: the hooks server and the exporter sidecar as in a
// pod, against an Apache Kafka broker (KRaft) started here, with SASL SCRAM credentials from the
// sink's Secret. Requests are shaped as Metacontroller sends them.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import type { KubeObject } from '../api/types.js'
import { kafkaSettings } from '../sinks/kafka/config.js'
import { HEADER_EVENT, partitionFor } from '../sinks/kafka/encode.js'
import { KafkaService } from '../sinks/kafka/service.js'
import { exampleDeployments } from '../test/support/gen-examples.js'
import { startKafka, type KafkaBroker } from '../test/support/kafka.js'
import { startPod, type Pod } from '../test/support/kollect-process.js'
import { TYPES, controllerFor, customizeRequest, goJson, loadExampleCr, relatedMap, syncRequest, targetSyncRequest } from '../test/support/metacontroller.js'
import { pollUntil } from '../test/support/process.js'

const TOKEN = 'e2e-kafka-token-0123456789'
const TOPIC = 'inventory-events'

let root: string
let kafka: KafkaBroker
let pod: Pod
let sink: KubeObject

const inventory = (): KubeObject => {
  const inv = loadExampleCr('inventory.yaml')
  inv['spec'] = { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name: 'kafka-events' }], debounce: '300ms', maxWait: '5s' }
  return inv
}
const inventorySync = (inv: KubeObject = inventory(), finalizing = false) =>
  goJson(syncRequest(controllerFor('kollect-inventories'), inv,
    relatedMap([TYPES.scope, TYPES.target, TYPES.sink], { [TYPES.target]: [loadExampleCr('target-deployments.yaml')], [TYPES.sink]: [sink] }), finalizing))
const waitSynced = (changedFrom?: string) => pod.waitSynced(inventorySync(), { changedFrom, timeoutMs: 60_000 })

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

before(async () => {
  root = mkdtempSync(path.join(os.tmpdir(), 'kollect-e2e-kafka-'))
  kafka = await startKafka()
  sink = {
    apiVersion: 'kollect.dev/v1alpha1',
    kind: 'KollectSink',
    metadata: { name: 'kafka-events', namespace: 'team-a', uid: 'sink-kafka', generation: 1 },
    spec: {
      type: 'kafka', cluster: 'e2e', deletionPolicy: 'Delete', secretRef: { name: 'kafka-creds' },
      kafka: { brokers: kafka.saslBootstrap, topic: TOPIC, partitions: 2, saslMechanism: 'SCRAM-SHA-256' },
    },
  }
  pod = await startPod(TOKEN, {
    KOLLECT_SECRET_TEAM_A__KAFKA_CREDS__USERNAME: kafka.user,
    KOLLECT_SECRET_TEAM_A__KAFKA_CREDS__PASSWORD: kafka.password,
  })
})

after(async () => {
  await pod?.close()
  await kafka?.destroy()
  if (root) rmSync(root, { recursive: true, force: true })
})

test('a kafka sink: Ready and Reachable; the first export and one change reach the topic exactly once; a restart publishes nothing new', async () => {
  const st = (await pod.hook('/hooks/sinks/sync', goJson(syncRequest(controllerFor('kollect-sinks'), sink, {})))).status ?? {}
  assert.deepEqual(st.conditions?.map((c) => [c.type, c.status, c.reason]), [['Ready', 'True', 'Valid'], ['Reachable', 'True', 'Reachable']], JSON.stringify(st))
  await pod.hook('/hooks/targets/sync', goJson(targetSyncRequest(exampleDeployments())))
  await pod.hook('/hooks/inventories/customize', goJson(customizeRequest(controllerFor('kollect-inventories'), inventory())))
  const first = await waitSynced()
  assert.equal(first.itemCount, 3)
  assert.deepEqual(await published(), ['added', 'added', 'added', 'snapshot'])

  await pod.hook('/hooks/targets/sync', goJson(targetSyncRequest(exampleDeployments(true))))
  await waitSynced(first.checksum)
  assert.deepEqual((await published()).slice(4), ['changed', 'snapshot'])

  // A restarted exporter reads the state topic: the same objects publish nothing.
  await pod.restartExporter()
  await pod.hook('/hooks/targets/sync', goJson(targetSyncRequest(exampleDeployments(true))))
  const synced = await waitSynced()
  assert.equal(synced.sinks?.[0]?.state, 'Synced')
  assert.equal((await published()).length, 6, 'no duplicate after the restart')
})

test('deleting the inventory with deletionPolicy Delete publishes a tombstone per item and for the marker before finalize says done', async () => {
  const inv = inventory()
  inv.metadata = { ...inv.metadata, generation: 2, deletionTimestamp: '2026-11-02T10:00:00Z', finalizers: ['metacontroller.io/compositecontroller-kollect-inventories'] }
  await pollUntil('finalized', async () => (await pod.hook('/hooks/inventories/finalize', inventorySync(inv, true))).finalized === true, { timeoutMs: 30_000, proc: pod.exporter })
  assert.deepEqual((await published()).slice(6), ['removed', 'removed', 'removed', 'tombstone'])
})

test('the logs carry no Kafka credentials', () => {
  for (const file of ['hooks', 'exporter'] as const) {
    const text = pod.log(file)
    assert.ok(!text.includes(kafka.password), `${file} contains the Kafka password`)
    assert.ok(!text.includes(TOKEN), `${file} contains the hook token`)
  }
})
