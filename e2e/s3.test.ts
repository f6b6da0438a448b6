// The s3 sink through the real processes: the hooks server and the exporter sidecar as two
// processes (loopback, bearer token), versitygw started here, requests shaped as Metacontroller
// sends them. One sink with the right keys (perResource, deletionPolicy Delete) and one with a
// wrong secret key, each behind its own inventory.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3'
import type { KubeObject } from '../api/types.js'
import { exampleDeployments } from '../test/support/gen-examples.js'
import { startPod, type Pod } from '../test/support/kollect-process.js'
import { TYPES, controllerFor, customizeRequest, goJson, loadExampleCr, relatedMap, syncRequest, targetSyncRequest } from '../test/support/metacontroller.js'
import { pollUntil } from '../test/support/process.js'
import { countingProxy, startS3, type CountingProxy, type S3Server } from '../test/support/s3.js'

const TOKEN = 'e2e-s3-token-0123456789'
const WRONG_SECRET = 'wrong-secret-key-e2e-0123456789'
const PREFIX = 'inventory/e2e/team-a'

let s3: S3Server
let proxy: CountingProxy
let pod: Pod

function s3Sink(name: string, secret: string): KubeObject {
  return {
    apiVersion: 'kollect.dev/v1alpha1',
    kind: 'KollectSink',
    metadata: { name, namespace: 'team-a', uid: `sink-${name}`, generation: 1 },
    spec: { type: 's3', cluster: 'e2e', deletionPolicy: 'Delete', secretRef: { name: secret }, s3: { bucket: s3.bucket, endpoint: proxy.endpoint, pathStyle: true, layout: 'perResource' } },
  }
}

const sinks = (): KubeObject[] => [s3Sink('objects', 's3-keys'), s3Sink('denied', 'wrong-keys')]

function inventory(name: string, sink: string, deleting = false): KubeObject {
  const inv = loadExampleCr('inventory.yaml')
  inv.metadata = { ...inv.metadata, name, uid: `inv-${name}` }
  if (deleting) inv.metadata = { ...inv.metadata, generation: 2, deletionTimestamp: '2026-11-02T10:00:00Z', finalizers: ['metacontroller.io/compositecontroller-kollect-inventories'] }
  inv['spec'] = { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name: sink }], debounce: '300ms', maxWait: '5s' }
  return inv
}

const inventoryRequest = (inv: KubeObject, finalizing = false) =>
  goJson(syncRequest(controllerFor('kollect-inventories'), inv,
    relatedMap([TYPES.scope, TYPES.target, TYPES.sink], { [TYPES.target]: [loadExampleCr('target-deployments.yaml')], [TYPES.sink]: sinks() }), finalizing))

async function keys(prefix: string): Promise<string[]> {
  const page = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }))
  return (page.Contents ?? []).map((o) => o.Key as string).sort()
}

before(async () => {
  s3 = await startS3()
  proxy = await countingProxy(s3)
  const secrets = {
    KOLLECT_SECRET_TEAM_A__S3_KEYS__ACCESSKEYID: s3.credentials.accessKeyId as string,
    KOLLECT_SECRET_TEAM_A__S3_KEYS__SECRETACCESSKEY: s3.credentials.secretAccessKey as string,
    KOLLECT_SECRET_TEAM_A__WRONG_KEYS__ACCESSKEYID: s3.credentials.accessKeyId as string,
    KOLLECT_SECRET_TEAM_A__WRONG_KEYS__SECRETACCESSKEY: WRONG_SECRET,
  }
  pod = await startPod(TOKEN, secrets)
})

after(async () => {
  await pod?.close()
  await proxy?.close()
  await s3?.destroy()
})

test('the sink hook: the right keys are Reachable; a wrong secret key is Unreachable with the server\'s reason and no key', async () => {
  for (const sink of sinks()) {
    const st = (await pod.hook('/hooks/sinks/sync', goJson(syncRequest(controllerFor('kollect-sinks'), sink, {})))).status ?? {}
    const ready = st.conditions?.map((c) => [c.type, c.status, c.reason])
    if (sink.metadata?.name === 'objects') assert.deepEqual(ready, [['Ready', 'True', 'Valid'], ['Reachable', 'True', 'Reachable']], JSON.stringify(st))
    else {
      assert.deepEqual(ready, [['Ready', 'True', 'Valid'], ['Reachable', 'False', 'Unreachable']], JSON.stringify(st))
      assert.match(st.conditions?.[1]?.message ?? '', /SignatureDoesNotMatch \(HTTP 403\).*check the keys in the sink secret/)
      assert.ok(!JSON.stringify(st).includes(WRONG_SECRET))
    }
  }
})

test('target and inventory: one object per item and the pointer; one change writes exactly one object', async () => {
  await pod.hook('/hooks/profiles/sync', goJson(syncRequest(controllerFor('kollect-profiles'), loadExampleCr('profile-deployments.yaml'), {})))
  await pod.hook('/hooks/targets/sync', goJson(targetSyncRequest(exampleDeployments())))
  const inv = inventory('prod-inventory', 'objects')
  await pod.hook('/hooks/inventories/customize', goJson(customizeRequest(controllerFor('kollect-inventories'), inv)))
  const first = await pod.waitSynced(inventoryRequest(inv))
  assert.deepEqual(first.sinks?.map((s) => [s.name, s.state]), [['objects', 'Synced']])
  const base = `${PREFIX}/prod-inventory`
  assert.equal((await keys(`${base}/items/`)).length, 3)
  const pointer = JSON.parse(await (await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: `${base}/latest.json` }))).Body!.transformToString()) as { checksum: string }
  assert.equal(pointer.checksum, first.checksum, 'the same checksum in the status and the bucket')

  const mark = proxy.requests.length
  await pod.hook('/hooks/targets/sync', goJson(targetSyncRequest(exampleDeployments(true))))
  const second = await pod.waitSynced(inventoryRequest(inv), { changedFrom: first.checksum })
  assert.equal(proxy.puts(`${base}/items/`, mark).length, 1, 'exactly one item object written')
  assert.deepEqual(proxy.puts(`${base}/latest.json`, mark), [`${base}/latest.json`])
  assert.equal((await keys(`${base}/items/`)).length, 3)
  assert.notEqual(second.checksum, first.checksum)
})

test('an inventory on the sink with the wrong key is Failing with a clear reason, and the key is in no status or log', async () => {
  const inv = inventory('denied-inventory', 'denied')
  await pod.hook('/hooks/inventories/customize', goJson(customizeRequest(controllerFor('kollect-inventories'), inv)))
  const failing = await pod.inventoryUntil(inventoryRequest(inv), (s) => s.sinks?.some((x) => x.name === 'denied' && x.state === 'Failing') === true, { what: 'inventory denied-inventory' })
  const message = failing.sinks?.find((x) => x.name === 'denied')?.message ?? ''
  assert.match(message, /s3 sink team-a\/denied: write failed: reading the latest pointer: GET .*SignatureDoesNotMatch \(HTTP 403\).*check the keys in the sink secret/, message)
  assert.match(message, /permanent/, message)
  assert.ok(!JSON.stringify(failing).includes(WRONG_SECRET))
  assert.deepEqual(await keys(`${PREFIX}/denied-inventory/`), [], 'nothing written')
})

test('deleting the inventory with deletionPolicy Delete removes its objects before finalize says done', async () => {
  const inv = inventory('prod-inventory', 'objects', true)
  await pollUntil('finalized', async () => (await pod.hook('/hooks/inventories/finalize', inventoryRequest(inv, true))).finalized === true, { timeoutMs: 30_000, proc: pod.exporter })
  assert.deepEqual(await keys(`${PREFIX}/prod-inventory/`), [])
})

test('the logs of both processes carry no credentials', () => {
  for (const name of ['hooks', 'exporter'] as const) {
    const text = pod.log(name)
    assert.ok(text.length > 0, `${name} logged nothing`)
    for (const secret of [WRONG_SECRET, s3.credentials.secretAccessKey as string, TOKEN]) assert.ok(!text.includes(secret), `${name} log contains a credential`)
  }
  assert.match(pod.log('exporter'), /SignatureDoesNotMatch/, 'the failure itself is logged, scrubbed')
})
