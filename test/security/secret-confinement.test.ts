import assert from 'node:assert/strict'
import { after, before, beforeEach, describe, test } from 'node:test'
import fc from 'fast-check'
import type { KollectScopeSpec, KubeObject, ResolvedSink, SinkExportState } from '../../api/types.js'
import { effectiveScope } from '../../hooks/scope.js'
import { secretEnvName, secretRefusal } from '../../server/cluster/credentials.js'
import { SinkError } from '../../sinks/sink.js'
import { startHooksServer, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { startKollectProcess } from '../support/kollect-process.js'
import { TYPES, controllerFor, deployment, relatedMap, syncRequest, targetSyncRequest } from '../support/metacontroller.js'
import {
  PERMANENT, ROUTES, conditionOf, inventorySync, meta, recordingListener, scope, send, sleep, statusOf, targetWith, type RecordingListener,
} from './support.js'

// Issue 8: a sink may use only Secrets of its own namespace, unless every KollectScope of the
// sink's namespace lists the Secret in allowedSecrets; only a namespace's own scopes count. Each
// finding runs against a real listening server, and the sinks point at a real socket that
// records every connection and Authorization header, so "nothing was read or sent" is observed,
// not assumed.

const TEAM_B_TOKEN = 'team-b-git-token-SECRET-7f3a'
const TEAM_A_TOKEN = 'team-a-git-token-SECRET-41c9'
const PG_PASSWORD = 'team-b-pg-password-SECRET-0d2e'

/**
 * team-b's Secrets git-creds and pg-creds, and team-a's git-creds, as local mode reads them. Each
 * is also set under the names earlier schemes used (KOLLECT_SECRET_<NAME>_<KEY>, which ignored
 * the namespace, and <NAMESPACE>_<NAME> joined by one "_"), so these tests show the findings on
 * the code before the fix too; the fix ignores those names.
 */
function secretEnv(listener: RecordingListener): Record<string, string> {
  const dsn = `postgres://kollect:${PG_PASSWORD}@127.0.0.1:${listener.port}/inventory`
  return {
    KOLLECT_SECRET_TEAM_B__GIT_CREDS__TOKEN: TEAM_B_TOKEN,
    KOLLECT_SECRET_GIT_CREDS_TOKEN: TEAM_B_TOKEN,
    KOLLECT_SECRET_TEAM_B__PG_CREDS__DSN: dsn,
    KOLLECT_SECRET_PG_CREDS_DSN: dsn,
    KOLLECT_SECRET_TEAM_A__GIT_CREDS__TOKEN: TEAM_A_TOKEN,
    KOLLECT_SECRET_TEAM_A_GIT_CREDS_TOKEN: TEAM_A_TOKEN,
  }
}

const basic = (token: string) => `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}`

function gitSink(namespace: string, name: string, secretRef: Record<string, string>, listener: RecordingListener): KubeObject {
  return { ...meta('KollectSink', namespace, name), spec: { type: 'git', cluster: 'lab', secretRef, git: { url: `${listener.url}/${namespace}/${name}.git` } } }
}

function pgSink(namespace: string, name: string, secretRef: Record<string, string>): KubeObject {
  return { ...meta('KollectSink', namespace, name), spec: { type: 'postgres', cluster: 'lab', secretRef } }
}

/** A sink sync as Metacontroller sends it once the sink's customize relates its namespace's scopes. */
function sinkSync(sink: KubeObject, scopes: KubeObject[] = []): string {
  return JSON.stringify(syncRequest(controllerFor('kollect-sinks'), sink, relatedMap([TYPES.scope], { [TYPES.scope]: scopes })))
}

function conditions(res: RawResponse): string[][] {
  assert.equal(res.status, 200, res.text)
  return (statusOf(res).conditions ?? []).map((c) => [c.type, c.status, c.reason])
}

function assertNothingLeaked(listener: RecordingListener, texts: string[]): void {
  assert.deepEqual(listener.requests, [], 'no request reached the listener')
  assert.equal(listener.connections, 0, 'nothing connected to the listener')
  for (const text of texts) for (const secret of [TEAM_B_TOKEN, TEAM_A_TOKEN, PG_PASSWORD]) assert.ok(!text.includes(secret), `${secret} in ${text}`)
}

const resolved = (sink: KubeObject): ResolvedSink => ({ namespace: sink.metadata?.namespace ?? '', name: sink.metadata?.name ?? '', spec: sink['spec'] as ResolvedSink['spec'] })

async function waitForSinks(server: HooksServer, inventory: { namespace: string; name: string }, want: (s: SinkExportState[]) => boolean): Promise<SinkExportState[]> {
  const deadline = Date.now() + 10_000
  for (;;) {
    server.exporter.flush()
    const sinks = server.exporter.inventoryState(inventory)?.sinks ?? []
    if (want(sinks)) return sinks
    if (Date.now() > deadline) throw new Error(`sinks never reached the wanted state: ${JSON.stringify(sinks)}`)
    await sleep(10)
  }
}

const GRANT_B_GIT_SPEC: KollectScopeSpec = { allowedSecrets: [{ namespace: 'team-b', name: 'git-creds' }] }
const GRANT_B_GIT = scope('git-from-b', { ...GRANT_B_GIT_SPEC })

let listener: RecordingListener
let server: HooksServer
before(async () => {
  listener = await recordingListener()
  server = await startHooksServer(secretEnv(listener))
})
after(async () => {
  await server.close()
  await listener.close()
})
beforeEach(() => listener.reset())

describe('(a) a sink sync with another namespace\'s Secret', () => {
  test('is Ready=False ScopeSecretDenied naming the ref, and nothing is read or sent', async () => {
    const res = await send(server.url, ROUTES.sinkSync, { body: sinkSync(gitSink('team-a', 'stolen', { name: 'git-creds', namespace: 'team-b' }, listener)) })
    assert.deepEqual(conditions(res), [['Ready', 'False', 'ScopeSecretDenied']], 'no reachability check: the exporter was not asked')
    assert.equal(conditionOf(res, 'Ready')?.message, 'Secret team-b/git-creds of KollectSink team-a/stolen is not allowed by the scope of namespace team-a (no KollectScope: own namespace only)')
    assertNothingLeaked(listener, [res.text])
  })

  test('a grant in a scope of another namespace (even the Secret\'s) does not count', async () => {
    const sink = gitSink('team-a', 'stolen-2', { name: 'git-creds', namespace: 'team-b' }, listener)
    const res = await send(server.url, ROUTES.sinkSync, {
      body: sinkSync(sink, [scope('b-grants', { allowedSecrets: [{ namespace: 'team-b', name: 'git-creds' }] }, 'team-b')]),
    })
    assert.deepEqual(conditions(res), [['Ready', 'False', 'ScopeSecretDenied']])
    assertNothingLeaked(listener, [res.text])
  })

  test('control: a sink of team-b using its own Secret does send it, so the listener would have seen a leak', async () => {
    const res = await send(server.url, ROUTES.sinkSync, { body: sinkSync(gitSink('team-b', 'own', { name: 'git-creds' }, listener)) })
    assert.deepEqual(conditions(res), [['Ready', 'True', 'Valid'], ['Reachable', 'False', 'Unreachable']])
    assert.ok(listener.requests.length > 0)
    assert.deepEqual([...new Set(listener.requests.map((r) => r.authorization))], [basic(TEAM_B_TOKEN)])
    assert.ok(!res.text.includes(TEAM_B_TOKEN), 'the status never carries the credential')
  })
})

describe('(b) a scope of the sink\'s namespace grants the Secret', () => {
  const sink = () => gitSink('team-a', 'granted', { name: 'git-creds', namespace: 'team-b' }, listener)

  test('the pure decision, which cluster mode applies, allows it', () => {
    const scopes = [{ name: 'git-from-b', spec: GRANT_B_GIT_SPEC }]
    assert.equal(effectiveScope('team-a', scopes).secretAllowed('team-a', { namespace: 'team-b', name: 'git-creds' }), true)
    assert.equal(secretRefusal(resolved(sink()), scopes), null)
    assert.ok(secretRefusal(resolved(sink()), []) instanceof SinkError)
  })

  test('the hooks allow it, but local mode (no scope source the exporter could verify) still refuses: documented', async () => {
    const res = await send(server.url, ROUTES.sinkSync, { body: sinkSync(sink(), [GRANT_B_GIT]) })
    assert.deepEqual(conditions(res), [['Ready', 'True', 'Valid'], ['Reachable', 'False', 'Unreachable']])
    assert.equal(conditionOf(res, 'Reachable')?.message, 'ScopeSecretDenied: Secret team-b/git-creds of KollectSink team-a/granted is in another namespace; ' +
      'without a cluster (credentials from environment variables) a sink may use only Secrets of its own namespace')
    assertNothingLeaked(listener, [res.text])
  })

  test('the same, in Kollect started as its own process with the Secret in its environment', async (t) => {
    const proc = await startKollectProcess(secretEnv(listener))
    t.after(() => proc.close())
    const res = await send(proc.url, ROUTES.sinkSync, { body: sinkSync(sink(), [GRANT_B_GIT]) })
    assert.deepEqual(conditions(res), [['Ready', 'True', 'Valid'], ['Reachable', 'False', 'Unreachable']])
    assert.match(conditionOf(res, 'Reachable')?.message ?? '', /^ScopeSecretDenied: Secret team-b\/git-creds of KollectSink team-a\/granted is in another namespace/)
    assertNothingLeaked(listener, [res.text])
  })
})

describe('(c) an inventory export to sinks with another namespace\'s Secret', () => {
  const INVENTORY = { namespace: 'team-a', name: 'exfil' }
  const sinks = () => [gitSink('team-a', 'exfil-git', { name: 'git-creds', namespace: 'team-b' }, listener), pgSink('team-a', 'exfil-pg', { name: 'pg-creds', namespace: 'team-b' })]
  // The inventory's target has reported, so an export would run at once if a sink were in it.
  beforeEach(async () => {
    assert.equal((await send(server.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([deployment(1)])) })).status, 200)
    listener.reset()
  })

  test('the sinks are left out of the composition with ScopeSecretDenied, and nothing is read or sent', async () => {
    const body = JSON.stringify(inventorySync({
      name: INVENTORY.name,
      spec: { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name: 'exfil-git' }, { name: 'exfil-pg' }], debounce: '1ms', maxWait: '1ms' },
      sinks: sinks(),
    }))
    const res = await send(server.url, ROUTES.inventorySync, { body })
    assert.equal(res.status, 200, res.text)
    const message = 'Secret team-b/git-creds of KollectSink team-a/exfil-git is not allowed by the scope of namespace team-a (no KollectScope: own namespace only); ' +
      'Secret team-b/pg-creds of KollectSink team-a/exfil-pg is not allowed by the scope of namespace team-a (no KollectScope: own namespace only)'
    for (const type of ['Ready', 'Degraded']) {
      const c = conditionOf(res, type)
      assert.deepEqual([c?.status, c?.reason, c?.message], [type === 'Ready' ? 'False' : 'True', 'ScopeSecretDenied', message])
    }
    assert.deepEqual(statusOf(res).sinks, [])
    await sleep(50)
    server.exporter.flush()
    await server.exporter.idle()
    assert.deepEqual(server.exporter.inventoryState(INVENTORY)?.sinks, [])
    assertNothingLeaked(listener, [res.text])
  })

  test('the exporter does not trust a composition that carries them anyway: both sinks fail ScopeSecretDenied before any read', async () => {
    const composition = {
      inventory: { namespace: 'team-a', name: 'forged' }, generation: 1, targets: [{ namespace: 'team-a', name: 'prod-deploys' }], sinks: sinks().map(resolved),
      debounceMs: 1, maxWaitMs: 1, suspend: false,
    }
    await server.exporter.applyInventory(composition)
    const failing = await waitForSinks(server, composition.inventory, (s) => s.length === 2 && s.every((x) => x.state === 'Failing'))
    assert.deepEqual(failing.map((s) => s.message), [
      'ScopeSecretDenied: Secret team-b/git-creds of KollectSink team-a/exfil-git is in another namespace; ' +
        `without a cluster (credentials from environment variables) a sink may use only Secrets of its own namespace${PERMANENT}`,
      'ScopeSecretDenied: Secret team-b/pg-creds of KollectSink team-a/exfil-pg is in another namespace; ' +
        `without a cluster (credentials from environment variables) a sink may use only Secrets of its own namespace${PERMANENT}`,
    ])
    const check = await server.exporter.checkSink(resolved(sinks()[0] as KubeObject))
    assert.equal(check.reachable, false)
    assert.match(check.message, /^ScopeSecretDenied: /)
    assertNothingLeaked(listener, failing.map((s) => s.message))
  })
})

describe('(d) local-mode variable names carry the namespace', () => {
  test('team/a-git-creds and team-c/git-creds (own-namespace refs) never get team-a\'s git-creds', async () => {
    for (const sink of [gitSink('team', 'own-a-git', { name: 'a-git-creds' }, listener), gitSink('team-c', 'own-git', { name: 'git-creds' }, listener)]) {
      const res = await send(server.url, ROUTES.sinkSync, { body: sinkSync(sink) })
      assert.deepEqual(conditions(res), [['Ready', 'True', 'Valid'], ['Reachable', 'False', 'Unreachable']], 'an own-namespace Secret is allowed')
      const secretName = (sink['spec'] as { secretRef: { name: string } }).secretRef.name
      const prefix = secretEnvName(sink.metadata?.namespace as string, secretName, '')
      assert.equal(conditionOf(res, 'Reachable')?.message, `Secret ${sink.metadata?.namespace}/${secretName}: no ${prefix}* environment variables are set`)
      assertNothingLeaked(listener, [res.text])
    }
  })

  test('control: team-a\'s own sink gets team-a\'s token, from KOLLECT_SECRET_TEAM_A__GIT_CREDS__TOKEN', async () => {
    const res = await send(server.url, ROUTES.sinkSync, { body: sinkSync(gitSink('team-a', 'own-git', { name: 'git-creds' }, listener)) })
    assert.deepEqual(conditions(res), [['Ready', 'True', 'Valid'], ['Reachable', 'False', 'Unreachable']])
    assert.deepEqual([...new Set(listener.requests.map((r) => r.authorization))], [basic(TEAM_A_TOKEN)])
  })

  test('property: two different Secrets never share a variable, and no Secret\'s prefix covers another\'s variables', () => {
    const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/)
    const name = fc.stringMatching(/^[a-z0-9]([-.a-z0-9]{0,14}[a-z0-9])?$/)
    const prefix = (ns: string, n: string): string | null => {
      try {
        return secretEnvName(ns, n, '')
      } catch (err) {
        assert.ok(err instanceof SinkError && !err.retriable)
        assert.ok(/--|-\.|\.-|\.\./.test(ns + ' ' + n), `${ns}/${n} refused without a reason`)
        return null
      }
    }
    fc.assert(fc.property(label, name, label, name, (ns1, n1, ns2, n2) => {
      const p1 = prefix(ns1, n1)
      const p2 = prefix(ns2, n2)
      if (p1 === null || p2 === null) return
      const same = ns1 === ns2 && n1 === n2
      assert.equal(p1 === p2, same, `${ns1}/${n1} and ${ns2}/${n2}`)
      assert.equal(p1.startsWith(p2) || p2.startsWith(p1), same, `${ns1}/${n1} and ${ns2}/${n2}`)
    }), { numRuns: 2000, examples: [['team', 'a-git-creds', 'team-a', 'git-creds'], ['team-a', 'b', 'team', 'a-b'], ['a', 'b-c', 'a-b', 'c']] })
  })
})

describe('(e) only a namespace\'s own KollectScopes count', () => {
  test('target sync: a scope of team-b allowing every namespace does not widen team-a\'s target', async () => {
    const body = JSON.stringify(targetSyncRequest([deployment(1), deployment(2, { namespace: 'team-b' })], {
      target: targetWith({ namespaces: ['team-a', 'team-b'] }, 'widened'), scopes: [scope('wide-open', { allowedNamespaces: ['*'] }, 'team-b')],
    }))
    const res = await send(server.url, ROUTES.targetSync, { body })
    assert.equal(res.status, 200, res.text)
    assert.deepEqual([conditionOf(res, 'Degraded')?.reason, conditionOf(res, 'Degraded')?.message],
      ['ScopeNamespaceDenied', 'namespaces not allowed by scope: team-b (no KollectScope: own namespace only)'])
    assert.deepEqual([statusOf(res).matchedCount, statusOf(res).extractedCount], [1, 1])
  })

  test('inventory sync: a scope of platform listing its sink does not let team-a export to it', async () => {
    const body = JSON.stringify(inventorySync({
      name: 'widened',
      spec: { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ namespace: 'platform', name: 'shared' }] },
      sinks: [{ ...meta('KollectSink', 'platform', 'shared'), spec: { type: 'file', cluster: 'lab' } }],
      scopes: [scope('platform-open', { allowedSinks: [{ namespace: 'platform', name: 'shared' }], minDebounce: '1h' }, 'platform')],
    }))
    const res = await send(server.url, ROUTES.inventorySync, { body })
    const ready = conditionOf(res, 'Ready')
    assert.deepEqual([ready?.status, ready?.reason, ready?.message], ['False', 'ScopeSinkDenied', 'sinks not allowed by the scope of namespace team-a: platform/shared'])
  })
})
