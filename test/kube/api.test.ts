// The CRDs and the discovery code against a real kube-apiserver (test/support/kube-apiserver.ts):
// the CRDs are accepted as structural and Established, the example CRs are admitted, the printer
// columns come back through the table API, admission refuses invalid CRs where `kollect validate`
// does and for the same reason, server/cluster/discovery.ts resolves plurals and scopes through
// discovery, and `kollect preview --kubeconfig` reads live objects of either scope.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type * as k8s from '@kubernetes/client-node'
import { parse as parseYaml } from 'yaml'
import type { ResourceSpec } from '../../api/types.js'
import { createPluralResolver } from '../../server/cluster/discovery.js'
import { startControlPlane, type ControlPlane } from '../support/kube-apiserver.js'
import { ROOT } from '../support/metacontroller.js'

const CRD_DIR = path.join(ROOT, 'manifests', 'crds')
const EXAMPLES = path.join(ROOT, 'examples')
const KOLLECT = '/apis/kollect.dev/v1alpha1'
const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io'

interface PrinterColumn {
  name: string
  type: string
  priority?: number
  jsonPath: string
}

interface Crd extends k8s.KubernetesObject {
  spec: { names: { plural: string; kind: string }; scope: string; versions: { name: string; schema: unknown; additionalPrinterColumns?: PrinterColumn[] }[] }
  status?: { conditions?: { type: string; status: string; message?: string }[] }
}

interface Table {
  kind: string
  columnDefinitions: { name: string; type: string; priority: number }[]
  rows: { cells: unknown[]; object: { metadata: { name: string } } }[]
}

interface Status {
  kind: string
  code: number
  reason: string
  message: string
  details?: { causes?: { field?: string; message: string; reason: string }[] }
}

const crdFiles = readdirSync(CRD_DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').sort()
const crds: Crd[] = crdFiles.map((f) => parseYaml(readFileSync(path.join(CRD_DIR, f), 'utf8')) as Crd)
/** The files `kubectl apply -k DIR` applies, in order, as paths under examples/ (directory entries followed). */
function kustomized(dir: string): string[] {
  const { resources } = parseYaml(readFileSync(path.join(EXAMPLES, dir, 'kustomization.yaml'), 'utf8')) as { resources: string[] }
  return resources.flatMap((r) => (r.endsWith('.yaml') ? [path.join(dir, r)] : kustomized(path.join(dir, r))))
}
// The README's quick start (namespace, sample Deployments, examples/crs), then the sample sinks.
const exampleFiles = [...kustomized('quickstart'), ...kustomized('sinks')]

let cp: ControlPlane
let dir: string

/** Run fn once; later callers share its result. Each test that needs the CRDs or the examples
 * asks for them, so any one test runs alone; in the first to ask, the apply is the subject. */
function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined
  return () => (p ??= fn())
}

const applyCrds = once(async () => {
  for (const f of crdFiles) await cp.applyYaml(path.join(CRD_DIR, f))
})

// A cluster-scoped kind outside every table: only discovery can say it has no namespace.
const applyFleetCrd = once(async () => {
  await cp.applyYaml(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: fleets.scopetest.kollect.dev}
spec:
  group: scopetest.kollect.dev
  scope: Cluster
  names: {kind: Fleet, listKind: FleetList, plural: fleets, singular: fleet}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`)
})

const applyExamples = once(async () => {
  await applyCrds()
  const out: Record<string, k8s.KubernetesObject[]> = {}
  for (const file of exampleFiles) out[file] = await cp.applyYaml(path.join(EXAMPLES, file))
  return out
})

before(async () => {
  cp = await startControlPlane()
  // On stderr: the test runner owns stdout. The figure this folder's share of the suite depends on.
  process.stderr.write(`kube-apiserver and etcd ready in ${cp.startMs} ms\n`)
  dir = mkdtempSync(path.join(tmpdir(), 'kollect-kube-api-'))
  await cp.applyYaml('apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n')
}, { timeout: 180_000 })

after(async () => {
  await cp?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

describe('the CRDs', () => {
  test('every CRD in manifests/crds is accepted: structural, names accepted, Established, served as written', async () => {
    assert.equal(crds.length, 5)
    await applyCrds()
    for (const crd of crds) {
      const name = crd.metadata?.name ?? ''
      const live = (await cp.request('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`)).json<Crd>()
      const conditions = Object.fromEntries((live.status?.conditions ?? []).map((c) => [c.type, c]))
      assert.equal(conditions['Established']?.status, 'True', `${name} Established`)
      assert.equal(conditions['NamesAccepted']?.status, 'True', `${name} NamesAccepted`)
      assert.equal(conditions['NonStructuralSchema'], undefined, `${name}: ${conditions['NonStructuralSchema']?.message}`)
      // Served as written: no rule, enum, default or column lost on the way (a client that
      // re-serialises CRDs through typed models drops some of them without a word).
      assert.deepEqual(live.spec.versions, crd.spec.versions, `${name} versions as served`)
    }
    const served = (await cp.request('GET', KOLLECT)).json<{ resources: { name: string }[] }>()
    assert.deepEqual(served.resources.map((r) => r.name).filter((n) => !n.includes('/')).sort(), crds.map((c) => c.spec.names.plural).sort())
  })

  test('the quick start and every example CR are admitted as written', async () => {
    assert.ok(exampleFiles.includes('quickstart/workloads.yaml') && exampleFiles.includes('crs/inventory.yaml') && exampleFiles.includes('sinks/sink-s3.yaml'), exampleFiles.join(' '))
    const applied = await applyExamples()
    for (const [file, objs] of Object.entries(applied)) {
      assert.ok(objs.length > 0 && objs.every((o) => o.metadata?.uid), `${file} created`)
    }
    assert.deepEqual(applied['quickstart/workloads.yaml']?.map((o) => `${o.kind} ${o.metadata?.namespace}/${o.metadata?.name}`),
      ['Deployment team-a/web', 'Deployment team-a/checkout', 'Deployment team-a/tmp-canary', 'Deployment team-a/worker'])
  })

  test('the printer columns come back through the table API, status columns included', async () => {
    await applyExamples()
    for (const crd of crds) {
      const columns = crd.spec.versions[0]?.additionalPrinterColumns ?? []
      const r = await cp.request('GET', `${KOLLECT}/namespaces/team-a/${crd.spec.names.plural}`, { headers: { accept: TABLE } })
      assert.equal(r.status, 200, r.body)
      const table = r.json<Table>()
      assert.equal(table.kind, 'Table')
      assert.deepEqual(
        table.columnDefinitions.map((c) => [c.name, c.type, c.priority]),
        [['Name', 'string', 0], ...columns.map((c) => [c.name, c.type, c.priority ?? 0])],
        crd.spec.names.kind,
      )
    }
    const cellsOf = async (plural: string, name: string): Promise<Record<string, unknown>> => {
      const table = (await cp.request('GET', `${KOLLECT}/namespaces/team-a/${plural}/${name}`, { headers: { accept: TABLE } })).json<Table>()
      const row = table.rows[0]
      assert.ok(row, `${plural}/${name} has a row`)
      return Object.fromEntries(table.columnDefinitions.map((c, i) => [c.name, row.cells[i]]))
    }
    const target = await cellsOf('kollecttargets', 'prod-deploys')
    assert.equal(target['Name'], 'prod-deploys')
    assert.equal(target['Kind'], 'Deployment')
    const sink = await cellsOf('kollectsinks', 'git-demo')
    assert.deepEqual([sink['Type'], sink['Cluster']], ['git', 'lab-west'])

    // Status through the status subresource, as Metacontroller writes it: the filtered JSONPath
    // columns pick the Ready condition out of the list.
    const status = {
      matchedCount: 3,
      extractedCount: 3,
      conditions: [
        { type: 'Synced', status: 'False', reason: 'Waiting', message: '', observedGeneration: 1, lastTransitionTime: '2026-01-01T00:00:00Z' },
        { type: 'Ready', status: 'True', reason: 'Extracted', message: '3 objects', observedGeneration: 1, lastTransitionTime: '2026-01-01T00:00:00Z' },
      ],
    }
    const patched = await cp.request('PATCH', `${KOLLECT}/namespaces/team-a/kollecttargets/prod-deploys/status`, { body: { status }, headers: { 'content-type': 'application/merge-patch+json' } })
    assert.equal(patched.status, 200, patched.body)
    const after = await cellsOf('kollecttargets', 'prod-deploys')
    assert.equal(after['Ready'], 'True')
    assert.equal(after['Matched'], 3)
  })
})

// ---- admission against `kollect validate` ----

interface Refusal {
  name: string
  file: string
  text: string
  /** Each field the API server refuses, with words its message carries; `cli` when kollect
   * validate reports it elsewhere or in other words (the default: the same field and words). */
  fields: { field: string; words: string; cli?: { field: string; words: string } }[]
}

const meta = (name: string) => `metadata: {name: ${name}, namespace: team-a}`

const refusals: Refusal[] = [
  {
    name: 'a CEL rule on the spec (namespaces and namespaceSelector together)',
    file: 'target-both.yaml',
    text: `apiVersion: kollect.dev/v1alpha1
kind: KollectTarget
${meta('both')}
spec:
  resource: {group: apps, version: v1, kind: Deployment}
  namespaces: [team-a]
  namespaceSelector: {matchLabels: {team: a}}
  profileRef: {name: deployments-basic}
`,
    fields: [{ field: 'spec', words: 'set namespaces or namespaceSelector, not both' }],
  },
  {
    name: 'a CEL rule with a fieldPath (a postgres sink without its block)',
    file: 'sink-postgres.yaml',
    text: `apiVersion: kollect.dev/v1alpha1
kind: KollectSink
${meta('pg')}
spec:
  type: postgres
  secretRef: {name: pg-creds}
`,
    fields: [{ field: 'spec.postgres', words: 'a postgres sink needs the postgres block ({} takes the defaults)' }],
  },
  {
    name: 'a CEL rule on a list item (cel and jsonPath in one attribute)',
    file: 'profile-two.yaml',
    text: `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
${meta('two')}
spec:
  attributes:
    - name: replicas
      cel: object.spec.replicas
      jsonPath: $.spec.replicas
`,
    // kollect validate puts the hooks' own profile check first (it names the attribute), so the
    // CRD rule's message at the item gives way to that one at the item's cel field.
    fields: [{ field: 'spec.attributes[0]', words: 'set exactly one of cel or jsonPath', cli: { field: 'spec.attributes[0].cel', words: 'exactly one of cel or jsonPath must be set' } }],
  },
  {
    name: 'an enum (a sink type that does not exist)',
    file: 'sink-ftp.yaml',
    text: `apiVersion: kollect.dev/v1alpha1
kind: KollectSink
${meta('ftp')}
spec:
  type: ftp
`,
    fields: [{ field: 'spec.type', words: '"file", "git", "postgres", "nats", "s3", "kafka"' }],
  },
  {
    name: 'a pattern (an attribute name that is not an identifier)',
    file: 'profile-name.yaml',
    text: `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
${meta('bad-name')}
spec:
  attributes:
    - name: 1images
      cel: object.spec.template.spec.containers.map(c, c.image)
`,
    fields: [{ field: 'spec.attributes[0].name', words: '^[A-Za-z_][A-Za-z0-9_]*$' }],
  },
  {
    name: 'a CEL rule on a duration (a debounce past the 168h maximum, issue 24)',
    file: 'inventory-long.yaml',
    text: `apiVersion: kollect.dev/v1alpha1
kind: KollectInventory
${meta('long')}
spec:
  targetRefs: [{name: prod-deploys}]
  debounce: 600h
  maxWait: 168h0m1s
`,
    fields: [{ field: 'spec.debounce', words: 'must be at most 168h' }, { field: 'spec.maxWait', words: 'must be at most 168h' }],
  },
  {
    name: 'a CEL rule on a sink\'s durations (drift interval, retention age)',
    file: 'sink-long.yaml',
    text: `apiVersion: kollect.dev/v1alpha1
kind: KollectSink
${meta('long')}
spec:
  type: postgres
  secretRef: {name: pg-creds}
  drift: {interval: 169h}
  postgres: {snapshotMaxAge: 87601h}
`,
    fields: [{ field: 'spec.drift.interval', words: 'must be at most 168h' }, { field: 'spec.postgres.snapshotMaxAge', words: 'must be at most 87600h' }],
  },
  {
    name: 'a CEL rule on a scope\'s minDebounce',
    file: 'scope-long.yaml',
    text: `apiVersion: kollect.dev/v1alpha1
kind: KollectScope
${meta('long')}
spec:
  minDebounce: 1000h
`,
    fields: [{ field: 'spec.minDebounce', words: 'must be at most 168h' }],
  },
  {
    name: 'an unknown field (strict field validation)',
    file: 'target-typo.yaml',
    text: `apiVersion: kollect.dev/v1alpha1
kind: KollectTarget
${meta('typo')}
spec:
  resource: {group: apps, version: v1, kind: Deployment}
  labelSelecter: {matchLabels: {tier: frontend}}
  profileRef: {name: deployments-basic}
`,
    fields: [{ field: 'spec.labelSelecter', words: 'unknown field' }],
  },
]

/** The API server's refusal of a create (strict field validation, as kubectl sends), as field → message. */
async function admissionCauses(text: string): Promise<Record<string, string>> {
  const obj = parseYaml(text) as { kind: string }
  const crd = crds.find((c) => c.spec.names.kind === obj.kind)
  assert.ok(crd, obj.kind)
  const r = await cp.request('POST', `${KOLLECT}/namespaces/team-a/${crd.spec.names.plural}?fieldValidation=Strict`, { body: obj })
  const status = r.json<Status>()
  const out: Record<string, string> = {}
  if (r.status === 400) {
    // Unknown fields fail decoding, before admission: one message lists them all.
    assert.match(status.message, /strict decoding error: /, r.body)
    for (const m of status.message.matchAll(/unknown field "([^"]+)"/g)) out[m[1]!] = 'unknown field'
    return out
  }
  assert.equal(r.status, 422, `admitted: ${r.body}`)
  assert.equal(status.reason, 'Invalid')
  for (const c of status.details?.causes ?? []) {
    // A note, not a field: CEL rules are skipped while the schema already fails.
    if (c.message.includes('some validation rules were not checked')) continue
    out[c.field ?? ''] = c.message
  }
  return out
}

/** `kollect validate FILE` as users run it: field → message from its error lines. */
function validateFindings(file: string): Record<string, string> {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'dist', 'cli', 'main.js'), 'validate', file], { cwd: dir, encoding: 'utf8', timeout: 30_000 })
  assert.equal(r.status, 1, `kollect validate ${file} should refuse it:\n${r.stdout}${r.stderr}`)
  const out: Record<string, string> = {}
  for (const line of r.stderr.split('\n').filter((l) => l !== '')) {
    // "<file>: document 1 (<Kind> <ns>/<name>): <field>[ (<attribute>)]: <message>"
    const m = /^[^:]+: document \d+ \([^)]*\): ([^ :]+)(?: \([^)]*\))?: (.*)$/.exec(line)
    assert.ok(m, `unexpected validate line: ${line}`)
    out[m[1]!] = m[2]!
  }
  return out
}

describe('admission refuses what kollect validate refuses, at the same field, for the same reason', () => {
  for (const c of refusals) {
    test(c.name, async () => {
      await applyCrds()
      writeFileSync(path.join(dir, c.file), c.text)
      const server = await admissionCauses(c.text)
      const cli = validateFindings(c.file)
      const seen = JSON.stringify({ server, cli })
      assert.deepEqual(Object.keys(server).sort(), c.fields.map((f) => f.field).sort(), `the fields the API server refuses: ${seen}`)
      for (const f of c.fields) {
        assert.ok(server[f.field]?.includes(f.words), `kube-apiserver at ${f.field}: ${seen}`)
        const at = f.cli ?? f
        assert.ok(cli[at.field]?.includes(at.words), `kollect validate at ${at.field}: ${seen}`)
      }
    })
  }
})

// ---- discovery ----

describe('discovery through server/cluster/discovery.ts', () => {
  test('the plural and the scope of built-ins, a namespaced CRD and a cluster-scoped CRD come from discovery', async () => {
    await applyCrds()
    await applyFleetCrd()
    const resolve = createPluralResolver(cp.kc)
    const cases: [ResourceSpec, string, boolean][] = [
      [{ group: 'apps', version: 'v1', kind: 'Deployment' }, 'deployments', true],
      // Not in the well-known table: only discovery knows it.
      [{ group: 'apps', version: 'v1', kind: 'ControllerRevision' }, 'controllerrevisions', true],
      [{ group: '', version: 'v1', kind: 'Endpoints' }, 'endpoints', true],
      [{ group: '', version: 'v1', kind: 'Namespace' }, 'namespaces', false],
      [{ group: 'scheduling.k8s.io', version: 'v1', kind: 'PriorityClass' }, 'priorityclasses', false],
      [{ group: 'kollect.dev', version: 'v1alpha1', kind: 'KollectTarget' }, 'kollecttargets', true],
      [{ group: 'kollect.dev', version: 'v1alpha1', kind: 'KollectProfile' }, 'kollectprofiles', true],
      [{ group: 'scopetest.kollect.dev', version: 'v1', kind: 'Fleet' }, 'fleets', false],
    ]
    for (const [resource, plural, namespaced] of cases) {
      assert.deepEqual(await resolve(resource), { plural, source: 'discovery', namespaced }, JSON.stringify(resource))
    }
    // A plural from the spec still takes its scope from discovery.
    assert.deepEqual(await resolve({ group: 'scopetest.kollect.dev', version: 'v1', kind: 'Fleet', plural: 'fleets' }), { plural: 'fleets', source: 'spec', namespaced: false })
    const missing = await resolve({ group: 'scopetest.kollect.dev', version: 'v1', kind: 'Armada' })
    assert.equal(missing.source, 'unresolved')
    assert.match(missing.message ?? '', /discovery has no kind Armada in scopetest\.kollect\.dev\/v1/)
  })

  test('the scope the resolver returns is what the discovery documents say', async () => {
    await applyCrds()
    await applyFleetCrd()
    const resolve = createPluralResolver(cp.kc)
    const documented = async (groupVersion: string, plural: string): Promise<boolean | undefined> => {
      const base = groupVersion === 'v1' ? '/api/v1' : `/apis/${groupVersion}`
      const list = (await cp.request('GET', base)).json<{ resources: { name: string; namespaced: boolean }[] }>()
      return list.resources.find((r) => r.name === plural)?.namespaced
    }
    const cases: [ResourceSpec, string][] = [
      [{ group: 'apps', version: 'v1', kind: 'Deployment' }, 'deployments'],
      [{ group: '', version: 'v1', kind: 'Namespace' }, 'namespaces'],
      [{ group: 'kollect.dev', version: 'v1alpha1', kind: 'KollectTarget' }, 'kollecttargets'],
      [{ group: 'scopetest.kollect.dev', version: 'v1', kind: 'Fleet' }, 'fleets'],
    ]
    for (const [resource, plural] of cases) {
      const gv = resource.group ? `${resource.group}/${resource.version}` : resource.version
      const want = await documented(gv, plural)
      assert.equal(typeof want, 'boolean', `${plural} in the discovery document`)
      assert.equal((await resolve(resource)).namespaced, want, plural)
    }
  })
})

// ---- kollect preview against live objects ----

describe('kollect preview --kubeconfig', () => {
  const write = (name: string, text: string): string => {
    const file = path.join(dir, name)
    writeFileSync(file, text)
    return file
  }
  const preview = (args: string[]) =>
    spawnSync(process.execPath, [path.join(ROOT, 'dist', 'cli', 'main.js'), 'preview', '--kubeconfig', cp.kubeconfigPath, '-o', 'json', ...args], { cwd: dir, encoding: 'utf8', timeout: 60_000 })
  const printed = (stdout: string): string[] =>
    (JSON.parse(stdout) as { namespace: string; name: string; attributes: Record<string, unknown> }[]).map((i) => `${i.namespace}/${i.name}=${JSON.stringify(i.attributes['value'])}`)

  test('a cluster-scoped CRD: every object is read and extracted, with no namespace', async () => {
    await applyCrds()
    await applyFleetCrd()
    await cp.applyYaml(`apiVersion: scopetest.kollect.dev/v1
kind: Fleet
metadata: {name: east}
spec: {size: 3}
---
apiVersion: scopetest.kollect.dev/v1
kind: Fleet
metadata: {name: west}
spec: {size: 5}
`)
    const profile = write('fleet-profile.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
metadata: {name: fleet-size, namespace: team-a}
spec:
  attributes:
    - {name: value, cel: object.spec.size, type: integer}
`)
    const target = write('fleet-target.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectTarget
metadata: {name: fleets, namespace: team-a}
spec:
  resource: {group: scopetest.kollect.dev, version: v1, kind: Fleet}
  profileRef: {name: fleet-size}
`)
    const scope = write('fleet-scope.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectScope
metadata: {name: platform, namespace: team-a}
spec:
  allowedNamespaces: ['*']
  allowedResources: [{group: scopetest.kollect.dev, kind: Fleet}]
`)
    const r = preview(['--profile', profile, '--target', target, '--scope', scope])
    assert.equal(r.status, 0, r.stderr)
    assert.deepEqual(printed(r.stdout), ['/east=3', '/west=5'])
    assert.match(r.stderr, /2 objects read from the cluster \(all namespaces\)/)
    assert.match(r.stderr, /matched 2, extracted 2, failed 0/)

    // Without a scope allowing all namespaces, a cluster-scoped kind is refused, not 0 of 0.
    const refused = preview(['--profile', profile, '--target', target])
    assert.equal(refused.status, 1, refused.stderr)
    assert.match(refused.stderr, /is not ready: ScopeNamespaceDenied: Fleet is cluster-scoped; the scope of namespace team-a must allow all namespaces/)
  })

  test('a namespaced kind: the objects of the target\'s own namespace only', async () => {
    await applyCrds()
    await cp.applyYaml(`apiVersion: v1
kind: Namespace
metadata: {name: preview-other}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: colour, namespace: team-a, labels: {preview: live}}
data: {value: blue}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: size, namespace: team-a, labels: {preview: live}}
data: {value: large}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: elsewhere, namespace: preview-other, labels: {preview: live}}
data: {value: hidden}
`)
    const profile = write('cm-profile.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
metadata: {name: cm-value, namespace: team-a}
spec:
  attributes:
    - {name: value, cel: object.data.value, type: string}
`)
    const target = write('cm-target.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectTarget
metadata: {name: configmaps, namespace: team-a}
spec:
  resource: {version: v1, kind: ConfigMap}
  profileRef: {name: cm-value}
  labelSelector: {matchLabels: {preview: live}}
`)
    const r = preview(['--profile', profile, '--target', target])
    assert.equal(r.status, 0, r.stderr)
    assert.deepEqual(printed(r.stdout), ['team-a/colour="blue"', 'team-a/size="large"'])
    assert.match(r.stderr, /2 objects read from the cluster \(namespaces team-a\)/)
  })
})
