import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { inspect } from 'node:util'
import type { KubeObject } from '../../api/types.js'
import { startHooksServer, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { TYPES, controllerFor, relatedMap, syncRequest } from '../support/metacontroller.js'
import { ROUTES, conditionOf, profileWith, scope, send, statusOf, targetWith } from './support.js'

// Issue 24, F9: whether an object is a core Secret (whose data and stringData never reach an
// expression) was read from the object's own apiVersion, compared as the exact string "v1". A
// holder of the hook token could send Secrets as "v1 ", "core/v1" or kind "secret", or name the
// target's group "core", which the scope's "no core Secrets" default did not recognise either.
// Both the target's resource and the object now decide, after normalising; either one that could
// mean a core Secret makes it one.

const SECRET_VALUE = 'hunter2-FORGED-SECRET'
const ENCODED = Buffer.from(SECRET_VALUE).toString('base64')
const ALLOW_SECRETS = [scope('s', { allowedResources: [{ group: '', kind: 'Secret' }] })]
const ALLOW_CONFIGMAPS = [scope('s', { allowedResources: [{ group: '', kind: 'ConfigMap' }] })]

let server: HooksServer
before(async () => {
  server = await startHooksServer()
})
after(async () => {
  await server.close()
})

function forged(apiVersion: string | undefined, kind: string, i: number): KubeObject {
  return {
    ...(apiVersion === undefined ? {} : { apiVersion }),
    kind,
    type: 'Opaque',
    metadata: { name: `forged-${i}`, namespace: 'team-a', uid: `uid-forged-${i}`, labels: { app: 'db' } },
    data: { password: ENCODED },
    stringData: { token: SECRET_VALUE },
  }
}

interface TargetCase {
  reason: string
  resource: Record<string, string>
  scopes: KubeObject[]
  objects: KubeObject[]
}

/** A target sync over `resource` whose profile reads everything an expression can reach. */
function sync(c: TargetCase): string {
  const { group, version, kind } = c.resource as { group: string; version: string; kind: string }
  const key = group ? `${kind}.${group}/${version}` : `${kind}.${version}`
  const target = targetWith({ resource: c.resource, profileRef: { name: 'probe' }, labelSelector: undefined, matchPolicy: undefined }, 'forged')
  const profile = profileWith([
    { name: 'data', cel: 'object.data', optional: true },
    { name: 'stringData', jsonPath: '$.stringData', optional: true },
    { name: 'whole', cel: 'object' },
    { name: 'all', jsonPath: '$..*' },
  ], 'probe')
  return JSON.stringify(syncRequest(controllerFor('kollect-targets'), target, relatedMap([TYPES.scope, TYPES.profile, key], {
    [TYPES.profile]: [profile], [TYPES.scope]: c.scopes, [key]: c.objects,
  })))
}

function assertNoSecretData(res: RawResponse): void {
  const everything = [res.text, inspect(server.exporter, { depth: null, maxArrayLength: null, maxStringLength: null })].join('\n')
  for (const v of [SECRET_VALUE, ENCODED]) assert.ok(!everything.includes(v), `secret value ${v} reached the exporter or the answer`)
}

const FORGERIES: [apiVersion: string | undefined, kind: string][] = [
  ['v1 ', 'Secret'], [' v1', 'Secret'], ['\tv1\n', 'Secret'], ['core/v1', 'Secret'], ['Core/v1', 'Secret'], [' core /v1', 'Secret'], ['/v1', 'Secret'],
  ['v1', 'secret'], ['v1', 'Secret '], ['v1', 'SECRET'], ['core/v1', 'secret'], [undefined, 'Secret'], ['v2', 'Secret'],
]
const OBJECTS = FORGERIES.map(([apiVersion, kind], i) => forged(apiVersion, kind, i))

describe('a core Secret is known by its target and by itself, whatever the spelling', () => {
  const cases: TargetCase[] = [
    {
      reason: 'a Secret target allowed by scope, objects with forged apiVersions and kinds',
      resource: { group: '', version: 'v1', kind: 'Secret', plural: 'secrets' }, scopes: ALLOW_SECRETS, objects: OBJECTS,
    },
    {
      reason: 'a ConfigMap target allowed by scope, sent objects that say they are Secrets',
      resource: { group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps' }, scopes: ALLOW_CONFIGMAPS, objects: OBJECTS,
    },
    {
      reason: 'a ConfigMap target with no scope, sent objects that say they are Secrets',
      resource: { group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps' }, scopes: [], objects: OBJECTS,
    },
    {
      reason: 'a target of kind "secret" allowed by scope, sent objects that say they are ConfigMaps',
      resource: { group: '', version: 'v1', kind: 'secret', plural: 'secrets' },
      scopes: [scope('s', { allowedResources: [{ group: '', kind: 'secret' }, { group: '', kind: 'ConfigMap' }] })],
      objects: OBJECTS.map((o) => ({ ...o, apiVersion: 'v1', kind: 'ConfigMap' })),
    },
  ]
  for (const c of cases) {
    test(`${c.reason}: no data nor stringData reaches an attribute, the answer or the exporter`, async () => {
      const res = await send(server.url, ROUTES.targetSync, { body: sync(c) })
      assert.equal(res.status, 200, res.text)
      assert.equal(conditionOf(res, 'Ready')?.status, 'True', res.text)
      assertNoSecretData(res)
    })
  }

  test('the Secrets the scope allows are still extracted, without their data', async () => {
    const res = await send(server.url, ROUTES.targetSync, { body: sync(cases[0] as TargetCase) })
    // The scope allows kind Secret of group "": the objects that say kind "secret" or group "core" are refused by it.
    assert.equal(statusOf(res).extractedCount, FORGERIES.filter(([apiVersion, kind]) => kind === 'Secret' && !apiVersion?.toLowerCase().includes('core')).length, res.text)
  })

  for (const group of ['core', 'CORE', ' core']) {
    test(`a target of core Secrets named with group ${JSON.stringify(group)} is denied by the default scope, as group "" is`, async () => {
      const c: TargetCase = { reason: '', resource: { group, version: 'v1', kind: 'Secret', plural: 'secrets' }, scopes: [], objects: [forged('v1', 'Secret', 0), forged('core/v1', 'Secret', 1)] }
      const res = await send(server.url, ROUTES.targetSync, { body: sync(c) })
      assert.equal(res.status, 200, res.text)
      const ready = conditionOf(res, 'Ready')
      assert.equal(ready?.status, 'False', res.text)
      assert.ok(ready?.reason === 'ScopeResourceDenied' || ready?.reason === 'InvalidSpec', res.text)
      assertNoSecretData(res)
    })
  }

  test('a scope allowing every kind of group "core" does not allow core Secrets', async () => {
    const c: TargetCase = {
      reason: '', resource: { group: 'core', version: 'v1', kind: 'Secret', plural: 'secrets' },
      scopes: [scope('s', { allowedResources: [{ group: 'core', kind: '*' }] })], objects: [forged('core/v1', 'Secret', 0)],
    }
    const res = await send(server.url, ROUTES.targetSync, { body: sync(c) })
    assert.deepEqual([conditionOf(res, 'Ready')?.status, conditionOf(res, 'Ready')?.reason], ['False', 'ScopeResourceDenied'], res.text)
    assertNoSecretData(res)
  })
})
