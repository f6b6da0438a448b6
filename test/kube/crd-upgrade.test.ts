// The CRD upgrade paths of docs/upgrading.md against a real kube-apiserver: the CRDs of the first
// release (test/fixtures/crds-c3669b1), CRs of every kind made under them, then today's CRDs over
// them: from charts/kollect/crds/ by server-side apply (`kubectl apply --server-side
// --force-conflicts`), as the chart renders them with crds.install=true applied the same way, and
// by a real `helm upgrade` of a release that installed the old CRDs with crds.install=true.
// Afterwards the old CRs are still served as written, their status is still writable, and the new
// schema (defaults, validation) applies. Each path gets its own control plane.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { copyFileSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parse as parseYaml, parseAllDocuments } from 'yaml'
import { CHART, runHelm, templatedCrds } from '../support/helm.js'
import { startControlPlane, type ControlPlane, type RawResponse } from '../support/kube-apiserver.js'
import { ROOT } from '../support/metacontroller.js'

const OLD_DIR = path.join(ROOT, 'test', 'fixtures', 'crds-c3669b1')
const NEW_DIR = path.join(ROOT, 'charts', 'kollect', 'crds')
const NS = '/apis/kollect.dev/v1alpha1/namespaces/team-a'
const PLURAL: Record<string, string> = {
  KollectScope: 'kollectscopes',
  KollectProfile: 'kollectprofiles',
  KollectTarget: 'kollecttargets',
  KollectSink: 'kollectsinks',
  KollectInventory: 'kollectinventories',
}

interface Cr {
  apiVersion: string
  kind: string
  metadata: { name: string; namespace?: string; uid?: string }
  spec: Record<string, unknown>
  status?: Record<string, unknown>
}

interface Crd {
  metadata: { name: string }
  spec: { versions: { name: string; schema: unknown }[] }
}

const crdFiles = (dir: string) => readdirSync(dir).filter((f) => /^kollect\.dev_.*\.yaml$/.test(f)).sort().map((f) => path.join(dir, f))
const oldCrs = parseAllDocuments(readFileSync(path.join(OLD_DIR, 'crs.yaml'), 'utf8')).map((d) => d.toJS() as Cr | null).filter((cr): cr is Cr => cr !== null)
const newCrds = crdFiles(NEW_DIR).map((f) => parseYaml(readFileSync(f, 'utf8')) as Crd)

interface Schema {
  properties?: Record<string, Schema>
  items?: Schema
  default?: unknown
}

/** The new CRD's schema of a kind's spec. */
function specSchema(kind: string): Schema {
  const crd = newCrds.find((c) => c.metadata.name === `${PLURAL[kind]}.kollect.dev`)
  const schema = crd?.spec.versions[0]?.schema as { openAPIV3Schema: Schema } | undefined
  const spec = schema?.openAPIV3Schema.properties?.spec
  assert.ok(spec, `no spec schema for ${kind}`)
  return spec
}

/** value with the schema's defaults filled in where a field is absent, as structural defaulting does. */
function withDefaults(value: unknown, schema: Schema): unknown {
  if (Array.isArray(value)) return schema.items ? value.map((v) => withDefaults(v, schema.items as Schema)) : value
  if (typeof value !== 'object' || value === null || !schema.properties) return value
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) }
  for (const [key, sub] of Object.entries(schema.properties)) {
    if (out[key] === undefined && sub.default !== undefined) out[key] = sub.default
    else if (out[key] !== undefined) out[key] = withDefaults(out[key], sub)
  }
  return out
}

const crPath = (kind: string, name?: string) => `${NS}/${PLURAL[kind]}${name === undefined ? '' : `/${name}`}`
const mergePatch = { 'content-type': 'application/merge-patch+json' }

function ok(r: RawResponse, what: string): void {
  assert.ok(r.status === 200 || r.status === 201, `${what}: HTTP ${r.status}: ${r.body}`)
}

const inventoryStatus = {
  observedGeneration: 1,
  itemCount: 3,
  checksum: 'a'.repeat(64),
  sinks: [{ name: 'git-demo', namespace: 'team-a', state: 'Synced', checksum: 'a'.repeat(64), itemCount: 3 }],
  // Valid then: the old schema required only type and status.
  conditions: [{ type: 'Ready', status: 'True' }],
}
const s3Sink = {
  apiVersion: 'kollect.dev/v1alpha1',
  kind: 'KollectSink',
  metadata: { name: 'snapshots', namespace: 'team-a' },
  spec: { type: 's3', secretRef: { name: 's3-creds' }, s3: { bucket: 'inventory' } },
}

interface Upgrade {
  how: string
  /** Puts the old CRDs in place; default: server-side apply of the fixture's files. */
  install?: (cp: ControlPlane) => Promise<unknown>
  upgrade: (cp: ControlPlane) => Promise<unknown>
  /** Asserted last, after the shared tests. */
  afterwards?: { what: string; check: (cp: ControlPlane) => Promise<void> }
}

const applyOldCrds = async (cp: ControlPlane) => {
  for (const f of crdFiles(OLD_DIR)) await cp.applyYaml(f)
}

// A release of the chart as of c3669b1's CRDs: today's chart with the fixture in crds/. No
// CompositeControllers: this API server has no Metacontroller CRDs.
const RELEASE = ['kollect', '--namespace', 'kollect-system', '--set', 'crds.install=true', '--set', 'compositeControllers.enabled=false']
let oldChart = ''
const helm = (cp: ControlPlane, args: string[]) => runHelm([...args, '--kubeconfig', cp.kubeconfigPath])
const crdObject = async (cp: ControlPlane, name: string) => {
  const r = await cp.request('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`)
  ok(r, name)
  return r.json<Crd & { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } }>()
}

const UPGRADES: Upgrade[] = [
  {
    how: 'kubectl apply --server-side --force-conflicts -f charts/kollect/crds/',
    upgrade: async (cp) => {
      for (const f of crdFiles(NEW_DIR)) await cp.applyYaml(f)
    },
  },
  { how: 'the CRDs helm renders with crds.install=true, applied the same way', upgrade: (cp) => cp.applyYaml(templatedCrds()) },
  {
    how: 'helm install --skip-crds --set crds.install=true, then helm upgrade',
    install: async (cp) => {
      oldChart = mkdtempSync(path.join(tmpdir(), 'kollect-chart-c3669b1-'))
      cpSync(CHART, oldChart, { recursive: true })
      for (const f of crdFiles(path.join(oldChart, 'crds'))) rmSync(f)
      for (const f of crdFiles(OLD_DIR)) copyFileSync(f, path.join(oldChart, 'crds', path.basename(f)))
      // Forgetting --skip-crds: crds/ creates the CRDs unowned, and Helm will not adopt them.
      const refused = helm(cp, ['install', ...RELEASE, '--create-namespace', oldChart])
      assert.notEqual(refused.status, 0, 'helm install with crds.install=true and without --skip-crds')
      assert.match(refused.stderr, /invalid ownership metadata/)
      // The hand-over docs/upgrading.md gives (kubectl label and annotate), then the install as documented.
      for (const f of crdFiles(OLD_DIR)) {
        const name = (parseYaml(readFileSync(f, 'utf8')) as Crd).metadata.name
        const metadata = { labels: { 'app.kubernetes.io/managed-by': 'Helm' }, annotations: { 'meta.helm.sh/release-name': 'kollect', 'meta.helm.sh/release-namespace': 'kollect-system' } }
        ok(await cp.request('PATCH', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`, { body: { metadata }, headers: mergePatch }), `adopt ${name}`)
      }
      const installed = helm(cp, ['install', ...RELEASE, '--create-namespace', '--skip-crds', oldChart])
      assert.equal(installed.status, 0, `helm install --skip-crds:\n${installed.stderr}`)
      for (const crd of newCrds) assert.equal((await crdObject(cp, crd.metadata.name)).metadata.annotations?.['helm.sh/resource-policy'], 'keep', crd.metadata.name)
    },
    upgrade: async (cp) => {
      const r = helm(cp, ['upgrade', ...RELEASE, CHART])
      assert.equal(r.status, 0, `helm upgrade:\n${r.stderr}`)
    },
    afterwards: {
      what: 'helm uninstall keeps the CRDs (resource-policy keep) and so every CR',
      check: async (cp) => {
        const r = helm(cp, ['uninstall', 'kollect', '--namespace', 'kollect-system'])
        assert.equal(r.status, 0, `helm uninstall:\n${r.stderr}`)
        assert.match(r.stdout, /kept due to the resource policy/)
        for (const crd of newCrds) await crdObject(cp, crd.metadata.name)
        const list = await cp.request('GET', crPath('KollectInventory'))
        ok(list, 'list inventories')
        assert.deepEqual(list.json<{ items: Cr[] }>().items.map((i) => i.metadata.name), ['prod-inventory'])
      },
    },
  },
]

for (const upgrade of UPGRADES) {
  describe(`CRD upgrade from c3669b1: ${upgrade.how}`, () => {
    let cp: ControlPlane
    // Each CR as the API server returned it under the old CRDs.
    const created = new Map<string, Cr>()

    before(async () => {
      cp = await startControlPlane()
      await cp.applyYaml('apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n')
      await (upgrade.install ?? applyOldCrds)(cp)
      for (const cr of oldCrs) {
        const r = await cp.request('POST', crPath(cr.kind), { body: cr })
        ok(r, `create ${cr.kind}/${cr.metadata.name} under the old CRDs`)
        created.set(`${cr.kind}/${cr.metadata.name}`, r.json<Cr>())
      }
      const status = await cp.request('PATCH', `${crPath('KollectInventory', 'prod-inventory')}/status`, { body: { status: inventoryStatus }, headers: mergePatch })
      ok(status, 'status write under the old CRDs')
      // The schemas really differ: what the new ones admit, the old ones refuse.
      assert.equal((await cp.request('POST', crPath('KollectSink'), { body: s3Sink })).status, 422, 'an s3 sink under the old CRDs')
      await upgrade.upgrade(cp)
    }, { timeout: 300_000 })

    after(async () => {
      await cp?.close()
      if (oldChart) rmSync(oldChart, { recursive: true, force: true })
    })

    test('every CRD serves the new schema', async () => {
      for (const crd of newCrds) {
        const r = await cp.request('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`)
        ok(r, crd.metadata.name)
        assert.deepEqual(r.json<Crd>().spec.versions.map((v) => v.schema), crd.spec.versions.map((v) => v.schema), crd.metadata.name)
      }
    })

    test('the CRs made under the old CRDs are still served: get and list, same uid, spec unchanged', async () => {
      for (const [key, was] of created) {
        const r = await cp.request('GET', crPath(was.kind, was.metadata.name))
        ok(r, `get ${key}`)
        const now = r.json<Cr>()
        assert.equal(now.metadata.uid, was.metadata.uid, key)
        // As written, plus the defaults the new schema gives fields added since (the API server
        // defaults on read): postgres.keepSnapshots, for one.
        assert.deepEqual(now.spec, withDefaults(was.spec, specSchema(was.kind)), key)
      }
      for (const kind of Object.keys(PLURAL)) {
        const list = await cp.request('GET', crPath(kind))
        ok(list, `list ${kind}`)
        const names = list.json<{ items: Cr[] }>().items.map((i) => i.metadata.name).sort()
        assert.deepEqual(names, oldCrs.filter((cr) => cr.kind === kind).map((cr) => cr.metadata.name).sort(), `list ${kind}`)
      }
    })

    test('the status subresource is still writable, and the new status schema applies to what a write changes', async () => {
      const at = `${crPath('KollectInventory', 'prod-inventory')}/status`
      assert.deepEqual((await cp.request('GET', at)).json<Cr>().status, inventoryStatus, 'the old status is served as written')
      // A state only the new schema knows; the untouched old condition (no reason) does not block it.
      const drifted = { ...inventoryStatus.sinks[0], state: 'Drifted' }
      ok(await cp.request('PATCH', at, { body: { status: { sinks: [drifted] } }, headers: mergePatch }), 'Drifted')
      const bare = await cp.request('PATCH', at, { body: { status: { conditions: [{ type: 'Ready', status: 'False' }] } }, headers: mergePatch })
      assert.equal(bare.status, 422, `a changed condition without reason and message: ${bare.body}`)
      const full = { type: 'Ready', status: 'False', reason: 'SinkDrifted', message: 'git-demo holds something else' }
      ok(await cp.request('PATCH', at, { body: { status: { conditions: [full] } }, headers: mergePatch }), 'a full condition')
      assert.deepEqual((await cp.request('GET', at)).json<Cr>().status, { ...inventoryStatus, sinks: [drifted], conditions: [full] })
    })

    test('a new CR gets the new schema: its defaults and its validation', async () => {
      const r = await cp.request('POST', crPath('KollectSink'), { body: s3Sink })
      ok(r, 'an s3 sink')
      assert.deepEqual(r.json<Cr>().spec, {
        type: 's3',
        secretRef: { name: 's3-creds' },
        deletionPolicy: 'Retain',
        s3: { bucket: 'inventory', region: 'us-east-1', pathStyle: false, prefix: 'inventory/{cluster}/{namespace}/{name}', layout: 'document', keepSnapshots: 0 },
      })
      const kafka = await cp.request('POST', crPath('KollectSink'), { body: { ...s3Sink, metadata: { name: 'events2', namespace: 'team-a' }, spec: { type: 'kafka' } } })
      assert.equal(kafka.status, 422, kafka.body)
      assert.match(kafka.body, /a kafka sink needs the kafka block with brokers/)
    })

    if (upgrade.afterwards) {
      const { what, check } = upgrade.afterwards
      test(what, () => check(cp))
    }
  })
}
