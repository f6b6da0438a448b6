import { test, type TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { ResolvedSink } from '../../../api/types.js'
import { clusterSecrets, type ClusterReads, type ScopeList } from '../../../server/cluster/credentials.js'
import { composition, eventually, harness, INV, itemsOf, LIMIT, report, resolvedSink, T1, type Harness } from './harness.js'

// Issue 24, F6: a pooled sink holds its credentials, so the grant of a Secret in another namespace
// is looked up again before every use. The exporter runs with the cluster-mode credential code
// (server/cluster/credentials.ts) over a recording stand-in for its two API calls; the same path against
// a real API server is test/security/grant-revocation.test.ts.

const FOREIGN = resolvedSink('shared', { secretRef: { name: 'pg-creds', namespace: 'team-b' } })
const GRANT: ScopeList = [{ name: 'team-a', spec: { allowedSecrets: [{ namespace: 'team-b', name: 'pg-creds' }] } }]

interface Api extends ClusterReads {
  scopeList: ScopeList | Error
  calls: { scopes: number; secret: number }
}

function api(): Api {
  const a: Api = {
    scopeList: GRANT,
    calls: { scopes: 0, secret: 0 },
    scopes: async () => {
      a.calls.scopes++
      if (a.scopeList instanceof Error) throw a.scopeList
      return a.scopeList
    },
    secret: async () => {
      a.calls.secret++
      return { dsn: 'postgres://u:pw@db/inv' }
    },
  }
  return a
}

/** The exporter as wired in a cluster: credentials read when a sink is built, grants checked at every use. */
function exporterWithGrants(t: TestContext, reads: Api): Harness {
  const secrets = clusterSecrets(reads, 600_000)
  const h: Harness = harness(t, {
    createSink: async (resolved: ResolvedSink | null) => {
      if (resolved) await secrets.credentials(resolved)
      return h.factory.createSink(resolved)
    },
    checkGrant: secrets.checkGrant,
  })
  return h
}

let generation = 0
async function exportChange(h: Harness): Promise<void> {
  await h.exporter.reportTarget(report(T1, itemsOf(T1, 2, ++generation * 10), [], generation))
  h.clock.advance(2_000)
}

const sinkState = (h: Harness) => h.exporter.inventoryState(INV)?.sinks[0]

test('a revoked grant stops the next write: looked up, refused, and the pooled sink closed and forgotten', LIMIT, async (t) => {
  const reads = api()
  const h = exporterWithGrants(t, reads)
  await h.exporter.applyInventory(composition({ sinks: [FOREIGN] }))
  await exportChange(h)
  await eventually(() => sinkState(h)?.state === 'Synced', 'the first export')
  const sink = h.factory.sink('team-a/shared')
  assert.equal(reads.calls.secret, 1)

  reads.scopeList = [{ name: 'team-a', spec: {} }]
  const before = { ...reads.calls }
  await exportChange(h)
  await eventually(() => /^ScopeSecretDenied: /.test(sinkState(h)?.message ?? ''), 'the refusal')
  assert.equal(sinkState(h)?.state, 'Failing')
  assert.ok(reads.calls.scopes > before.scopes, 'the grant was looked up')
  assert.equal(reads.calls.secret, before.secret, 'the Secret was not read')
  assert.equal(sink.attempts.length, 1, 'the pooled sink was not written')
  await eventually(() => sink.closeCount === 1, 'the pooled sink closed')

  // Granted again: a new sink, from a fresh read of the Secret (its cached data went with the refusal).
  reads.scopeList = GRANT
  await exportChange(h)
  await eventually(() => sinkState(h)?.state === 'Synced', 'the export after the grant came back')
  assert.equal(h.factory.all('team-a/shared').length, 2)
  assert.equal(reads.calls.secret, before.secret + 1)
  assert.equal(sink.attempts.length, 1)
})

test('a sink check of a pooled sink looks the grant up, and a refusal drops the sink', LIMIT, async (t) => {
  const reads = api()
  const h = exporterWithGrants(t, reads)
  await h.exporter.applyInventory(composition({ sinks: [FOREIGN] }))
  await exportChange(h)
  await eventually(() => sinkState(h)?.state === 'Synced', 'the first export')
  assert.deepEqual(await h.exporter.checkSink(FOREIGN), { reachable: true, message: '' })

  reads.scopeList = []
  const lookups = reads.calls.scopes
  const check = await h.exporter.checkSink(FOREIGN)
  assert.equal(check.reachable, false)
  assert.equal(check.message, 'ScopeSecretDenied: Secret team-b/pg-creds of KollectSink team-a/shared is not allowed by the scope of namespace team-a (no KollectScope: own namespace only)')
  assert.equal(reads.calls.scopes, lookups + 1, 'looked up, though a check answer is reused for 30 s')
  await eventually(() => h.factory.sink('team-a/shared').closeCount === 1, 'the pooled sink closed')
})

test('a failed lookup refuses the write retriably and keeps the sink', LIMIT, async (t) => {
  const reads = api()
  const h = exporterWithGrants(t, reads)
  const own = resolvedSink('own', { secretRef: { name: 'pg-creds' } })
  await h.exporter.applyInventory(composition({ sinks: [FOREIGN, own] }))
  await exportChange(h)
  await eventually(() => h.exporter.inventoryState(INV)?.sinks.every((s) => s.state === 'Synced') ?? false, 'the first export')
  const lookups = reads.calls.scopes

  reads.scopeList = Object.assign(new Error('connection refused'), { code: 503 })
  await exportChange(h)
  await eventually(() => /cannot be listed \(HTTP 503\)/.test(h.exporter.inventoryState(INV)?.sinks.find((s) => s.name === 'shared')?.message ?? ''), 'the failed lookup')
  await eventually(() => h.exporter.inventoryState(INV)?.sinks.find((s) => s.name === 'own')?.state === 'Synced', 'the own-namespace sink exported')
  assert.equal(h.factory.sink('team-a/shared').closeCount, 0, 'kept: the API being down is no revocation')

  reads.scopeList = GRANT
  await eventually(() => h.exporter.inventoryState(INV)?.sinks.every((s) => s.state === 'Synced') ?? false, 'the retried export')
  assert.equal(h.factory.all('team-a/shared').length, 1, 'the same sink')
  assert.ok(reads.calls.scopes > lookups)
})

test('a Secret of the sink\'s own namespace needs no lookup, for writes or checks', LIMIT, async (t) => {
  const reads = api()
  const h = exporterWithGrants(t, reads)
  const own = resolvedSink('own', { secretRef: { name: 'pg-creds' } })
  await h.exporter.applyInventory(composition({ sinks: [own] }))
  await exportChange(h)
  await eventually(() => sinkState(h)?.state === 'Synced', 'the export')
  assert.equal((await h.exporter.checkSink(own)).reachable, true)
  assert.deepEqual(reads.calls, { scopes: 0, secret: 1 })
})

test('a failed build is tried again at the next use, with what the cluster says then, not at the failure', LIMIT, async (t) => {
  const reads = api()
  let missing = true
  const failedReads: number[] = []
  const read = reads.secret
  reads.secret = async (namespace, name) => {
    if (!missing) return read(namespace, name)
    reads.calls.secret++
    failedReads.push(reads.calls.secret)
    throw Object.assign(new Error('secrets "pg-creds" not found'), { code: 404 })
  }
  const h = exporterWithGrants(t, reads)
  await h.exporter.applyInventory(composition({ sinks: [FOREIGN] }))
  await exportChange(h)
  await eventually(() => /Secret team-b\/pg-creds: cannot be read \(HTTP 404\)/.test(sinkState(h)?.message ?? ''), 'the failed read')

  // A build started at the failure would read the Secret while it is still missing, and the
  // retry after it is created would be answered with that stale refusal.
  missing = false
  for (let i = 0; i < 50 && sinkState(h)?.state !== 'Synced'; i++) {
    h.clock.advance(10)
    await new Promise((resolve) => setImmediate(resolve))
  }
  await eventually(() => sinkState(h)?.state === 'Synced', 'the retried export')
  assert.deepEqual(failedReads, [1], 'the Secret was read once while missing, by the write that failed')
  assert.equal(reads.calls.secret, 2)
})
