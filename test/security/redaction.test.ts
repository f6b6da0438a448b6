import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { inspect } from 'node:util'
import type { KubeObject } from '../../api/types.js'
import { startHooksServer, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { TYPES, controllerFor, deployment, relatedMap, syncRequest, targetSyncRequest } from '../support/metacontroller.js'
import { ROUTES, exportThroughFileSink, profileWith, scope, send, statusOf, targetWith, walk } from './support.js'

// What redaction covers, through a real server and a real file sink: Secret data never reaches
// an expression, and neither does the copy of it that kubectl keeps in the
// kubectl.kubernetes.io/last-applied-configuration annotation. Same for sensitive keys and
// env-style name/value pairs inside that annotation.

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration'
const VALUES = ['hunter2-LAST-APPLIED', Buffer.from('hunter2-LAST-APPLIED').toString('base64'), 's3cr3t-STRINGDATA', 'env-PASSWORD-value', 'nested-TOKEN-value', 'profile-KEY-value']
const SECRETS_SCOPE = scope('secrets', { allowedResources: [{ group: '', kind: 'Secret' }] })

/** What `kubectl apply` leaves on a Secret: the applied manifest, data included, as JSON text. */
function appliedSecret(name: string): KubeObject {
  const applied = { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata: { name, namespace: 'team-a', annotations: {} }, data: { password: VALUES[1] }, stringData: { extra: VALUES[2] } }
  return {
    apiVersion: 'v1', kind: 'Secret', type: 'Opaque',
    metadata: { name, namespace: 'team-a', uid: `uid-${name}`, labels: { app: 'db' }, annotations: { [LAST_APPLIED]: JSON.stringify(applied) + '\n', owner: 'team-a' } },
    data: { password: VALUES[1] },
  }
}

/** A Deployment applied with kubectl: env name/value pairs and a sensitive key in the annotation. */
function appliedDeployment(annotation?: string): KubeObject {
  const d = deployment(1)
  const applied = {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: d.metadata?.name, namespace: 'team-a' },
    spec: { template: { spec: { containers: [{ name: 'app', image: 'registry.example/app:1.2.3', env: [{ name: 'DB_PASSWORD', value: VALUES[3] }, { name: 'LOG_LEVEL', value: 'debug' }] }] } } },
    settings: { apiToken: VALUES[4], internalNote: VALUES[5], replicasHint: 3 },
  }
  d.metadata = { ...d.metadata, annotations: { [LAST_APPLIED]: annotation ?? JSON.stringify(applied) } }
  return d
}

const ATTRIBUTES = [
  { name: 'whole', cel: 'object' },
  { name: 'lastApplied', cel: `object.metadata.annotations['${LAST_APPLIED}']` },
  { name: 'annotations', jsonPath: '$.metadata.annotations' },
  { name: 'everything', jsonPath: '$..*' },
]

let server: HooksServer
before(async () => {
  server = await startHooksServer()
})
after(async () => {
  await server?.close()
})

/** Everything that could hold a leaked value: the answer, the exporter's memory, every file written. */
function everything(res: RawResponse): string {
  return [res.text, inspect(server.exporter, { depth: null, maxArrayLength: null, maxStringLength: null }), ...walk(server.dataDir).map((f) => readFileSync(f).toString('latin1'))].join('\n')
}

async function exportedAttributes(inventory: string, target: string, scopes: KubeObject[] = []): Promise<Record<string, unknown>[]> {
  const { files } = await exportThroughFileSink(server, { namespace: 'team-a', inventory, target, sink: `${inventory}-files`, scopes })
  const doc = JSON.parse(readFileSync(files.find((f) => f.endsWith(`${path.sep}${inventory}.json`)) as string, 'utf8')) as { items: { attributes: Record<string, unknown> }[] }
  return doc.items.map((i) => i.attributes)
}

describe('the last-applied annotation', () => {
  test('of a Secret allowed by scope: its data and stringData never reach an expression, an export or the exporter', async () => {
    const target = targetWith({ resource: { group: '', version: 'v1', kind: 'Secret' }, profileRef: { name: 'probe' }, labelSelector: undefined, matchPolicy: undefined }, 'secrets')
    const body = JSON.stringify(syncRequest(controllerFor('kollect-targets'), target, relatedMap([TYPES.scope, TYPES.profile, 'Secret.v1'], {
      [TYPES.profile]: [profileWith(ATTRIBUTES, 'probe')], [TYPES.scope]: [SECRETS_SCOPE], 'Secret.v1': [appliedSecret('db-creds')],
    })))
    const res = await send(server.url, ROUTES.targetSync, { body })
    assert.equal(res.status, 200, res.text)
    assert.deepEqual([statusOf(res).extractedCount, statusOf(res).failedCount], [1, 0], res.text)
    const [attrs] = await exportedAttributes('secrets-applied', 'secrets', [SECRETS_SCOPE])
    // The annotation stays, canonical and without data/stringData; other annotations are untouched.
    const lastApplied = JSON.parse(String(attrs?.['lastApplied'])) as Record<string, unknown>
    assert.deepEqual(lastApplied, { apiVersion: 'v1', kind: 'Secret', metadata: { annotations: {}, name: 'db-creds', namespace: 'team-a' }, type: 'Opaque' })
    assert.equal(attrs?.['lastApplied'], '{"apiVersion":"v1","kind":"Secret","metadata":{"annotations":{},"name":"db-creds","namespace":"team-a"},"type":"Opaque"}')
    assert.equal((attrs?.['annotations'] as Record<string, string>)['owner'], 'team-a')
    const text = everything(res)
    for (const v of VALUES.slice(0, 3)) assert.ok(!text.includes(v), `secret value ${v} leaked`)
  })

  test('of a Secret: matchPolicy cannot probe data or the annotation either (no selection oracle)', async () => {
    const probes = [
      'has(object.data)',
      `object.metadata.annotations['${LAST_APPLIED}'].contains('hunter2')`,
      `object.metadata.annotations['${LAST_APPLIED}'].contains('${VALUES[1]?.slice(0, 8)}')`,
    ]
    for (const matchPolicy of probes) {
      const target = targetWith({ resource: { group: '', version: 'v1', kind: 'Secret' }, profileRef: { name: 'probe' }, labelSelector: undefined, matchPolicy }, 'secrets-oracle')
      const body = JSON.stringify(syncRequest(controllerFor('kollect-targets'), target, relatedMap([TYPES.scope, TYPES.profile, 'Secret.v1'], {
        [TYPES.profile]: [profileWith([{ name: 'n', cel: 'object.metadata.name' }], 'probe')], [TYPES.scope]: [SECRETS_SCOPE], 'Secret.v1': [appliedSecret('db-creds')],
      })))
      const res = await send(server.url, ROUTES.targetSync, { body })
      assert.equal(res.status, 200, res.text)
      assert.deepEqual([statusOf(res).matchedCount, statusOf(res).failedCount], [0, 0], `${matchPolicy}: ${res.text}`)
    }
  })

  test('of a Deployment: env-style name/value pairs and sensitive keys are redacted, the rest is kept, canonically', async () => {
    const profile = profileWith(ATTRIBUTES)
    profile['spec'] = { ...(profile['spec'] as Record<string, unknown>), redactKeys: ['internalNote'] }
    const res = await send(server.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([appliedDeployment()], { target: targetWith({}, 'applied'), profile })) })
    assert.equal(res.status, 200, res.text)
    const [attrs] = await exportedAttributes('deploy-applied', 'applied')
    const lastApplied = String(attrs?.['lastApplied'])
    assert.equal(lastApplied,
      '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web-00001","namespace":"team-a"},' +
      '"settings":{"apiToken":"[redacted]","internalNote":"[redacted]","replicasHint":3},' +
      '"spec":{"template":{"spec":{"containers":[{"env":[{"name":"DB_PASSWORD","value":"[redacted]"},{"name":"LOG_LEVEL","value":"debug"}],"image":"registry.example/app:1.2.3","name":"app"}]}}}}')
    assert.equal(((attrs?.['whole'] as KubeObject).metadata?.annotations as Record<string, string>)[LAST_APPLIED], lastApplied)
    const text = everything(res)
    for (const v of VALUES.slice(3)) assert.ok(!text.includes(v), `value ${v} leaked`)
  })

  test('that does not parse is replaced by a fixed marker; one that is not a string too', async () => {
    const broken = appliedDeployment(`{"spec":{"password":"${VALUES[3]}"`)
    const notText = appliedDeployment()
    notText.metadata = { ...notText.metadata, name: 'web-00002', uid: 'uid-web-00002', annotations: { [LAST_APPLIED]: { password: VALUES[4] } as unknown as string } }
    const request = targetSyncRequest([broken, notText], { target: targetWith({}, 'broken'), profile: profileWith(ATTRIBUTES.slice(1, 2)) })
    const res = await send(server.url, ROUTES.targetSync, { body: JSON.stringify(request) })
    assert.equal(res.status, 200, res.text)
    const attrs = await exportedAttributes('broken-applied', 'broken')
    assert.deepEqual(attrs.map((a) => a['lastApplied']), ['[redacted]', '[redacted]'])
    const text = everything(res)
    for (const v of VALUES.slice(3, 5)) assert.ok(!text.includes(v), `value ${v} leaked`)
  })

  test('objects without the annotation are extracted exactly as before', async () => {
    const plain = deployment(7)
    const request = targetSyncRequest([plain], { target: targetWith({}, 'plain'), profile: profileWith([{ name: 'whole', cel: 'object' }]) })
    const res = await send(server.url, ROUTES.targetSync, { body: JSON.stringify(request) })
    assert.equal(res.status, 200, res.text)
    const [attrs] = await exportedAttributes('plain-inv', 'plain')
    assert.deepEqual(attrs?.['whole'], JSON.parse(JSON.stringify(plain)))
  })
})
