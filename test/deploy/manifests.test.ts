// The deployable artefacts without a cluster: every YAML parses, the chart's CRDs are the
// manifests' CRDs byte for byte, the kustomize base is hardened and least-privilege, and the
// Dockerfile's runtime file set actually starts both processes.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { spawnSync } from 'node:child_process'
import { freePort } from '../support/ports.js'
import { pollUntil, startServerProcess, waitForExit } from '../support/process.js'
import {
  KOLLECT_PLURALS,
  all,
  assertHardenedPod,
  container,
  k8sObjects,
  only,
  parseDocs,
  readRepoFile,
  repoRoot,
  verbsOn,
  writesResource,
  yamlFilesUnder,
  type Binding,
  type CompositeController,
  type Deployment,
  type K8sObject,
  type NetworkPolicy,
  type Role,
  type Service,
} from './k8s.js'

const YAML_DIRS = ['manifests', 'compositecontrollers', 'charts/kollect/crds', 'examples/crs', 'examples/sinks', 'examples/quickstart']
const NAMESPACE = 'kollect-system'

/** The objects `kubectl apply -k manifests` would create, read through the kustomizations. */
function kustomizeObjects(dir: string): K8sObject[] {
  const kustomization = parseDocs(readRepoFile(join(dir, 'kustomization.yaml')), `${dir}/kustomization.yaml`)[0] as { resources: string[] }
  return kustomization.resources.flatMap((r) => {
    const path = join(dir, r)
    if (existsSync(join(repoRoot, path, 'kustomization.yaml'))) return kustomizeObjects(path)
    return k8sObjects(parseDocs(readRepoFile(path), path))
  })
}

const base = kustomizeObjects('manifests')

test('every YAML file under manifests/, compositecontrollers/, charts/kollect/crds/ and examples/ parses', () => {
  let files = 0
  for (const dir of YAML_DIRS) {
    for (const file of yamlFilesUnder(dir)) {
      const docs = parseDocs(readRepoFile(file), file)
      assert.ok(docs.length > 0, `${file} has no document`)
      for (const doc of docs) {
        const o = doc as Partial<K8sObject> & { resources?: unknown }
        if (file.endsWith('kustomization.yaml')) assert.ok(Array.isArray(o.resources), `${file}: resources`)
        else assert.ok(o.apiVersion && o.kind && o.metadata?.name, `${file}: apiVersion, kind and metadata.name`)
      }
      files++
    }
  }
  assert.ok(files >= 25, `found only ${files} YAML files`)
})

test('the chart ships byte-identical copies of manifests/crds (scripts/sync-chart-crds.sh)', () => {
  const crds = (dir: string) => readdirSync(join(repoRoot, dir)).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').sort()
  const source = crds('manifests/crds')
  assert.equal(source.length, 5)
  assert.deepEqual(crds('charts/kollect/crds'), source, 'the same CRD files; run scripts/sync-chart-crds.sh')
  assert.ok(!existsSync(join(repoRoot, 'charts/kollect/crds/kustomization.yaml')), 'Helm would send a kustomization.yaml to the API server')
  for (const f of source) {
    assert.ok(
      readFileSync(join(repoRoot, 'manifests/crds', f)).equals(readFileSync(join(repoRoot, 'charts/kollect/crds', f))),
      `charts/kollect/crds/${f} differs from manifests/crds/${f}; run scripts/sync-chart-crds.sh`,
    )
  }
})

test('the kustomize base lists every manifest once and includes the CRDs and CompositeControllers', () => {
  const kustomization = parseDocs(readRepoFile('manifests/kustomization.yaml'), 'kustomization')[0] as { resources: string[]; namespace?: string }
  assert.equal(kustomization.namespace, undefined, 'a namespace transformer would also stamp cluster-scoped CompositeControllers')
  assert.ok(kustomization.resources.includes('crds'))
  assert.ok(kustomization.resources.includes('../compositecontrollers'))
  const files = readdirSync(join(repoRoot, 'manifests')).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml' && !f.includes('.example.'))
  assert.deepEqual(kustomization.resources.filter((r) => r.endsWith('.yaml')).sort(), files.sort())
  const kinds = new Set(base.map((o) => o.kind))
  for (const kind of ['Namespace', 'CustomResourceDefinition', 'CompositeController', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Service', 'Deployment', 'NetworkPolicy']) {
    assert.ok(kinds.has(kind), `the base has a ${kind}`)
  }
  assert.equal(all(base, 'CustomResourceDefinition').length, 5)
  assert.equal(all(base, 'CompositeController').length, 4)
  assert.equal(all(base, 'Secret').length, 0, 'no static hook token in the manifests')
  for (const o of base) {
    const clusterScoped = ['Namespace', 'CustomResourceDefinition', 'CompositeController', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind)
    assert.equal(o.metadata.namespace, clusterScoped ? undefined : NAMESPACE, `${o.kind} ${o.metadata.name}: namespace`)
  }
})

test('the Deployment: hooks and exporter, non-root, read-only root filesystem, token from a file', () => {
  const d = only<Deployment>(base, 'Deployment', 'kollect')
  assertHardenedPod(d, 'kollect-hook-token')
  assert.equal(d.spec.template.spec.serviceAccountName, only(base, 'ServiceAccount').metadata.name)
  assert.ok(d.spec.template.spec.volumes.find((v) => v.name === 'data')?.emptyDir, '/data is an emptyDir by default')
  assert.ok(!container(d, 'hooks').volumeMounts?.some((m) => m.mountPath === '/data'), 'the hooks container writes no data')
})

test('the Service exposes the hooks port only, never the exporter', () => {
  const svc = only<Service>(base, 'Service', 'kollect-hooks')
  const d = only<Deployment>(base, 'Deployment', 'kollect')
  assert.deepEqual(svc.spec.ports.map((p) => [p.port, p.targetPort]), [[8080, 'http']])
  for (const [k, v] of Object.entries(svc.spec.selector)) assert.equal(d.spec.template.metadata.labels[k], v, `selector ${k}`)
  const named = d.spec.template.spec.containers.filter((c) => c.ports?.some((p) => p.name === 'http'))
  assert.deepEqual(named.map((c) => c.name), ['hooks'], 'targetPort http names a hooks port only')
  assert.ok(!svc.spec.ports.some((p) => p.port === 8081 || p.targetPort === 8081))
})

test('the CompositeControllers call the Service and send the token the pod reads', () => {
  const svc = only<Service>(base, 'Service', 'kollect-hooks')
  const d = only<Deployment>(base, 'Deployment', 'kollect')
  const tokenSecret = d.spec.template.spec.volumes.find((v) => v.secret)?.secret?.secretName
  for (const cc of all<CompositeController>(base, 'CompositeController')) {
    for (const [name, hook] of Object.entries(cc.spec.hooks)) {
      const where = `${cc.metadata.name}.${name}`
      assert.equal(hook.version, 'v2', where)
      assert.deepEqual(hook.webhook.service, { name: svc.metadata.name, namespace: svc.metadata.namespace, port: svc.spec.ports[0]?.port, protocol: 'http' }, where)
      assert.deepEqual(hook.webhook.authorization?.secretRef, { name: tokenSecret, namespace: NAMESPACE, key: 'token' }, where)
    }
  }
})

test('RBAC: the pod gets discovery, per-namespace Secret reads and its Lease only', () => {
  const discovery = only<Role>(base, 'ClusterRole', 'kollect-discovery')
  assert.deepEqual(discovery.rules, [{ nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*'], verbs: ['get'] }])
  const exporter = only<Role>(base, 'ClusterRole', 'kollect-exporter')
  assert.deepEqual(exporter.rules, [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }, { apiGroups: ['kollect.dev'], resources: ['kollectscopes'], verbs: ['get', 'list'] }])

  const bindings = [...all<Binding>(base, 'ClusterRoleBinding'), ...all<Binding>(base, 'RoleBinding')]
  assert.deepEqual(bindings.map((b) => b.roleRef.name), ['kollect-discovery', 'kollect-leader'], 'kollect-exporter is not bound cluster-wide by the base')
  // Leader election: the exporter's one Lease, in its own namespace.
  assert.deepEqual(only<Role>(base, 'Role', 'kollect-leader').rules, [
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['kollect-exporter'], verbs: ['get', 'update'] },
  ])
  for (const b of bindings) assert.deepEqual(b.subjects, [{ kind: 'ServiceAccount', name: 'kollect', namespace: NAMESPACE }])

  const example = k8sObjects(parseDocs(readRepoFile('manifests/exporter-secrets-rolebinding.example.yaml'), 'example'))
  const rb = only<Binding>(example, 'RoleBinding')
  assert.equal(rb.metadata.namespace, 'team-a')
  assert.deepEqual(rb.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'kollect-exporter' })
  assert.deepEqual(rb.subjects, [{ kind: 'ServiceAccount', name: 'kollect', namespace: NAMESPACE }])
})

test('aggregated roles: view reads, edit writes all but KollectScopes, admin is not aggregated', () => {
  const crdPlurals = all<K8sObject & { spec: { names: { plural: string } } }>(base, 'CustomResourceDefinition').map((c) => c.spec.names.plural).sort()
  assert.deepEqual(crdPlurals, [...KOLLECT_PLURALS].sort())

  const view = only<Role>(base, 'ClusterRole', 'kollect-view')
  const edit = only<Role>(base, 'ClusterRole', 'kollect-edit')
  const admin = only<Role>(base, 'ClusterRole', 'kollect-admin')
  assert.equal(view.metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-view'], 'true')
  assert.equal(edit.metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-edit'], 'true')
  assert.equal(admin.metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-admin'], undefined,
    'scope writes must not reach every namespace admin')

  for (const plural of KOLLECT_PLURALS) {
    for (const role of [view, edit, admin]) {
      assert.deepEqual(verbsOn(role, 'kollect.dev', plural).filter((v) => ['get', 'list', 'watch'].includes(v)), ['get', 'list', 'watch'], `${role.metadata.name} reads ${plural}`)
      assert.deepEqual(verbsOn(role, 'kollect.dev', `${plural}/status`), ['get', 'list', 'watch'], `${role.metadata.name}: ${plural}/status is read-only`)
    }
    assert.equal(writesResource(view, plural), false, `kollect-view writes no ${plural}`)
    assert.equal(writesResource(edit, plural), plural !== 'kollectscopes', `kollect-edit ${plural}`)
    assert.equal(writesResource(admin, plural), true, `kollect-admin writes ${plural}`)
  }
  for (const role of [view, edit, admin]) {
    for (const rule of role.rules) {
      assert.deepEqual(rule.apiGroups, ['kollect.dev'], `${role.metadata.name}: kollect.dev only`)
      for (const r of rule.resources ?? []) assert.ok(KOLLECT_PLURALS.includes(r.replace(/\/status$/, '')), `${role.metadata.name}: ${r} is a Kollect resource`)
    }
  }
})

test('the NetworkPolicy admits only the metacontroller namespace, on the hooks port', () => {
  const np = only<NetworkPolicy>(base, 'NetworkPolicy')
  const d = only<Deployment>(base, 'Deployment', 'kollect')
  for (const [k, v] of Object.entries(np.spec.podSelector.matchLabels ?? {})) assert.equal(d.spec.template.metadata.labels[k], v)
  assert.ok(Object.keys(np.spec.podSelector.matchLabels ?? {}).length > 0, 'selects the kollect pod, not the whole namespace')
  assert.deepEqual(np.spec.policyTypes, ['Ingress'])
  assert.deepEqual(np.spec.ingress, [{
    from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'metacontroller' } } }],
    ports: [{ protocol: 'TCP', port: 8080 }],
  }])
})

// ---- the image ----

interface Dockerfile {
  stages: { from: string; name?: string; lines: string[] }[]
}

function parseDockerfile(text: string): Dockerfile {
  const logical = text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
  const stages: Dockerfile['stages'] = []
  for (const line of logical) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line)
    if (from) stages.push({ from: from[1] ?? '', name: from[2], lines: [] })
    else stages.at(-1)?.lines.push(line)
  }
  return { stages }
}

const dockerfile = parseDockerfile(readRepoFile('Dockerfile'))
const runtime = dockerfile.stages.at(-1)
const envOf = (stage: Dockerfile['stages'][number]) => {
  const env: Record<string, string> = {}
  for (const line of stage.lines.filter((l) => l.startsWith('ENV '))) {
    for (const m of line.slice(4).matchAll(/([A-Z_]+)=(\S+)/g)) env[m[1] ?? ''] = m[2] ?? ''
  }
  return env
}

test('the Dockerfile: node:24-bookworm-slim build and runtime, uid 10001, git, the documented defaults', () => {
  assert.equal(dockerfile.stages.length, 2)
  assert.ok(runtime)
  for (const stage of dockerfile.stages) assert.equal(stage.from, 'node:24-bookworm-slim')
  const build = dockerfile.stages[0]?.lines.join('\n') ?? ''
  for (const step of ['npm ci', 'npm run build', 'npm prune --omit=dev']) assert.ok(build.includes(step), `build stage runs ${step}`)
  const lines = runtime.lines.join('\n')
  assert.match(lines, /apt-get install[^\n]*\bgit\b/)
  assert.match(lines, /apt-get install[^\n]*\bca-certificates\b/)
  assert.ok(runtime.lines.includes('USER 10001:10001'))
  assert.deepEqual(
    Object.fromEntries(Object.entries(envOf(runtime)).filter(([k]) => ['NODE_ENV', 'HOME', 'KOLLECT_DATA_DIR', 'NODE_OPTIONS'].includes(k))),
    { NODE_ENV: 'production', HOME: '/tmp', KOLLECT_DATA_DIR: '/data', NODE_OPTIONS: '--max-semi-space-size=32' },
  )
  assert.ok(runtime.lines.includes('CMD ["node", "dist/server/main-hooks.js"]'))
  // The Deployment overrides args only, so tini stays PID 1 for both containers.
  assert.ok(runtime.lines.includes('ENTRYPOINT ["/usr/bin/tini", "--"]'))
  assert.ok(runtime.lines.includes('COPY manifests/crds ./manifests/crds'), 'the CRDs api/crd-schemas.ts reads at runtime')
  const ignored = readRepoFile('.dockerignore').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'))
  for (const needed of ['api', 'hooks', 'server', 'exporter', 'sinks', 'package.json', 'package-lock.json', 'tsconfig.json', 'manifests/crds']) {
    assert.ok(!ignored.includes(needed), `.dockerignore keeps ${needed}`)
  }
  assert.ok(ignored.includes('!manifests/crds'))
  for (const heavy of ['node_modules', 'dist', '.git', '.cache', '.data']) assert.ok(ignored.includes(heavy), `.dockerignore drops ${heavy}`)
})

test('the runtime file set the Dockerfile copies starts both processes and finds the CRDs', async (t) => {
  assert.ok(runtime)
  const workdir = runtime.lines.find((l) => l.startsWith('WORKDIR '))?.slice(8).trim()
  assert.equal(workdir, '/app')
  const scratch = mkdtempSync(join(tmpdir(), 'kollect-image-'))
  t.after(() => rmSync(scratch, { recursive: true, force: true }))
  const app = join(scratch, 'app')
  mkdirSync(app)
  // Rebuild /app from the COPY lines: `--from=build /app/x` comes from this checkout's build
  // (dist/ is what `npm run build` made), plain COPY from the build context. node_modules is
  // linked, not copied; dist and the CRDs are copied so that nothing outside the set resolves.
  for (const line of runtime.lines.filter((l) => l.startsWith('COPY '))) {
    const parts = line.split(/\s+/).slice(1)
    const fromBuild = parts[0] === '--from=build'
    const [src, dest] = fromBuild ? parts.slice(1) : parts
    assert.ok(src && dest, line)
    const source = join(repoRoot, fromBuild ? src.replace(/^\/app\//, '') : src)
    const target = resolve(app, dest)
    assert.ok(existsSync(source), `${line}: ${source} exists`)
    mkdirSync(dirname(target), { recursive: true })
    if (src.endsWith('node_modules')) symlinkSync(source, target, 'dir')
    else cpSync(source, target, { recursive: true })
  }

  const dataDir = join(scratch, 'data')
  const home = join(scratch, 'tmp')
  mkdirSync(dataDir)
  mkdirSync(home)
  const tokenFile = join(scratch, 'token')
  writeFileSync(tokenFile, 'image-test-token\n')
  const [hooksPort, exporterPort] = [await freePort(), await freePort()]
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    ...envOf(runtime),
    HOME: home,
    KOLLECT_DATA_DIR: dataDir,
    KOLLECT_HOOK_TOKEN_FILE: tokenFile,
    PORT: String(hooksPort),
    KOLLECT_EXPORTER_PORT: String(exporterPort),
    KOLLECT_LOG_LEVEL: 'warn',
  }

  const script = "const m = await import('./dist/api/crd-schemas.js'); console.log(m.findCrdDir()); m.crdForKind('KollectTarget')"
  const found = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: app, env, encoding: 'utf8' })
  assert.equal(found.status, 0, found.stderr)
  assert.equal(found.stdout.trim(), join(app, 'manifests', 'crds'))
  // Hub mode is the same image: its modules resolve within the copied set.
  const hub = spawnSync(process.execPath, ['--input-type=module', '-e', "await import('./dist/hub/hub.js'); await import('./dist/hub/config.js')"], { cwd: app, env, encoding: 'utf8' })
  assert.equal(hub.status, 0, hub.stderr)

  // The containers' args, relative to WORKDIR (here: resolved against the rebuilt /app).
  const d = only<Deployment>(base, 'Deployment', 'kollect')
  const start = (name: string) => {
    const [cmd, script, ...rest] = container(d, name).args ?? []
    assert.equal(cmd, 'node')
    assert.ok(script)
    return startServerProcess(process.execPath, [resolve(app, script), ...rest], join(scratch, `${name}.log`), env)
  }
  const exporter = start('exporter')
  const hooks = start('hooks')
  t.after(async () => {
    for (const p of [hooks, exporter]) {
      p.signalGroup('SIGTERM')
      await waitForExit(p, 5000)
    }
  })
  await pollUntil('hooks /readyz (which needs the exporter)', async () => {
    const res = await fetch(`http://127.0.0.1:${hooksPort}/readyz`).catch(() => null)
    return res?.status === 200
  }, { timeoutMs: 20_000, proc: hooks })
  assert.ok(!exporter.hasExited(), exporter.logTail())

  const body = readRepoFile('examples/requests/target-sync.json')
  const unauthorized = await fetch(`http://127.0.0.1:${hooksPort}/hooks/targets/sync`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  assert.equal(unauthorized.status, 401, 'the token file was read')
  const synced = await fetch(`http://127.0.0.1:${hooksPort}/hooks/targets/sync`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer image-test-token' }, body })
  assert.equal(synced.status, 200, await synced.clone().text())
  const status = ((await synced.json()) as { status: { extractedCount: number } }).status
  assert.ok(status.extractedCount > 0, JSON.stringify(status))
})
