// The chart's RBAC on a real API server, as the exporter's service account meets it: the
// objects `helm template` renders are applied as they are, and the exporter's own credential
// reader (server/cluster/credentials.ts, through @kubernetes/client-node) runs as that service account
// by impersonation. tenantMode confines Secret reads to watchNamespaces; the default does not.
// On top of RBAC, the reader itself refuses another namespace's Secret unless a KollectScope of
// the sink's namespace grants it, and it decides that before any read.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import path from 'node:path'
import * as k8s from '@kubernetes/client-node'
import type { ResolvedSink } from '../../api/types.js'
import { kubeCredentials } from '../../server/cluster/credentials.js'
import { leaseApi } from '../../server/cluster/leader.js'
import { LOCAL_IMAGE } from '../support/helm.js'
import { startControlPlane, type ControlPlane } from '../support/kube-apiserver.js'
import { ROOT } from '../support/metacontroller.js'
import { requireTool } from '../support/tools.js'

const NAMESPACES = ['kollect-system', 'wide-system', 'team-a', 'team-b']

let cp: ControlPlane

/** The chart's service account and RBAC for one release, as helm renders them. */
function renderRbac(release: string, namespace: string, set: string[]): string {
  const helm = requireTool('install-helm.sh', 'HELM')
  const r = spawnSync(helm, [
    'template', release, path.join(ROOT, 'charts', 'kollect'), '--namespace', namespace, '--kube-version', '1.35.0',
    '--show-only', 'templates/serviceaccount.yaml', '--show-only', 'templates/rbac.yaml',
    ...LOCAL_IMAGE,
    ...set.flatMap((s) => ['--set', s]),
  ], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 })
  assert.equal(r.status, 0, `helm template: ${r.error?.message ?? r.stderr}`)
  return r.stdout
}

before(async () => {
  cp = await startControlPlane()
  const crds = path.join(ROOT, 'manifests', 'crds')
  for (const f of readdirSync(crds).filter((f) => f.startsWith('kollect.dev_'))) await cp.applyYaml(path.join(crds, f))
  for (const ns of NAMESPACES) {
    await cp.applyYaml(`apiVersion: v1\nkind: Namespace\nmetadata: {name: ${ns}}\n`)
    await cp.applyYaml(`apiVersion: v1\nkind: Secret\nmetadata: {name: pg-creds, namespace: ${ns}}\nstringData: {dsn: "postgres://u:pw@db.${ns}/inv"}\n`)
  }
  // Two releases side by side: "kollect" narrowed to team-a, "wide" with the default Secret
  // access and exporters that elect (the Lease Role is rendered only then).
  await cp.applyYaml(renderRbac('kollect', 'kollect-system', ['tenantMode=true', 'watchNamespaces={team-a}']))
  await cp.applyYaml(renderRbac('wide', 'wide-system', ['hooks.replicas=3', 'exporter.replicas=2']))
}, { timeout: 180_000 })

after(async () => {
  await cp?.close()
})

const sink = (namespace: string, secretNamespace?: string): ResolvedSink => ({
  name: 'pg',
  namespace,
  spec: { type: 'postgres', postgres: {}, secretRef: { name: 'pg-creds', ...(secretNamespace ? { namespace: secretNamespace } : {}) } },
})

/** The exporter's credential reader, running as a release's service account. */
function readerAs(serviceAccount: string) {
  return kubeCredentials(cp.impersonating(serviceAccount), 0)
}

test('tenantMode: the exporter reads sink Secrets in watchNamespaces and nowhere else', async () => {
  const read = readerAs('system:serviceaccount:kollect-system:kollect')
  assert.deepEqual(await read(sink('team-a')), { dsn: 'postgres://u:pw@db.team-a/inv' })
  for (const [where, s] of [['team-b', sink('team-b')], ['kollect-system', sink('kollect-system')]] as const) {
    await assert.rejects(read(s), (err: Error) => {
      assert.equal(err.name, 'SinkError')
      assert.match(err.message, /cannot be read \(HTTP 403\)/, where)
      assert.doesNotMatch(err.message, /postgres:\/\//, 'no Secret data in the error')
      return true
    }, where)
  }
})

/** A SinkError refusing the Secret by scope: permanent, and without data. */
function scopeDenied(err: Error & { retriable?: boolean }): boolean {
  assert.equal(err.name, 'SinkError')
  assert.match(err.message, /^ScopeSecretDenied: Secret team-b\/pg-creds of KollectSink team-a\/pg is not allowed by the scope of namespace team-a/)
  assert.equal(err.retriable, false)
  assert.doesNotMatch(err.message, /postgres:\/\//)
  return true
}

test('another namespace\'s Secret is refused by scope before RBAC is asked, until a scope of the sink\'s namespace grants it', async () => {
  // The wide release may read team-b's Secret by RBAC: only the scope rule stands in the way.
  const wide = readerAs('system:serviceaccount:wide-system:wide-kollect')
  await assert.rejects(wide(sink('team-a', 'team-b')), scopeDenied, 'no scope in team-a')
  // A grant written in the Secret's own namespace does not count.
  await cp.applyYaml('apiVersion: kollect.dev/v1alpha1\nkind: KollectScope\nmetadata: {name: grant-from-b, namespace: team-b}\nspec: {allowedSecrets: [{namespace: team-b, name: pg-creds}]}\n')
  await assert.rejects(wide(sink('team-a', 'team-b')), scopeDenied, 'a scope in team-b grants nothing to team-a')

  await cp.applyYaml('apiVersion: kollect.dev/v1alpha1\nkind: KollectScope\nmetadata: {name: team-a, namespace: team-a}\nspec: {allowedSecrets: [{namespace: team-b, name: pg-creds}]}\n')
  assert.deepEqual(await wide(sink('team-a', 'team-b')), { dsn: 'postgres://u:pw@db.team-b/inv' }, 'granted by the scope of team-a')
  // Every scope of the namespace must agree: a second one that does not list it revokes the grant.
  await cp.applyYaml('apiVersion: kollect.dev/v1alpha1\nkind: KollectScope\nmetadata: {name: strict, namespace: team-a}\nspec: {allowedNamespaces: [team-a]}\n')
  await assert.rejects(wide(sink('team-a', 'team-b')), scopeDenied, 'a second scope without the grant')
  await cp.request('DELETE', '/apis/kollect.dev/v1alpha1/namespaces/team-a/kollectscopes/strict')

  // Granted by scope, the narrowed release is still bound by RBAC: team-b is outside watchNamespaces.
  const narrow = readerAs('system:serviceaccount:kollect-system:kollect')
  await assert.rejects(narrow(sink('team-a', 'team-b')), /Secret team-b\/pg-creds: cannot be read \(HTTP 403\)/)
  await cp.request('DELETE', '/apis/kollect.dev/v1alpha1/namespaces/team-a/kollectscopes/team-a')
})

test('tenantMode: get only; listing or writing Secrets is forbidden even in a watched namespace', async () => {
  const api = cp.impersonating('system:serviceaccount:kollect-system:kollect').makeApiClient(k8s.CoreV1Api)
  const code = (p: Promise<unknown>) => p.then(() => 200, (err: { code?: number }) => err.code)
  assert.equal(await code(api.listNamespacedSecret({ namespace: 'team-a' })), 403)
  assert.equal(await code(api.createNamespacedSecret({ namespace: 'team-a', body: { metadata: { name: 'planted' }, stringData: { a: 'b' } } })), 403)
  assert.equal(await code(api.deleteNamespacedSecret({ name: 'pg-creds', namespace: 'team-a' })), 403)
  // Discovery, which the hooks need, is granted.
  const apis = await cp.impersonating('system:serviceaccount:kollect-system:kollect').makeApiClient(k8s.ApisApi).getAPIVersions()
  assert.ok(apis.groups.some((g) => g.name === 'apps'))
})

test('default values: the exporter may read a Secret in any namespace (what tenantMode narrows)', async () => {
  const read = readerAs('system:serviceaccount:wide-system:wide-kollect')
  for (const ns of ['team-a', 'team-b', 'kollect-system']) {
    assert.deepEqual(await read(sink(ns)), { dsn: `postgres://u:pw@db.${ns}/inv` }, ns)
  }
})

test('a user that nothing binds reads nothing; a group binding is honoured through impersonation', async () => {
  await cp.applyYaml(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: auditors-read-secrets, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: wide-kollect-exporter}
subjects: [{kind: Group, name: auditors, apiGroup: rbac.authorization.k8s.io}]
`)
  const alone = kubeCredentials(cp.impersonating('alice'), 0)
  await assert.rejects(alone(sink('team-b')), /HTTP 403/)
  const audited = kubeCredentials(cp.impersonating('alice', ['auditors']), 0)
  assert.deepEqual(await audited(sink('team-b')), { dsn: 'postgres://u:pw@db.team-b/inv' })
  await assert.rejects(audited(sink('team-a')), /HTTP 403/, 'the group is bound in team-b only')
})

test('leader election: the exporter creates, reads and renews its own Lease in the release namespace, and no other', async () => {
  const sa = cp.impersonating('system:serviceaccount:wide-system:wide-kollect')
  const own = leaseApi(sa, 'wide-system', 'wide-kollect-exporter')
  const lease = {
    apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'wide-kollect-exporter', namespace: 'wide-system' },
    spec: { holderIdentity: 'pod-a', leaseDurationSeconds: 15 },
  }
  assert.equal((await own.create(lease))?.spec?.holderIdentity, 'pod-a', 'created: the stored Lease comes back')
  const read = await own.read()
  assert.equal(read?.spec?.holderIdentity, 'pod-a')
  assert.equal((await own.replace({ ...lease, metadata: read?.metadata ?? {}, spec: { ...lease.spec, holderIdentity: 'pod-b' } }))?.spec?.holderIdentity, 'pod-b')
  assert.equal((await own.read())?.spec?.holderIdentity, 'pod-b')
  const code = (p: Promise<unknown>) => p.then(() => 200, (err: { code?: number }) => err.code)
  // Another Lease in the same namespace (create is not narrowable by name, reads and updates are).
  assert.equal(await code(leaseApi(sa, 'wide-system', 'kube-scheduler').read()), 403)
  assert.equal(await code(leaseApi(sa, 'team-a', 'wide-kollect-exporter').create({ ...lease, metadata: { name: 'wide-kollect-exporter', namespace: 'team-a' } })), 403)
})
