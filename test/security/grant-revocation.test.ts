import assert from 'node:assert/strict'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { readdirSync } from 'node:fs'
import { compareItems, itemsChecksum } from '../../api/canonical.js'
import type { InventoryComposition, ResolvedSink, SinkExportState } from '../../api/types.js'
import { startHooksServer, type HooksServer } from '../support/hooks-server.js'
import { bumpReplicas, makeItems, TARGET } from '../support/items.js'
import { startControlPlane, type ControlPlane } from '../support/kube-apiserver.js'
import { ROOT } from '../support/metacontroller.js'
import { pollUntil } from '../support/process.js'
import { recordingListener, type RecordingListener } from './support.js'

// Issue 24, F6: a revoked allowedSecrets grant kept working. The exporter's sink pool keeps a
// built sink, credentials included, so the next export sent team-b's token with no Secret read
// and no scope lookup. Here the exporter runs as it is wired in a cluster (credentials and grants
// through the real API server); the API server's own request counters say which lookups were
// made, and the sink's remote is a socket that records every Authorization header it receives.

const TOKEN = 'team-b-git-token-SECRET-5e81'
const BASIC = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`
const INVENTORY = { namespace: 'team-a', name: 'granted' }
const GRANT = 'apiVersion: kollect.dev/v1alpha1\nkind: KollectScope\nmetadata: {name: team-a, namespace: team-a}\nspec: {allowedSecrets: [{namespace: team-b, name: git-creds}]}\n'
// The same scope, edited: the grant left out.
const EDITED = 'apiVersion: kollect.dev/v1alpha1\nkind: KollectScope\nmetadata: {name: team-a, namespace: team-a}\nspec: {allowedNamespaces: [team-a]}\n'

let cp: ControlPlane
let listener: RecordingListener
let server: HooksServer
let sink: ResolvedSink
let generation = 0

before(async () => {
  cp = await startControlPlane()
  const crds = path.join(ROOT, 'manifests', 'crds')
  for (const f of readdirSync(crds).filter((f) => f.startsWith('kollect.dev_'))) await cp.applyYaml(path.join(crds, f))
  for (const ns of ['team-a', 'team-b']) await cp.applyYaml(`apiVersion: v1\nkind: Namespace\nmetadata: {name: ${ns}}\n`)
  await cp.applyYaml(`apiVersion: v1\nkind: Secret\nmetadata: {name: git-creds, namespace: team-b}\nstringData: {token: ${TOKEN}}\n`)
  // Granted before the inventory names the sink: the pool builds the sink (and reads the Secret) at once.
  await cp.applyYaml(GRANT)
  listener = await recordingListener()
  // loadKubeConfig reads the file named by the process's KUBECONFIG. Secret data is cached for
  // ten minutes, so a second read of the Secret shows the cached copy was dropped.
  process.env['KUBECONFIG'] = cp.kubeconfigPath
  server = await startHooksServer({ KUBECONFIG: cp.kubeconfigPath, KOLLECT_SECRET_CACHE_MS: '600000' })
  sink = { namespace: 'team-a', name: 'shared-git', spec: { type: 'git', cluster: 'lab', secretRef: { name: 'git-creds', namespace: 'team-b' }, git: { url: `${listener.url}/team-a/shared.git` } } }
  const composition: InventoryComposition = { inventory: INVENTORY, generation: 1, targets: [TARGET], sinks: [sink], debounceMs: 1, maxWaitMs: 1, suspend: false }
  await server.exporter.applyInventory(composition)
}, { timeout: 180_000 })

after(async () => {
  await server?.close()
  await listener?.close()
  await cp?.close()
})

/** What the API server counted: KollectScope lists (grant lookups) and Secret gets (credential reads). */
async function apiCalls(): Promise<{ scopeLists: number; secretGets: number }> {
  const text = (await cp.request('GET', '/metrics')).body
  const count = (resource: string, verb: string): number => text.split('\n')
    .filter((l) => l.startsWith('apiserver_request_total{') && l.includes(`resource="${resource}"`) && l.includes(`verb="${verb}"`))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
  return { scopeLists: count('kollectscopes', 'LIST'), secretGets: count('secrets', 'GET') }
}

/** Report changed items, so the inventory has a new snapshot to export at once. */
async function changeItems(): Promise<void> {
  generation++
  const items = makeItems(3).map((i) => bumpReplicas(i, generation))
  await server.exporter.reportTarget({ target: TARGET, generation, checksum: itemsChecksum([...items].sort(compareItems)), items, failedKeys: [] })
}

async function sinkState(want: (s: SinkExportState) => boolean, what: string): Promise<SinkExportState> {
  let last: SinkExportState | undefined
  await pollUntil(what, async () => {
    last = server.exporter.inventoryState(INVENTORY)?.sinks[0]
    return last !== undefined && want(last)
  }, { timeoutMs: 30_000 })
  return last as SinkExportState
}

function assertNothingSent(): void {
  assert.deepEqual(listener.requests, [], 'no request reached the sink\'s remote')
  assert.equal(listener.connections, 0, 'nothing connected to the sink\'s remote')
}

test('granted: the export reads team-b\'s Secret once and sends its token (the remote refuses it)', { timeout: 60_000 }, async () => {
  await changeItems()
  await pollUntil('the token reached the remote', async () => listener.requests.length > 0, { timeoutMs: 30_000 })
  await sinkState((s) => s.state === 'Failing' && / \(permanent: /.test(s.message ?? ''), 'the write held after the remote refused it')
  assert.deepEqual([...new Set(listener.requests.map((r) => r.authorization))], [BASIC])
})

test('the scope edited to leave the grant out: the next export looks the grant up, fails ScopeSecretDenied and sends nothing', { timeout: 60_000 }, async () => {
  await cp.applyYaml(EDITED)
  listener.reset()
  const before = await apiCalls()
  await changeItems()
  // Until the refusal, or until the write reached the remote (what happened before the fix).
  const failing = await sinkState((s) => /^ScopeSecretDenied: /.test(s.message ?? '') || listener.requests.length > 0, 'the export refused by scope')
  assertNothingSent()
  assert.equal(failing.state, 'Failing')
  assert.match(failing.message ?? '', /^ScopeSecretDenied: Secret team-b\/git-creds of KollectSink team-a\/shared-git is not allowed by the scope of namespace team-a \(KollectScope team-a\)/)
  const calls = await apiCalls()
  assert.ok(calls.scopeLists > before.scopeLists, `the grant was looked up (${before.scopeLists} -> ${calls.scopeLists} KollectScope lists)`)
  assert.equal(calls.secretGets, before.secretGets, 'the Secret was not read')
  assertNothingSent()

  // A sink check, as the sink hook asks for one, looks the grant up too and contacts nothing.
  const check = await server.exporter.checkSink(sink)
  assert.equal(check.reachable, false)
  assert.match(check.message, /^ScopeSecretDenied: /)
  assert.ok((await apiCalls()).scopeLists > calls.scopeLists, 'the check looked the grant up')
  assertNothingSent()
})

test('the grant back: the sink is built again from a fresh read of the Secret, so the refusal dropped its credentials', { timeout: 60_000 }, async () => {
  await cp.applyYaml(GRANT)
  listener.reset()
  const before = await apiCalls()
  await changeItems()
  await pollUntil('the token reached the remote again', async () => listener.requests.length > 0, { timeoutMs: 30_000 })
  await sinkState((s) => s.state === 'Failing' && !/ScopeSecretDenied/.test(s.message ?? ''), 'the write reached the remote')
  assert.equal((await apiCalls()).secretGets, before.secretGets + 1, 'read again, though Secret data is cached for ten minutes')
})

test('the scope deleted: a sink check of the pooled sink looks the grant up and contacts nothing', { timeout: 60_000 }, async () => {
  const deleted = await cp.request('DELETE', '/apis/kollect.dev/v1alpha1/namespaces/team-a/kollectscopes/team-a')
  assert.equal(deleted.status, 200, deleted.body)
  listener.reset()
  const before = await apiCalls()
  const check = await server.exporter.checkSink(sink)
  assert.equal(check.reachable, false)
  assert.equal(check.message, 'ScopeSecretDenied: Secret team-b/git-creds of KollectSink team-a/shared-git is not allowed by the scope of namespace team-a (no KollectScope: own namespace only)')
  assert.ok((await apiCalls()).scopeLists > before.scopeLists, 'the grant was looked up')
  assertNothingSent()

  // The next export is refused too, and sends nothing.
  await changeItems()
  await sinkState((s) => /^ScopeSecretDenied: /.test(s.message ?? ''), 'the export refused by scope')
  assertNothingSent()
})
