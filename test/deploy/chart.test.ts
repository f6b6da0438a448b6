// The Helm chart, rendered by a real helm (./helm.ts): lint, default and tenant-mode RBAC, the
// CompositeControllers (the same as compositecontrollers/*.yaml for release "kollect" in
// kollect-system), the hook token wiring, the values schema, and the optional objects.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  all,
  assertHardenedPod,
  container,
  envValue,
  k8sObjects,
  only,
  parseDocs,
  readRepoFile,
  repoRoot,
  writesResource,
  type Binding,
  type CompositeController,
  type Deployment,
  type K8sObject,
  type NetworkPolicy,
  type Role,
  type Service,
  type Volume,
} from './k8s.js'
import { CHART, HELM_SETUP_TIMEOUT_MS, KUBE_VERSION, NAMESPACE, RELEASE, findHelm, render, renderFails, runHelm } from './helm.js'
import { parseHubConfig } from '../../hub/config.js'

before(findHelm, { timeout: HELM_SETUP_TIMEOUT_MS })

const secretRules = (role: Role) => role.rules.filter((r) => (r.resources ?? []).includes('secrets'))

test('helm lint passes, with default and with tenant values', () => {
  for (const set of [[], ['tenantMode=true', 'watchNamespaces={team-a,team-b}', 'persistence.enabled=true', 'serviceMonitor.enabled=true']]) {
    const r = runHelm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, ...set.flatMap((s) => ['--set', s])])
    assert.equal(r.status, 0, `helm lint ${set.join(' ')}:\n${r.stdout}\n${r.stderr}`)
  }
})

test('default values: the objects of one release', () => {
  const objects = render()
  const kinds = objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()
  assert.deepEqual(kinds, [
    'ClusterRole/kollect-admin',
    'ClusterRole/kollect-discovery',
    'ClusterRole/kollect-edit',
    'ClusterRole/kollect-exporter',
    'ClusterRole/kollect-view',
    'ClusterRoleBinding/kollect-discovery',
    'ClusterRoleBinding/kollect-exporter',
    'CompositeController/kollect-inventories',
    'CompositeController/kollect-profiles',
    'CompositeController/kollect-sinks',
    'CompositeController/kollect-targets',
    'Deployment/kollect',
    'NetworkPolicy/kollect-hooks',
    'Secret/kollect-hook-token',
    'Service/kollect-hooks',
    'ServiceAccount/kollect',
  ])
  for (const o of objects) {
    const clusterScoped = ['ClusterRole', 'ClusterRoleBinding', 'CompositeController'].includes(o.kind)
    assert.equal(o.metadata.namespace, clusterScoped ? undefined : NAMESPACE, `${o.kind}/${o.metadata.name}`)
    assert.equal(o.metadata.labels?.['app.kubernetes.io/instance'], RELEASE, `${o.kind}/${o.metadata.name} labels`)
  }
})

test('default values: a hardened two-container pod with the token as a file', () => {
  const objects = render()
  const d = only<Deployment>(objects, 'Deployment', 'kollect')
  assertHardenedPod(d, 'kollect-hook-token')
  assert.equal(d.spec.template.spec.containers[0]?.image, 'kollect:0.1.0', 'tag defaults to appVersion')
  const svc = only<Service>(objects, 'Service', 'kollect-hooks')
  assert.deepEqual(svc.spec.ports.map((p) => [p.name, p.port, p.targetPort]), [['http', 8080, 'http']], 'the exporter is not exposed')
  for (const [k, v] of Object.entries(svc.spec.selector)) assert.equal(d.spec.template.metadata.labels[k], v)
  assert.ok(d.spec.template.spec.volumes.find((v) => v.name === 'data')?.emptyDir)
})

test('values-large-targets.yaml: a pod sized by the same rules for a 100,000-Deployment target', () => {
  const file = `${CHART}/values-large-targets.yaml`
  const r = runHelm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, '-f', file])
  assert.equal(r.status, 0, `helm lint -f ${file}:\n${r.stdout}\n${r.stderr}`)
  const d = only<Deployment>(render([], ['-f', file]), 'Deployment', 'kollect')
  assertHardenedPod(d, 'kollect-hook-token')
  // bench/hook-sync BENCH_DEFAULTS=100000: a 250.2 MiB body, whose items are charged about 150 MB.
  assert.ok(Number(envValue(container(d, 'hooks'), 'KOLLECT_HOOK_BODY_LIMIT')) > 250.2 * 1024 * 1024)
  const exporter = container(d, 'exporter')
  const share = Number(envValue(exporter, 'KOLLECT_EXPORTER_ITEM_BUDGET_BYTES')) * Number(envValue(exporter, 'KOLLECT_EXPORTER_NAMESPACE_SHARE'))
  assert.ok(share > 150e6, `one namespace may hold ${share} bytes of items`)
})

test('the pod matches the kustomize base (probes, args, security, mounts)', () => {
  const chart = only<Deployment>(render(), 'Deployment', 'kollect')
  const base = only<Deployment>(k8sObjects(parseDocs(readRepoFile('manifests/deployment.yaml'), 'manifests/deployment.yaml')), 'Deployment')
  const shape = (d: Deployment) => ({
    pod: { ...d.spec.template.spec, serviceAccountName: undefined, containers: undefined },
    strategy: d.spec.strategy,
    replicas: d.spec.replicas,
    containers: d.spec.template.spec.containers.map((c) => ({ ...c, image: undefined, imagePullPolicy: undefined, env: undefined })),
    env: d.spec.template.spec.containers.map((c) => (c.env ?? []).filter((e) => ['PORT', 'KOLLECT_EXPORTER_PORT', 'KOLLECT_HOOK_TOKEN_FILE'].includes(e.name))),
  })
  assert.deepEqual(shape(chart), shape(base))
})

test('the hook token: generated Secret by default, or an existing one, or off', () => {
  const secret = only<K8sObject & { data: { token: string } }>(render(), 'Secret', 'kollect-hook-token')
  assert.match(Buffer.from(secret.data.token, 'base64').toString('utf8'), /^[A-Za-z0-9]{48}$/)

  const existing = render(['hookToken.existingSecret=my-token'])
  assert.equal(all(existing, 'Secret').length, 0, 'no Secret rendered for an existing one')
  assertHardenedPod(only<Deployment>(existing, 'Deployment'), 'my-token')
  for (const cc of all<CompositeController>(existing, 'CompositeController')) {
    for (const hook of Object.values(cc.spec.hooks)) assert.equal(hook.webhook.authorization?.secretRef.name, 'my-token')
  }

  const off = render(['hookToken.enabled=false'])
  assert.equal(all(off, 'Secret').length, 0)
  assertHardenedPod(only<Deployment>(off, 'Deployment'), null)
  for (const cc of all<CompositeController>(off, 'CompositeController')) {
    for (const hook of Object.values(cc.spec.hooks)) assert.equal(hook.webhook.authorization, undefined)
  }

  assert.match(renderFails(['hookToken.create=false']), /hookToken\.existingSecret/)
})

test('the CompositeControllers are compositecontrollers/*.yaml, pointed at the release', () => {
  const files = readdirSync(join(repoRoot, 'compositecontrollers')).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  const expected = files.flatMap((f) => all<CompositeController>(k8sObjects(parseDocs(readRepoFile(join('compositecontrollers', f)), f)), 'CompositeController'))
  assert.equal(expected.length, 4)
  const rendered = all<CompositeController>(render(), 'CompositeController')
  const byName = (list: CompositeController[]) => Object.fromEntries(list.map((c) => [c.metadata.name, { apiVersion: c.apiVersion, spec: c.spec }]))
  assert.deepEqual(byName(rendered), byName(expected))
  for (const cc of rendered) {
    for (const [name, hook] of Object.entries(cc.spec.hooks)) {
      assert.deepEqual(hook.webhook.authorization?.secretRef, { name: 'kollect-hook-token', namespace: NAMESPACE, key: 'token' }, `${cc.metadata.name}.${name}`)
    }
  }

  // Another release and namespace: the hooks follow the Service.
  const r = runHelm(['template', 'inv', CHART, '--namespace', 'platform', '--kube-version', KUBE_VERSION, '--set', 'service.port=9090'])
  assert.equal(r.status, 0, r.stderr)
  const other = k8sObjects(parseDocs(r.stdout, 'release inv'))
  const svc = only<Service>(other, 'Service')
  assert.equal(svc.metadata.name, 'inv-kollect-hooks')
  for (const cc of all<CompositeController>(other, 'CompositeController')) {
    assert.match(cc.metadata.name, /^inv-kollect-/)
    for (const hook of Object.values(cc.spec.hooks)) {
      assert.deepEqual(hook.webhook.service, { name: 'inv-kollect-hooks', namespace: 'platform', port: 9090, protocol: 'http' })
      assert.equal(hook.webhook.authorization?.secretRef.name, 'inv-kollect-hook-token')
    }
  }
  assert.equal(all(render(['compositeControllers.enabled=false']), 'CompositeController').length, 0)
})

test('RBAC by default: Secrets through a ClusterRole and ClusterRoleBinding, discovery cluster-wide', () => {
  const objects = render()
  // No namespaced Role: the Lease Role comes with exporters that elect (exporter.replicas > 1).
  assert.deepEqual(all<Role>(objects, 'Role'), [])
  const electing = render(['hooks.replicas=3', 'exporter.replicas=2'])
  assert.deepEqual(all<Role>(electing, 'Role').map((r) => [r.metadata.name, r.metadata.namespace]), [['kollect-leader', NAMESPACE]])
  assert.deepEqual(only<Role>(electing, 'Role', 'kollect-leader').rules, [
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kollect-exporter'], verbs: ['get', 'update'] },
  ])
  assert.deepEqual(only<Binding>(electing, 'RoleBinding', 'kollect-leader').subjects, [{ kind: 'ServiceAccount', name: 'kollect', namespace: NAMESPACE }])
  const exporter = only<Role>(objects, 'ClusterRole', 'kollect-exporter')
  assert.deepEqual(exporter.rules, [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }, { apiGroups: ['kollect.dev'], resources: ['kollectscopes'], verbs: ['get', 'list'] }])
  const binding = only<Binding>(objects, 'ClusterRoleBinding', 'kollect-exporter')
  assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'kollect-exporter' })
  assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'kollect', namespace: NAMESPACE }])
  assert.deepEqual(only<Role>(objects, 'ClusterRole', 'kollect-discovery').rules, [{ nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*'], verbs: ['get'] }])
})

test('tenantMode: a Role and RoleBinding per watched namespace, no cluster-wide Secret access', () => {
  const objects = render(['tenantMode=true', 'watchNamespaces={team-a,team-b}'])
  for (const role of all<Role>(objects, 'ClusterRole')) assert.deepEqual(secretRules(role), [], `${role.metadata.name} grants no Secrets`)
  assert.deepEqual(all<Binding>(objects, 'ClusterRoleBinding').map((b) => b.roleRef.name), ['kollect-discovery'])

  const roles = all<Role>(objects, 'Role').filter((r) => r.metadata.name !== 'kollect-leader')
  const bindings = all<Binding>(objects, 'RoleBinding').filter((b) => b.metadata.name !== 'kollect-leader')
  assert.deepEqual(roles.map((r) => r.metadata.namespace).sort(), ['team-a', 'team-b'])
  assert.deepEqual(bindings.map((b) => b.metadata.namespace).sort(), ['team-a', 'team-b'])
  for (const role of roles) {
    assert.deepEqual(role.rules, [
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'] }, { apiGroups: ['kollect.dev'], resources: ['kollectscopes'], verbs: ['get', 'list'] },
    ])
  }
  for (const b of bindings) {
    const role = roles.find((r) => r.metadata.namespace === b.metadata.namespace)
    assert.deepEqual(b.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role?.metadata.name })
    assert.deepEqual(b.subjects, [{ kind: 'ServiceAccount', name: 'kollect', namespace: NAMESPACE }])
  }
  assert.match(renderFails(['tenantMode=true']), /watchNamespaces/)
})

test('aggregated roles: edit never writes KollectScopes; admin aggregates only on request', () => {
  const objects = render()
  const edit = only<Role>(objects, 'ClusterRole', 'kollect-edit')
  const admin = only<Role>(objects, 'ClusterRole', 'kollect-admin')
  assert.equal(only<Role>(objects, 'ClusterRole', 'kollect-view').metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-view'], 'true')
  assert.equal(edit.metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-edit'], 'true')
  assert.equal(writesResource(edit, 'kollectscopes'), false)
  for (const plural of ['kollectprofiles', 'kollecttargets', 'kollectsinks', 'kollectinventories']) assert.ok(writesResource(edit, plural), plural)
  assert.ok(writesResource(admin, 'kollectscopes'))
  assert.equal(admin.metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-admin'], undefined)
  const opted = only<Role>(render(['rbac.aggregateScopesToAdmin=true']), 'ClusterRole', 'kollect-admin')
  assert.equal(opted.metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-admin'], 'true')
  // The same roles as the kustomize base.
  const baseRoles = k8sObjects(parseDocs(readRepoFile('manifests/aggregated-roles.yaml'), 'aggregated-roles'))
  for (const name of ['kollect-view', 'kollect-edit', 'kollect-admin']) {
    assert.deepEqual(only<Role>(objects, 'ClusterRole', name).rules, only<Role>(baseRoles, 'ClusterRole', name).rules, name)
  }
})

test('the NetworkPolicy admits the metacontroller namespace only, and can be turned off', () => {
  const objects = render()
  const np = only<NetworkPolicy>(objects, 'NetworkPolicy')
  const d = only<Deployment>(objects, 'Deployment')
  for (const [k, v] of Object.entries(np.spec.podSelector.matchLabels ?? {})) assert.equal(d.spec.template.metadata.labels[k], v)
  assert.deepEqual(np.spec.ingress, [{
    from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'metacontroller' } } }],
    ports: [{ protocol: 'TCP', port: 8080 }],
  }])
  assert.equal(all(render(['networkPolicy.enabled=false']), 'NetworkPolicy').length, 0)
  const moved = only<NetworkPolicy>(render(['networkPolicy.metacontrollerNamespace=mc']), 'NetworkPolicy')
  assert.deepEqual(moved.spec.ingress?.[0]?.from, [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'mc' } } }])
})

test('values.schema.json rejects wrong types, unknown keys and a second replica', () => {
  assert.match(renderFails(['replicaCount=abc']), /replicaCount/)
  assert.match(renderFails(['replicaCount=2']), /replicaCount/)
  assert.match(renderFails(['noSuchValue=1']), /noSuchValue/)
  assert.match(renderFails(['image.pullPolicy=Sometimes']), /pullPolicy/)
  assert.match(renderFails(['hookToken.unknown=true']), /unknown/)
  assert.match(renderFails(['tenantMode=yes']), /tenantMode/)
})

test('kubeVersion: Kubernetes 1.30 or later', () => {
  const r = runHelm(['template', RELEASE, CHART, '--kube-version', '1.29.0'])
  assert.notEqual(r.status, 0)
  assert.match(r.stderr, /kubeVersion/)
})

test('serviceMonitor.enabled renders a ServiceMonitor for the hooks /metrics', () => {
  assert.equal(all(render(), 'ServiceMonitor').length, 0)
  const objects = render(['serviceMonitor.enabled=true', 'serviceMonitor.labels.release=prom'])
  const sm = only<K8sObject & { spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string; path: string }[] } }>(objects, 'ServiceMonitor')
  assert.equal(sm.apiVersion, 'monitoring.coreos.com/v1')
  assert.equal(sm.metadata.labels?.release, 'prom')
  const svc = only<Service>(objects, 'Service')
  for (const [k, v] of Object.entries(sm.spec.selector.matchLabels)) assert.equal(svc.metadata.labels?.[k], v, `the ServiceMonitor selects the hooks Service by ${k}`)
  assert.deepEqual(sm.spec.endpoints.map((e) => [e.port, e.path]), [['http', '/metrics']])
})

test('persistence.enabled puts /data on a PersistentVolumeClaim that outlives the release', () => {
  const objects = render(['persistence.enabled=true', 'persistence.size=20Gi', 'persistence.storageClass=fast'])
  const pvc = only<K8sObject & { spec: { resources: { requests: { storage: string } }; storageClassName: string; accessModes: string[] } }>(objects, 'PersistentVolumeClaim')
  assert.equal(pvc.spec.resources.requests.storage, '20Gi')
  assert.equal(pvc.spec.storageClassName, 'fast')
  assert.deepEqual(pvc.spec.accessModes, ['ReadWriteOnce'])
  assert.equal(pvc.metadata.annotations?.['helm.sh/resource-policy'], 'keep', 'helm uninstall must not delete the embedded repository')
  const d = only<Deployment>(objects, 'Deployment')
  assert.equal(d.spec.template.spec.volumes.find((v) => v.name === 'data')?.persistentVolumeClaim?.claimName, pvc.metadata.name)
  assert.equal(d.spec.strategy.type, 'Recreate', 'a ReadWriteOnce volume cannot be attached to two pods')
})

test('settings reach both containers: cluster, allowPrivateSinks, extraEnv, image', () => {
  const d = only<Deployment>(render([
    'cluster=lab-west', 'allowPrivateSinks=true',
    'extraEnv[0].name=KOLLECT_SECRET_CACHE_MS', 'extraEnv[0].value=5000',
    'extraEnv[1].name=PG_DSN', 'extraEnv[1].valueFrom.secretKeyRef.name=pg', 'extraEnv[1].valueFrom.secretKeyRef.key=dsn',
    'image.repository=registry.example/kollect', 'image.tag=1.2.3', 'image.pullPolicy=Never',
  ]), 'Deployment')
  for (const c of d.spec.template.spec.containers) {
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]))
    assert.equal(env.KOLLECT_CLUSTER, 'lab-west', c.name)
    assert.equal(env.KOLLECT_ALLOW_PRIVATE_SINKS, 'true', c.name)
    assert.equal(env.KOLLECT_SECRET_CACHE_MS, '5000', `${c.name}: an env value is always a string`)
    assert.deepEqual(c.env?.find((e) => e.name === 'PG_DSN'), { name: 'PG_DSN', valueFrom: { secretKeyRef: { name: 'pg', key: 'dsn' } } })
    assert.equal(c.image, 'registry.example/kollect:1.2.3')
    assert.equal(c.imagePullPolicy, 'Never')
  }
})

test('hooks.replicas=1 is the single pod, object for object; hooks.replicas=0 is refused', () => {
  const withoutToken = (objects: K8sObject[]) => objects.filter((o) => o.kind !== 'Secret')
  assert.deepEqual(withoutToken(render(['hooks.replicas=1'])), withoutToken(render()))
  assert.match(renderFails(['hooks.replicas=0']), /replicas/)
})

type SpreadConstraint = { topologyKey: string; whenUnsatisfiable: string; labelSelector: { matchLabels: Record<string, string> } }
type SpreadDeployment = Deployment & {
  spec: { strategy: { rollingUpdate?: { maxUnavailable: number } }; template: { spec: { topologySpreadConstraints?: SpreadConstraint[] } } }
}
type Pdb = K8sObject & { spec: { maxUnavailable?: number; minAvailable?: number; selector: { matchLabels: Record<string, string> } } }
const selects = (selector: Record<string, string>, labels: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v)

test('hooks.replicas=3: a hooks Deployment with a PDB and spread, one exporter Deployment behind its own Service', () => {
  const objects = render(['hooks.replicas=3'])
  assert.deepEqual(all(objects, 'Deployment').map((d) => d.metadata.name).sort(), ['kollect-exporter', 'kollect-hooks'], 'no single pod beside them')
  const hooks = only<SpreadDeployment>(objects, 'Deployment', 'kollect-hooks')
  const exporter = only<Deployment>(objects, 'Deployment', 'kollect-exporter')
  const hooksPod = hooks.spec.template.metadata.labels
  const exporterPod = exporter.spec.template.metadata.labels

  assert.equal(hooks.spec.replicas, 3)
  assert.equal(hooks.spec.strategy.type, 'RollingUpdate')
  assert.deepEqual(hooks.spec.template.spec.containers.map((c) => c.name), ['hooks'])
  assert.ok(!hooks.spec.template.spec.volumes.some((v) => v.name === 'data'), 'the hooks keep nothing on disk')
  const h = container(hooks, 'hooks')
  assert.equal(envValue(h, 'KOLLECT_EXPORTER_URL'), 'http://kollect-exporter:8081')
  assert.equal(envValue(h, 'KOLLECT_HOOK_TOKEN_FILE'), '/var/run/secrets/kollect/hook-token/token')
  assert.ok(h.resources?.requests?.cpu && h.resources.requests.memory, 'HPA-ready: cpu and memory requests')
  const spread = hooks.spec.template.spec.topologySpreadConstraints ?? []
  assert.deepEqual(spread.map((c) => [c.topologyKey, c.whenUnsatisfiable]), [['kubernetes.io/hostname', 'ScheduleAnyway'], ['topology.kubernetes.io/zone', 'ScheduleAnyway']])
  for (const c of spread) assert.ok(selects(c.labelSelector.matchLabels, hooksPod) && !selects(c.labelSelector.matchLabels, exporterPod), 'spread counts hooks pods only')

  const pdb = only<Pdb>(objects, 'PodDisruptionBudget', 'kollect-hooks')
  assert.equal(pdb.apiVersion, 'policy/v1')
  assert.equal(pdb.spec.maxUnavailable, 1)
  assert.ok(selects(pdb.spec.selector.matchLabels, hooksPod) && !selects(pdb.spec.selector.matchLabels, exporterPod))

  assert.equal(exporter.spec.replicas, 1)
  assert.equal(exporter.spec.strategy.type, 'Recreate', 'never two exporters side by side')
  assert.deepEqual(exporter.spec.template.spec.containers.map((c) => c.name), ['exporter'])
  const e = container(exporter, 'exporter')
  assert.equal(envValue(e, 'KOLLECT_EXPORTER_HOST'), '0.0.0.0')
  assert.equal(envValue(e, 'KOLLECT_HOOK_TOKEN_FILE'), '/var/run/secrets/kollect/hook-token/token', 'off loopback only with the token')
  assert.equal(envValue(e, 'KOLLECT_HOOK_AUTH'), undefined)
  assert.deepEqual(e.ports?.map((p) => [p.name, p.containerPort]), [['exporter', 8081]])
  assert.deepEqual(e.livenessProbe?.httpGet, { path: '/healthz', port: 'exporter' })
  assert.equal(exporter.spec.template.spec.volumes.find((v) => v.name === 'data')?.emptyDir !== undefined, true)
  for (const d of [hooks, exporter]) {
    assert.equal(d.spec.template.spec.securityContext.runAsNonRoot, true, d.metadata.name)
    for (const c of d.spec.template.spec.containers) assert.equal(c.securityContext?.readOnlyRootFilesystem, true, `${d.metadata.name}/${c.name}`)
  }

  const hooksSvc = only<Service>(objects, 'Service', 'kollect-hooks')
  assert.ok(selects(hooksSvc.spec.selector, hooksPod) && !selects(hooksSvc.spec.selector, exporterPod), 'the hooks Service reaches the hooks pods only')
  const exporterSvc = only<Service>(objects, 'Service', 'kollect-exporter')
  assert.ok(selects(exporterSvc.spec.selector, exporterPod) && !selects(exporterSvc.spec.selector, hooksPod))
  assert.deepEqual(exporterSvc.spec.ports.map((p) => [p.port, p.targetPort]), [[8081, 'exporter']])

  const hooksNp = only<NetworkPolicy>(objects, 'NetworkPolicy', 'kollect-hooks')
  assert.ok(selects(hooksNp.spec.podSelector.matchLabels ?? {}, hooksPod) && !selects(hooksNp.spec.podSelector.matchLabels ?? {}, exporterPod))
  const exporterNp = only<NetworkPolicy>(objects, 'NetworkPolicy', 'kollect-exporter')
  assert.ok(selects(exporterNp.spec.podSelector.matchLabels ?? {}, exporterPod))
  const from = exporterNp.spec.ingress?.[0]?.from ?? []
  assert.equal(exporterNp.spec.ingress?.length, 1)
  assert.deepEqual(exporterNp.spec.ingress?.[0]?.ports, [{ protocol: 'TCP', port: 8081 }])
  assert.equal(from.length, 1)
  const peer = from[0]?.podSelector as { matchLabels: Record<string, string> }
  assert.equal(from[0]?.namespaceSelector, undefined, 'pods of this namespace only')
  assert.ok(selects(peer.matchLabels, hooksPod) && !selects(peer.matchLabels, exporterPod), 'only the hooks pods reach the exporter')
  // The exporter's policy stays when the hooks' one is turned off: off loopback it is the exporter's fence.
  assert.deepEqual(all(render(['hooks.replicas=3', 'networkPolicy.enabled=false']), 'NetworkPolicy').map((n) => n.metadata.name), ['kollect-exporter'])
  assert.equal(only<Deployment>(render(['hooks.replicas=3', 'replicaCount=0']), 'Deployment', 'kollect-exporter').spec.replicas, 0)
  assert.match(renderFails(['hooks.replicas=3', 'hookToken.enabled=false']), /hooks\.replicas > 1 needs hookToken\.enabled=true/)
})

test('hooks.replicas=3: custom spread, persistence on the exporter only, lint passes', () => {
  const objects = render([
    'hooks.replicas=3', 'persistence.enabled=true', 'hooks.topologySpreadConstraints[0].maxSkew=2',
    'hooks.topologySpreadConstraints[0].topologyKey=rack', 'hooks.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule',
  ])
  const hooks = only<SpreadDeployment>(objects, 'Deployment', 'kollect-hooks')
  assert.deepEqual(hooks.spec.template.spec.topologySpreadConstraints?.map((c) => c.topologyKey), ['rack'])
  assert.ok(!hooks.spec.template.spec.volumes.some((v) => v.persistentVolumeClaim))
  assert.equal(only<Deployment>(objects, 'Deployment', 'kollect-exporter').spec.template.spec.volumes.find((v) => v.name === 'data')?.persistentVolumeClaim?.claimName, 'kollect-data')
  const r = runHelm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, '--set', 'hooks.replicas=3'])
  assert.equal(r.status, 0, r.stdout + r.stderr)
})

test('hooks.replicas=3, exporter.replicas=2: an active exporter and a standby, each sent every report', () => {
  const objects = render(['hooks.replicas=3', 'exporter.replicas=2'])
  const hooks = only<Deployment>(objects, 'Deployment', 'kollect-hooks')
  const exporter = only<SpreadDeployment & { spec: { minReadySeconds?: number } }>(objects, 'Deployment', 'kollect-exporter')
  const hooksPod = hooks.spec.template.metadata.labels
  const exporterPod = exporter.spec.template.metadata.labels
  assert.equal(exporter.spec.replicas, 2)
  assert.equal(exporter.spec.strategy.type, 'RollingUpdate', 'a standby is a pod beside the active one')
  assert.deepEqual(exporter.spec.strategy.rollingUpdate, { maxSurge: 1, maxUnavailable: 0 })
  assert.ok((exporter.spec.minReadySeconds ?? 0) > 60, 'a new pod waits out the 60s resync, so it holds the state before an old one goes')

  const e = container(exporter, 'exporter')
  assert.equal(envValue(e, 'KOLLECT_LEADER_ELECTION'), 'true')
  assert.equal(envValue(e, 'KOLLECT_LEASE_NAME'), 'kollect-exporter')
  const fieldOf = (name: string) => (e.env?.find((v) => v.name === name) as { valueFrom?: { fieldRef?: { fieldPath: string } } } | undefined)?.valueFrom?.fieldRef?.fieldPath
  assert.deepEqual([fieldOf('POD_NAME'), fieldOf('POD_NAMESPACE')], ['metadata.name', 'metadata.namespace'], 'the holder identity and the Lease namespace config.ts reads')
  const h = container(hooks, 'hooks')
  assert.equal(envValue(h, 'KOLLECT_EXPORTER_PEERS'), 'kollect-exporter-peers.kollect-system.svc:8081')
  assert.equal(envValue(h, 'KOLLECT_EXPORTER_URL'), 'http://kollect-exporter:8081', 'read calls still go through the Service')

  const peers = only<Service & { spec: { clusterIP?: string; publishNotReadyAddresses?: boolean } }>(objects, 'Service', 'kollect-exporter-peers')
  assert.equal(peers.spec.clusterIP, 'None', 'headless: one address per pod')
  assert.equal(peers.spec.publishNotReadyAddresses, true, 'a starting pod is listed before it is ready')
  assert.ok(selects(peers.spec.selector, exporterPod) && !selects(peers.spec.selector, hooksPod))
  assert.deepEqual(peers.spec.ports.map((p) => [p.port, p.targetPort]), [[8081, 'exporter']])

  const pdb = only<Pdb>(objects, 'PodDisruptionBudget', 'kollect-exporter')
  assert.equal(pdb.spec.minAvailable, 1)
  assert.ok(selects(pdb.spec.selector.matchLabels, exporterPod) && !selects(pdb.spec.selector.matchLabels, hooksPod))

  // The Lease Role is bound to the service account the exporter pods run as.
  const sa = exporter.spec.template.spec.serviceAccountName
  const lease = only<Role>(objects, 'Role', 'kollect-leader')
  assert.ok(lease.rules.some((r) => r.resourceNames?.includes('kollect-exporter') && r.verbs.includes('update')))
  assert.deepEqual(only<Binding>(objects, 'RoleBinding', 'kollect-leader').subjects, [{ kind: 'ServiceAccount', name: sa, namespace: NAMESPACE }])

  // Still only the hooks pods reach the exporter port, peers Service or not.
  const np = only<NetworkPolicy>(objects, 'NetworkPolicy', 'kollect-exporter')
  assert.ok(selects(np.spec.podSelector.matchLabels ?? {}, exporterPod))
  assert.equal(np.spec.ingress?.length, 1)
  assert.deepEqual(np.spec.ingress?.[0]?.ports, [{ protocol: 'TCP', port: 8081 }])
  const from = np.spec.ingress?.[0]?.from ?? []
  assert.equal(from.length, 1)
  assert.equal(from[0]?.namespaceSelector, undefined)
  assert.ok(selects((from[0]?.podSelector as { matchLabels: Record<string, string> }).matchLabels, hooksPod))

  // One exporter (the default) renders none of it.
  const one = render(['hooks.replicas=3'])
  assert.equal(envValue(container(only<Deployment>(one, 'Deployment', 'kollect-hooks'), 'hooks'), 'KOLLECT_EXPORTER_PEERS'), undefined)
  assert.equal(envValue(container(only<Deployment>(one, 'Deployment', 'kollect-exporter'), 'exporter'), 'KOLLECT_LEADER_ELECTION'), undefined)
  assert.deepEqual(all(one, 'PodDisruptionBudget').map((p) => p.metadata.name), ['kollect-hooks'])
  assert.equal(all(one, 'Service').some((s) => s.metadata.name === 'kollect-exporter-peers'), false)
  assert.equal(only<Deployment>(render(['hooks.replicas=3', 'exporter.replicas=2', 'replicaCount=0']), 'Deployment', 'kollect-exporter').spec.replicas, 0)
  const r = runHelm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, '--set', 'hooks.replicas=3', '--set', 'exporter.replicas=2'])
  assert.equal(r.status, 0, r.stdout + r.stderr)
})

test('exporter.replicas > 1 is refused without the split layout, with persistence, and above 3', () => {
  assert.match(renderFails(['exporter.replicas=2']), /exporter\.replicas > 1 needs hooks\.replicas > 1/)
  assert.match(renderFails(['hooks.replicas=3', 'exporter.replicas=2', 'persistence.enabled=true']), /needs persistence\.enabled=false/)
  assert.match(renderFails(['hooks.replicas=3', 'exporter.replicas=4']), /exporter\.replicas|maximum/)
  assert.match(renderFails(['hooks.replicas=3', 'exporter.replicas=0']), /exporter\.replicas|minimum/)
})

test('--include-crds: the chart installs the five CRDs of manifests/crds', () => {
  const crds = all(render([], ['--include-crds']), 'CustomResourceDefinition')
  const expected = readdirSync(join(repoRoot, 'manifests', 'crds'))
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .flatMap((f) => k8sObjects(parseDocs(readRepoFile(join('manifests', 'crds', f)), f)))
  const byName = (list: K8sObject[]) => Object.fromEntries(list.map((c) => [c.metadata.name, c]))
  assert.deepEqual(byName(crds), byName(expected))
  assert.ok(existsSync(join(CHART, 'crds')))
})

describe('hub mode: hub.enabled renders the hub beside the hooks and exporter', () => {
  // What an operator writes: Secret names only, never their content.
  const HUB_VALUES = `hub:
  enabled: true
  nats: {url: "nats://hub-nats:4222", stream: FLEET, existingSecret: hub-nats-user}
  clusters: [east, west]
  sinks:
    - name: fleet-git
      spec: {type: git, git: {url: "https://git.example.com/fleet.git", branch: main}}
      existingSecret: fleet-git-credentials
    - name: fleet-db
      spec: {type: postgres, postgres: {table: fleet_items}}
      existingSecret: fleet-db-dsn
`
  const dir = mkdtempSync(join(tmpdir(), 'kollect-hub-values-'))
  const valuesFile = join(dir, 'hub.yaml')
  before(() => writeFileSync(valuesFile, HUB_VALUES))
  after(() => rmSync(dir, { recursive: true, force: true }))
  const renderHub = (set: string[] = []) => render(set, ['-f', valuesFile])
  type HubDeployment = Deployment & { spec: { template: { metadata: { annotations?: Record<string, string> }; spec: { automountServiceAccountToken?: boolean } } } }
  type ConfigMap = K8sObject & { data: Record<string, string> }

  test('objects: hub ConfigMap, Deployment, metrics Service and volume, and the single pod still there', () => {
    const objects = renderHub()
    const names = objects.map((o) => `${o.kind}/${o.metadata.name}`)
    const expected = ['ConfigMap/kollect-hub', 'Deployment/kollect-hub', 'Service/kollect-hub', 'PersistentVolumeClaim/kollect-hub-data', 'Deployment/kollect', 'Service/kollect-hooks']
    for (const n of expected) assert.ok(names.includes(n), n)
    assert.ok(!render().some((o) => o.metadata.name.startsWith('kollect-hub')), 'hub.enabled defaults to false')
    const r = runHelm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, '-f', valuesFile])
    assert.equal(r.status, 0, r.stdout + r.stderr)
  })

  test('the ConfigMap is a hub config file the hub accepts, with Secret mount paths and no credentials', () => {
    const objects = renderHub()
    const cm = only<ConfigMap>(objects, 'ConfigMap', 'kollect-hub')
    assert.deepEqual(Object.keys(cm.data), ['hub.yaml'])
    assert.deepEqual(parseHubConfig(cm.data['hub.yaml']!), {
      nats: { url: 'nats://hub-nats:4222', stream: 'FLEET', subject: 'kollect', durable: 'kollect-hub', ackWaitSeconds: 600, secretDir: '/etc/kollect/secrets/nats' },
      clusters: ['east', 'west'],
      dataDir: '/data',
      sinks: [
        { name: 'fleet-git', spec: { type: 'git', git: { url: 'https://git.example.com/fleet.git', branch: 'main' } }, secretDir: '/etc/kollect/secrets/sinks/fleet-git' },
        { name: 'fleet-db', spec: { type: 'postgres', postgres: { table: 'fleet_items' } }, secretDir: '/etc/kollect/secrets/sinks/fleet-db' },
      ],
    })
    // Each secretDir is where the named Secret is mounted, and the config file where the hub reads it.
    const d = only<HubDeployment>(objects, 'Deployment', 'kollect-hub')
    const hub = container(d, 'hub')
    const mountOf = (volume: string) => hub.volumeMounts?.find((m) => m.name === volume)
    const secretAt = (dir: string) => {
      const mount = hub.volumeMounts?.find((m) => m.mountPath === dir)
      assert.equal(mount?.readOnly, true, dir)
      return d.spec.template.spec.volumes.find((v) => v.name === mount?.name)?.secret?.secretName
    }
    assert.equal(secretAt('/etc/kollect/secrets/nats'), 'hub-nats-user')
    assert.equal(secretAt('/etc/kollect/secrets/sinks/fleet-git'), 'fleet-git-credentials')
    assert.equal(secretAt('/etc/kollect/secrets/sinks/fleet-db'), 'fleet-db-dsn')
    assert.equal(envValue(hub, 'KOLLECT_HUB_CONFIG'), `${mountOf('config')?.mountPath}/hub.yaml`)
    assert.equal((d.spec.template.spec.volumes as (Volume & { configMap?: { name: string } })[]).find((v) => v.name === 'config')?.configMap?.name, cm.metadata.name)
    // A changed config file restarts the hub, which reads it once.
    const other = only<HubDeployment>(renderHub(['hub.clusters={east,west,north}']), 'Deployment', 'kollect-hub')
    assert.notEqual(other.spec.template.metadata.annotations?.['checksum/config'], d.spec.template.metadata.annotations?.['checksum/config'])
    // Without a Secret nothing is mounted and the file names no secretDir.
    const bare = renderHub(['hub.nats.existingSecret=', 'hub.sinks[0].existingSecret=', 'hub.sinks[1].existingSecret='])
    assert.ok(!/secretDir/.test(only<ConfigMap>(bare, 'ConfigMap', 'kollect-hub').data['hub.yaml']!))
    assert.deepEqual(only<HubDeployment>(bare, 'Deployment', 'kollect-hub').spec.template.spec.volumes.filter((v) => v.secret), [])
  })

  test('the hub pod: one replica, Recreate, main-hub.js, probes, hardened like the others, no API token', () => {
    const objects = renderHub()
    const d = only<HubDeployment>(objects, 'Deployment', 'kollect-hub')
    assert.equal(d.spec.replicas, 1)
    assert.equal(d.spec.strategy.type, 'Recreate', 'one owner of the durable consumer at a time')
    const hub = container(d, 'hub')
    assert.deepEqual(d.spec.template.spec.containers.map((c) => c.name), ['hub'])
    assert.deepEqual(hub.args, ['node', 'dist/server/main-hub.js'])
    assert.equal(hub.image, container(only<Deployment>(objects, 'Deployment', 'kollect'), 'hooks').image, 'the same image')
    assert.deepEqual(hub.readinessProbe?.httpGet, { path: '/readyz', port: 'http' })
    assert.deepEqual(hub.livenessProbe?.httpGet, { path: '/healthz', port: 'http' })
    assert.deepEqual(hub.ports?.map((p) => [p.name, p.containerPort]), [['http', 8080]])
    assert.equal(envValue(hub, 'PORT'), '8080')
    const single = only<Deployment>(objects, 'Deployment', 'kollect')
    assert.deepEqual(d.spec.template.spec.securityContext, single.spec.template.spec.securityContext)
    assert.deepEqual(hub.securityContext, container(single, 'hooks').securityContext)
    assert.equal(hub.securityContext?.readOnlyRootFilesystem, true)
    assert.equal(d.spec.template.spec.automountServiceAccountToken, false)
    assert.notEqual(d.spec.template.spec.serviceAccountName, 'kollect', 'not the service account that reads Secrets')
    assert.deepEqual(hub.volumeMounts?.filter((m) => !m.readOnly).map((m) => m.mountPath).sort(), ['/data', '/tmp'])
    assert.equal(d.spec.template.spec.volumes.find((v) => v.name === 'data')?.persistentVolumeClaim?.claimName, 'kollect-hub-data')
    const noVolume = only<HubDeployment>(renderHub(['hub.persistence.enabled=false']), 'Deployment', 'kollect-hub')
    assert.ok(noVolume.spec.template.spec.volumes.find((v) => v.name === 'data')?.emptyDir)
  })

  test('selectors: the metrics Service reaches the hub pod only, and nothing of the hooks reaches it', () => {
    for (const layout of [[], ['hooks.replicas=3']]) {
      const objects = renderHub([...layout, 'serviceMonitor.enabled=true'])
      const hubPod = only<Deployment>(objects, 'Deployment', 'kollect-hub').spec.template.metadata.labels
      const svc = only<Service>(objects, 'Service', 'kollect-hub')
      assert.ok(selects(svc.spec.selector, hubPod))
      assert.deepEqual(svc.spec.ports.map((p) => [p.name, p.port, p.targetPort]), [['metrics', 8080, 'http']])
      for (const d of all<Deployment>(objects, 'Deployment').filter((x) => x.metadata.name !== 'kollect-hub')) {
        assert.ok(!selects(d.spec.selector.matchLabels, hubPod), `${layout.join()}: Deployment ${d.metadata.name} would own the hub pod`)
        assert.ok(!selects(svc.spec.selector, d.spec.template.metadata.labels), `${layout.join()}: the hub Service reaches ${d.metadata.name}`)
      }
      for (const s of all<Service>(objects, 'Service').filter((x) => x.metadata.name !== 'kollect-hub')) {
        assert.ok(!selects(s.spec.selector, hubPod), `${layout.join()}: Service ${s.metadata.name} reaches the hub`)
      }
      for (const n of all<NetworkPolicy>(objects, 'NetworkPolicy')) assert.ok(!selects(n.spec.podSelector.matchLabels ?? {}, hubPod), `${layout.join()}: NetworkPolicy ${n.metadata.name}`)
      type ServiceMonitor = K8sObject & { spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] } }
      const sm = all<ServiceMonitor>(objects, 'ServiceMonitor').find((m) => m.metadata.name === 'kollect-hub')
      assert.ok(sm && selects(sm.spec.selector.matchLabels, svc.metadata.labels ?? {}) && sm.spec.endpoints[0]?.port === 'metrics')
    }
  })

  test('missing or unsafe values fail with a message that says what to set', () => {
    const fails = (set: string[]) => {
      const r = runHelm(['template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, '-f', valuesFile, ...set.flatMap((s) => ['--set', s])])
      assert.notEqual(r.status, 0, `${set.join(' ')} should fail`)
      return r.stderr
    }
    assert.match(fails(['hub.nats.url=']), /hub\.enabled=true needs hub\.nats\.url/)
    assert.match(fails(['hub.clusters=null']), /needs hub\.clusters/)
    assert.match(fails(['hub.sinks=null']), /needs hub\.sinks/)
    assert.match(fails(['hub.nats.url=nats://hub:s3cret@hub-nats:4222']), /hub\.nats\.url carries credentials.*existingSecret/)
    assert.match(fails(['hub.sinks[0].spec.git.url=https://bot:s3cret@git.example.com/fleet.git']), /hub\.sinks\[0\] \(fleet-git\): spec\.git\.url carries credentials/)
    assert.match(fails(['hub.sinks[1].spec.secretRef.name=fleet-db-dsn']), /hub\.sinks\[1\] \(fleet-db\): spec\.secretRef is not read by the hub.*existingSecret/)
    assert.match(fails(['hub.sinks[1].name=fleet-git']), /fleet-git is used twice/)
    assert.match(fails(['hub.sinks[1].spec.type=s3']), /type/)
    assert.match(fails(['hub.unknown=1']), /unknown/)
  })
})
