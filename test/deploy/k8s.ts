// Shared by the deploy tests (manifests.test.ts, chart.test.ts): the repository root, strict
// YAML parsing, and the few Kubernetes object shapes the tests read. Not a test file itself.
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseAllDocuments } from 'yaml'

/** The repository root, found upward from this module (works from test/ and from dist/test/). */
export const repoRoot: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    if (existsSync(join(dir, 'charts', 'kollect', 'Chart.yaml')) && existsSync(join(dir, 'manifests', 'kustomization.yaml'))) return dir
    const parent = dirname(dir)
    if (parent === dir) throw new Error(`no repository root (charts/kollect and manifests/) above ${fileURLToPath(import.meta.url)}`)
    dir = parent
  }
})()

interface Meta {
  name: string
  namespace?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}

export interface K8sObject {
  apiVersion: string
  kind: string
  metadata: Meta
}

interface EnvVar {
  name: string
  value?: string
}

interface Probe {
  httpGet?: { path: string; port: string | number }
  exec?: { command: string[] }
  tcpSocket?: unknown
}

interface SecurityContext {
  runAsNonRoot?: boolean
  runAsUser?: number
  runAsGroup?: number
  fsGroup?: number
  readOnlyRootFilesystem?: boolean
  allowPrivilegeEscalation?: boolean
  capabilities?: { drop?: string[]; add?: string[] }
  seccompProfile?: { type: string }
}

export interface Container {
  name: string
  image: string
  imagePullPolicy?: string
  command?: string[]
  args?: string[]
  ports?: { name?: string; containerPort: number; protocol?: string }[]
  env?: EnvVar[]
  readinessProbe?: Probe
  livenessProbe?: Probe
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> }
  securityContext?: SecurityContext
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[]
}

export interface Volume {
  name: string
  emptyDir?: { sizeLimit?: string }
  persistentVolumeClaim?: { claimName: string }
  secret?: { secretName: string; items?: { key: string; path: string }[] }
}

export interface Deployment extends K8sObject {
  spec: {
    replicas: number
    strategy: { type: string }
    selector: { matchLabels: Record<string, string> }
    template: {
      metadata: { labels: Record<string, string> }
      spec: {
        serviceAccountName: string
        securityContext: SecurityContext
        containers: Container[]
        volumes: Volume[]
      }
    }
  }
}

export interface Service extends K8sObject {
  spec: { selector: Record<string, string>; ports: { name?: string; port: number; targetPort: string | number }[] }
}

interface Rule {
  apiGroups?: string[]
  resources?: string[]
  resourceNames?: string[]
  nonResourceURLs?: string[]
  verbs: string[]
}

export interface Role extends K8sObject {
  rules: Rule[]
}

export interface Binding extends K8sObject {
  roleRef: { apiGroup: string; kind: string; name: string }
  subjects: { kind: string; name: string; namespace?: string }[]
}

export interface NetworkPolicy extends K8sObject {
  spec: {
    podSelector: { matchLabels?: Record<string, string> }
    policyTypes: string[]
    ingress?: {
      from?: { namespaceSelector?: { matchLabels?: Record<string, string> }; podSelector?: unknown; ipBlock?: unknown }[]
      ports?: { protocol?: string; port: number | string }[]
    }[]
  }
}

interface Webhook {
  service: { name: string; namespace: string; port: number; protocol: string }
  path: string
  timeout: string
  authorization?: { type: string; secretRef: { name: string; namespace: string; key: string } }
}

export interface CompositeController extends K8sObject {
  spec: {
    parentResource: { apiVersion: string; resource: string }
    hooks: Record<string, { version: string; webhook: Webhook }>
  }
}

const WRITE_VERBS = ['create', 'update', 'patch', 'delete', 'deletecollection', '*']
export const KOLLECT_PLURALS = ['kollectprofiles', 'kollecttargets', 'kollectsinks', 'kollectinventories', 'kollectscopes']

/** Every document of a YAML stream; any parse error or warning fails, naming the file. */
export function parseDocs(text: string, where: string): unknown[] {
  const docs = parseAllDocuments(text)
  const list = Array.isArray(docs) ? docs : [docs]
  const out: unknown[] = []
  for (const doc of list) {
    assert.deepEqual(doc.errors.map((e) => e.message), [], `${where}: YAML errors`)
    assert.deepEqual(doc.warnings.map((e) => e.message), [], `${where}: YAML warnings`)
    const value: unknown = doc.toJS()
    if (value !== null && value !== undefined) out.push(value)
  }
  return out
}

/** Objects with a kind (kustomization files and comment-only documents are left out). */
export function k8sObjects(docs: unknown[]): K8sObject[] {
  return docs.filter((d): d is K8sObject => typeof d === 'object' && d !== null && typeof (d as { kind?: unknown }).kind === 'string')
}

/** The .yaml/.yml files under a directory of the repository, recursively, as repo-relative paths. */
export function yamlFilesUnder(dir: string): string[] {
  const abs = join(repoRoot, dir)
  const out: string[] = []
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name)
      if (statSync(p).isDirectory()) walk(p)
      else if (/\.ya?ml$/.test(name)) out.push(relative(repoRoot, p))
    }
  }
  walk(abs)
  return out
}

export function readRepoFile(path: string): string {
  return readFileSync(join(repoRoot, path), 'utf8')
}

export function only<T extends K8sObject>(objects: K8sObject[], kind: string, name?: string): T {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name))
  assert.equal(found.length, 1, `expected exactly one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`)
  return found[0] as T
}

export function all<T extends K8sObject>(objects: K8sObject[], kind: string): T[] {
  return objects.filter((o) => o.kind === kind) as T[]
}

export function container(deployment: Deployment, name: string): Container {
  const c = deployment.spec.template.spec.containers.find((x) => x.name === name)
  assert.ok(c, `container ${name} in Deployment ${deployment.metadata.name}`)
  return c
}

export function envValue(c: Container, name: string): string | undefined {
  return c.env?.find((e) => e.name === name)?.value
}

/** Does any rule grant a write verb on `resource` in kollect.dev? */
export function writesResource(role: Role, resource: string): boolean {
  return role.rules.some((r) =>
    (r.apiGroups ?? []).some((g) => g === 'kollect.dev' || g === '*') &&
    (r.resources ?? []).some((x) => x === resource || x === '*') &&
    r.verbs.some((v) => WRITE_VERBS.includes(v)))
}

/** The verbs granted on `resource` in apiGroup `group`. */
export function verbsOn(role: Role, group: string, resource: string): string[] {
  return [...new Set(role.rules
    .filter((r) => (r.apiGroups ?? []).includes(group) && (r.resources ?? []).includes(resource))
    .flatMap((r) => r.verbs))].sort()
}

/**
 * The checks both deploy paths (kustomize base and Helm chart) must pass for the pod: two
 * containers, non-root, read-only root filesystem, no capabilities, probes as documented, the
 * exporter unreachable from outside the pod, the hook token as a mounted file.
 */
export function assertHardenedPod(d: Deployment, tokenSecret: string | null): void {
  const pod = d.spec.template.spec
  assert.deepEqual(pod.containers.map((c) => c.name).sort(), ['exporter', 'hooks'])
  assert.equal(d.spec.replicas, 1, 'one replica: the exporter state is per pod')
  assert.equal(d.spec.strategy.type, 'Recreate')
  assert.equal(pod.securityContext.runAsNonRoot, true)
  assert.equal(pod.securityContext.runAsUser, 10001)
  assert.equal(pod.securityContext.seccompProfile?.type, 'RuntimeDefault')
  for (const [k, v] of Object.entries(d.spec.selector.matchLabels)) assert.equal(d.spec.template.metadata.labels[k], v, `pod label ${k}`)

  for (const c of pod.containers) {
    assert.equal(c.securityContext?.readOnlyRootFilesystem, true, `${c.name}: readOnlyRootFilesystem`)
    assert.equal(c.securityContext?.allowPrivilegeEscalation, false, `${c.name}: allowPrivilegeEscalation`)
    assert.deepEqual(c.securityContext?.capabilities?.drop, ['ALL'], `${c.name}: drop ALL`)
    assert.equal(c.securityContext?.capabilities?.add, undefined, `${c.name}: no added capabilities`)
    assert.ok(c.resources?.requests?.memory && c.resources.limits?.memory, `${c.name}: memory request and limit`)
    assert.ok(c.volumeMounts?.some((m) => m.mountPath === '/tmp'), `${c.name}: writable /tmp`)
    assert.equal(c.command, undefined, `${c.name}: keeps the image entrypoint (tini)`)
  }

  const hooks = container(d, 'hooks')
  assert.deepEqual(hooks.args, ['node', 'dist/server/main-hooks.js'])
  assert.deepEqual(hooks.ports?.map((p) => [p.name, p.containerPort]), [['http', 8080]])
  assert.deepEqual(hooks.readinessProbe?.httpGet, { path: '/readyz', port: 'http' })
  assert.deepEqual(hooks.livenessProbe?.httpGet, { path: '/healthz', port: 'http' })

  const exporter = container(d, 'exporter')
  assert.deepEqual(exporter.args, ['node', 'dist/server/main-exporter.js'])
  assert.equal(exporter.ports, undefined, 'the exporter declares no container port')
  assert.equal(exporter.livenessProbe?.httpGet, undefined, 'httpGet cannot reach 127.0.0.1 from the kubelet')
  const probe = exporter.livenessProbe?.exec?.command ?? []
  assert.equal(probe[0], '/bin/bash', 'no second Node.js process per probe')
  assert.match(probe.join(' '), /\/dev\/tcp\/127\.0\.0\.1\/8081 .*GET \/healthz/)
  assert.equal(exporter.volumeMounts?.find((m) => m.mountPath === '/data')?.name, 'data')
  // The exporter's memory (docs/operations.md#sizing): its heap cap below its limit, and its item
  // budget within what the limit holds at the measured ~5 bytes of memory per charged byte.
  const limit = quantityBytes(exporter.resources?.limits?.memory ?? '')
  const heap = Number(/--max-old-space-size=(\d+)/.exec(envValue(exporter, 'NODE_OPTIONS') ?? '')?.[1]) * 1024 * 1024
  const budget = Number(envValue(exporter, 'KOLLECT_EXPORTER_ITEM_BUDGET_BYTES'))
  assert.ok(heap > 0 && heap <= limit * 0.8, `exporter heap cap ${heap} against a memory limit of ${limit}`)
  assert.ok(budget > 0 && 160 * 1024 * 1024 + 5 * budget <= limit, `exporter item budget ${budget} against a memory limit of ${limit}`)
  assert.ok(/^(0?\.\d+|1)$/.test(envValue(exporter, 'KOLLECT_EXPORTER_NAMESPACE_SHARE') ?? ''), 'a namespace share')
  // The hooks' memory: every child at its heap cap plus the server, and a child that can parse a
  // body at the limit (within 8 times its size in heap, measured in docs/operations.md#sizing).
  const children = Number(envValue(hooks, 'KOLLECT_EXTRACT_WORKERS')) + 1
  const childHeap = Number(envValue(hooks, 'KOLLECT_WORKER_MEMORY_MB')) * 1024 * 1024
  const body = Number(envValue(hooks, 'KOLLECT_HOOK_BODY_LIMIT'))
  const hooksLimit = quantityBytes(hooks.resources?.limits?.memory ?? '')
  assert.ok(children > 1 && children * childHeap + 256 * 1024 * 1024 <= hooksLimit, `hooks: ${children} children of ${childHeap} bytes against ${hooksLimit}`)
  assert.ok(body > 0 && 8 * body <= childHeap, `hooks: a ${body}-byte body against a child heap of ${childHeap}`)
  assert.ok(pod.volumes.some((v) => v.name === 'data'))

  for (const c of [hooks, exporter]) {
    const file = envValue(c, 'KOLLECT_HOOK_TOKEN_FILE')
    if (tokenSecret === null) {
      assert.equal(file, undefined, `${c.name}: no token file when auth is off`)
      assert.equal(envValue(c, 'KOLLECT_HOOK_AUTH'), 'none', `${c.name}: running open is explicit, or the process refuses to start`)
      continue
    }
    assert.equal(envValue(c, 'KOLLECT_HOOK_AUTH'), undefined, `${c.name}: token mode is the default`)
    assert.ok(file, `${c.name}: KOLLECT_HOOK_TOKEN_FILE`)
    assert.equal(envValue(c, 'KOLLECT_HOOK_TOKEN'), undefined, `${c.name}: the token is a file, never an env value`)
    const mount = c.volumeMounts?.find((m) => file.startsWith(m.mountPath + '/'))
    assert.ok(mount, `${c.name}: ${file} lies in a mounted volume`)
    assert.equal(mount.readOnly, true)
    const volume = pod.volumes.find((v) => v.name === mount.name)
    assert.equal(volume?.secret?.secretName, tokenSecret, `${c.name}: token from Secret ${tokenSecret}`)
    assert.deepEqual(volume?.secret?.items, [{ key: 'token', path: file.slice(mount.mountPath.length + 1) }])
  }
}

/** Bytes of a Kubernetes memory quantity in the forms the manifests use (512Mi, 1Gi). */
function quantityBytes(q: string): number {
  const m = /^(\d+)(Mi|Gi)$/.exec(q)
  assert.ok(m, `memory quantity ${q}`)
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 ** 3 : 1024 ** 2)
}
