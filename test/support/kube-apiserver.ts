// A real Kubernetes control plane for tests: etcd and kube-apiserver on loopback ports, built by
// scripts/install-kube.sh (or named by KOLLECT_KUBE_APISERVER / KOLLECT_ETCD). No controller
// manager, scheduler or kubelet: the API itself (CRDs, admission, discovery, RBAC) is what the
// tests ask about. One per test file; close() it in `after`.
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import https from 'node:https'
import os from 'node:os'
import path from 'node:path'
import * as k8s from '@kubernetes/client-node'
import { parseAllDocuments } from 'yaml'
import { freePort } from './ports.js'
import { pollUntil, startServerProcess, waitForExit, type ServerProcess } from './process.js'
import { requireTool } from './tools.js'

export interface RawResponse {
  status: number
  body: string
  json<T = unknown>(): T
}

export interface ControlPlane {
  /** A kubeconfig file for the admin token (system:masters), verifying the serving certificate. */
  readonly kubeconfigPath: string
  /** https://127.0.0.1:<port> */
  readonly url: string
  /** The admin bearer token. */
  readonly token: string
  readonly kc: k8s.KubeConfig
  /** Milliseconds from spawning etcd to kube-apiserver's /readyz answering ok. */
  readonly startMs: number
  /** Server-side apply every document of a file or YAML text, as admin; waits for each CRD to be Established. */
  applyYaml(fileOrText: string): Promise<k8s.KubernetesObject[]>
  /** The admin kubeconfig acting as another user (Impersonate-User, and at most one Impersonate-Group). */
  impersonating(user: string, groups?: string[]): k8s.KubeConfig
  /** A raw request as admin: for what the typed clients do not expose (tables, discovery documents). */
  request(method: string, apiPath: string, opts?: { body?: unknown; headers?: Record<string, string> }): Promise<RawResponse>
  close(): Promise<void>
}

const STARTUP_TIMEOUT_MS = 120_000
const FIELD_MANAGER = 'kollect-tests'

/** Start etcd and kube-apiserver in a temporary directory; resolves once /readyz is ok. */
export async function startControlPlane(): Promise<ControlPlane> {
  // Before anything is started: a missing binary fails here, with the command that builds it.
  const apiserverBin = requireTool('install-kube.sh', 'KOLLECT_KUBE_APISERVER')
  const etcdBin = requireTool('install-kube.sh', 'KOLLECT_ETCD')
  const started = Date.now()
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-kube-'))
  const procs: ServerProcess[] = []
  const stopAll = async (): Promise<void> => {
    // The API server first, so it does not log etcd going away.
    for (const p of [...procs].reverse()) {
      p.signalGroup('SIGTERM')
      await waitForExit(p, 10_000)
    }
  }
  try {
    const [clientPort, peerPort, securePort] = [await freePort(), await freePort(), await freePort()]
    const etcdUrl = `http://127.0.0.1:${clientPort}`
    const peerUrl = `http://127.0.0.1:${peerPort}`
    const etcd = startServerProcess(etcdBin, [
      '--name=kollect-test',
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=kollect-test=${peerUrl}`,
      // A throwaway store: durability costs fsyncs the tests do not need.
      '--unsafe-no-fsync',
      '--log-level=warn',
    ], path.join(dir, 'etcd.log'))
    procs.push(etcd)
    await pollUntil('etcd /health', async () => (await httpGetJson(`${etcdUrl}/health`))?.['health'] === 'true', { timeoutMs: STARTUP_TIMEOUT_MS, proc: etcd })

    const token = randomBytes(24).toString('hex')
    writeFileSync(path.join(dir, 'tokens.csv'), `${token},kollect-test-admin,kollect-test-admin,"system:masters"\n`, { mode: 0o600 })
    const sa = generateKeyPairSync('ec', { namedCurve: 'prime256v1', publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } })
    writeFileSync(path.join(dir, 'sa.pub'), sa.publicKey)
    writeFileSync(path.join(dir, 'sa.key'), sa.privateKey, { mode: 0o600 })
    const certDir = path.join(dir, 'certs')
    const apiserver = startServerProcess(apiserverBin, [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${securePort}`,
      // No serving certificate given: the API server writes a self-signed one (with its CA)
      // for 127.0.0.1 here, and the kubeconfig trusts exactly that.
      `--cert-dir=${certDir}`,
      `--token-auth-file=${path.join(dir, 'tokens.csv')}`,
      '--authorization-mode=RBAC',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${path.join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${path.join(dir, 'sa.key')}`,
      // Only an address range for ClusterIPs it allocates; nothing is ever sent there.
      '--service-cluster-ip-range=10.96.0.0/24',
      '--profiling=false',
      '--v=1',
    ], path.join(dir, 'kube-apiserver.log'))
    procs.push(apiserver)

    const url = `https://127.0.0.1:${securePort}`
    const certFile = path.join(certDir, 'apiserver.crt')
    await pollUntil('kube-apiserver /readyz', async () => {
      // Read again on every try: the file may be there before it is completely written.
      const ca = readIfExists(certFile)
      return ca !== null && (await rawRequest(url, ca, token, 'GET', '/readyz').catch(() => null))?.status === 200
    }, { timeoutMs: STARTUP_TIMEOUT_MS, proc: apiserver })
    const startMs = Date.now() - started
    const caData = readFileSync(certFile)

    const kubeconfigPath = path.join(dir, 'kubeconfig')
    writeFileSync(kubeconfigPath, JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'kollect-test', cluster: { server: url, 'certificate-authority-data': caData.toString('base64') } }],
      users: [{ name: 'admin', user: { token } }],
      contexts: [{ name: 'kollect-test', context: { cluster: 'kollect-test', user: 'admin' } }],
      'current-context': 'kollect-test',
    }, null, 2), { mode: 0o600 })
    const kc = new k8s.KubeConfig()
    kc.loadFromFile(kubeconfigPath)

    const request: Request = (method, apiPath, opts = {}) => rawRequest(url, caData, token, method, apiPath, opts)
    let closed = false
    return {
      kubeconfigPath,
      url,
      token,
      kc,
      startMs,
      applyYaml: (fileOrText) => applyYaml(request, fileOrText),
      impersonating: (user, groups = []) => impersonating(kubeconfigPath, user, groups),
      request,
      close: async () => {
        if (closed) return
        closed = true
        await stopAll()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  } catch (err) {
    await stopAll()
    // Left in place when start fails: the logs are the evidence.
    throw new Error(`control plane did not start (logs in ${dir}): ${(err as Error).message}`)
  }
}

function readIfExists(file: string): Buffer | null {
  try {
    return readFileSync(file)
  } catch {
    return null
  }
}

async function httpGetJson(url: string): Promise<Record<string, unknown> | null> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(2_000) })
    return r.ok ? ((await r.json()) as Record<string, unknown>) : null
  } catch {
    return null
  }
}

function rawRequest(base: string, ca: Buffer, token: string, method: string, apiPath: string, opts: { body?: unknown; headers?: Record<string, string> } = {}): Promise<RawResponse> {
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body)
  return new Promise((resolve, reject) => {
    const req = https.request(new URL(apiPath, base), {
      method,
      ca,
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...opts.headers,
      },
      timeout: 30_000,
    }, (res) => {
      let text = ''
      res.setEncoding('utf8').on('data', (d: string) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, json: <T>() => JSON.parse(text) as T }))
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error(`${method} ${apiPath}: no answer in 30 s`)))
    req.on('error', reject)
    req.end(body)
  })
}

type Request = ControlPlane['request']

// Server-side apply over raw HTTP, not client-node's KubernetesObjectApi: that one re-serialises
// plain objects through its typed models, which drops every field whose model name differs from
// the JSON name (a CRD schema's enum, default and x-kubernetes-*), so CRDs would lose their
// validation silently (kubernetes-client/javascript#2483, 1.0.0 to 1.3.0).
async function applyYaml(request: Request, fileOrText: string): Promise<k8s.KubernetesObject[]> {
  const text = fileOrText.includes('\n') ? fileOrText : readFileSync(fileOrText, 'utf8')
  const applied: k8s.KubernetesObject[] = []
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`applyYaml: ${doc.errors[0]?.message}`)
    const obj = doc.toJS() as k8s.KubernetesObject | null
    if (!obj?.kind || !obj.apiVersion) continue
    const where = `${obj.kind} ${obj.metadata?.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata?.name}`
    const base = obj.apiVersion.includes('/') ? `/apis/${obj.apiVersion}` : `/api/${obj.apiVersion}`
    const discovery = await request('GET', base)
    if (discovery.status !== 200) throw new Error(`applyYaml ${where}: GET ${base}: HTTP ${discovery.status}`)
    const resource = discovery.json<{ resources: { name: string; kind: string; namespaced: boolean }[] }>().resources.find((r) => r.kind === obj.kind && !r.name.includes('/'))
    if (!resource) throw new Error(`applyYaml ${where}: ${base} serves no kind ${obj.kind}`)
    const scope = resource.namespaced ? `/namespaces/${obj.metadata?.namespace ?? 'default'}` : ''
    const r = await request('PATCH', `${base}${scope}/${resource.name}/${obj.metadata?.name}?fieldManager=${FIELD_MANAGER}&force=true`, {
      body: obj,
      headers: { 'content-type': 'application/apply-patch+yaml' },
    })
    if (r.status !== 200 && r.status !== 201) throw new Error(`applyYaml ${where}: HTTP ${r.status}: ${r.body}`)
    if (obj.kind === 'CustomResourceDefinition') await waitEstablished(request, obj as unknown as Crd)
    applied.push(r.json<k8s.KubernetesObject>())
  }
  return applied
}

interface Crd {
  metadata: { name: string }
  spec: { group: string; names: { plural: string }; versions: { name: string; served?: boolean }[] }
}

/**
 * A CRD is served (and its CRs admitted) only once the API server reports it Established, and
 * its resource answers a list: until its storage is ready, requests to it get 429.
 */
async function waitEstablished(request: Request, crd: Crd): Promise<void> {
  const name = crd.metadata.name
  await pollUntil(`CRD ${name} Established`, async () => {
    const r = await request('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`)
    const conditions = r.status === 200 ? (r.json<{ status?: { conditions?: { type: string; status: string }[] } }>().status?.conditions ?? []) : []
    return conditions.some((c) => c.type === 'Established' && c.status === 'True')
  }, { timeoutMs: 30_000 })
  const version = crd.spec.versions.find((v) => v.served !== false)?.name
  await pollUntil(`CRD ${name} listable`, async () => (await request('GET', `/apis/${crd.spec.group}/${version}/${crd.spec.names.plural}?limit=1`)).status === 200, { timeoutMs: 30_000 })
}

// client-node sends one header value per name, so a second group would arrive as "a,b": one
// group with a comma in its name. A service account's groups need none (the API server adds them).
function impersonating(kubeconfigPath: string, user: string, groups: string[]): k8s.KubeConfig {
  if (groups.length > 1) throw new Error('impersonating: client-node can send only one Impersonate-Group header')
  const kc = new k8s.KubeConfig()
  kc.loadFromFile(kubeconfigPath)
  kc.addAuthenticator({
    isAuthProvider: () => true,
    applyAuthentication: async (_user, opts) => {
      opts.headers ??= {}
      opts.headers['Impersonate-User'] = user
      if (groups[0] !== undefined) opts.headers['Impersonate-Group'] = groups[0]
    },
  })
  return kc
}
