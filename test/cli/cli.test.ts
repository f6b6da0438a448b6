import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parse as parseYaml, stringify as toYaml } from 'yaml'
import type { Condition, Item, KubeObject } from '../../api/types.js'
import type { SyncRequest } from '../../hooks/request.js'
import { syncTarget, type ObjectOutcome } from '../../hooks/target.js'
import { buildSnapshot } from '../../api/canonical.js'
import { createGitSink } from '../../sinks/git/index.js'
import { gitSinkOptions } from '../support/git.js'
import { makeItems } from '../support/items.js'
import { deployment, loadExampleCr, ROOT, targetSyncRequest } from '../support/metacontroller.js'

// The kollect command as users run it: a real `node dist/cli/main.js` process, its exit code,
// stdout and stderr. Only the hook it is compared with is called in-process.

const MAIN = path.join(ROOT, 'dist', 'cli', 'main.js')
const PROFILE = 'examples/crs/profile-deployments.yaml'
const TARGET = 'examples/crs/target-deployments.yaml'
const SCOPE = 'examples/crs/scope.yaml'

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

function kollect(args: string[], options: { input?: string; cwd?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], { cwd: options.cwd ?? ROOT, stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
    child.stdin.on('error', () => {}) // a process that exits before reading all of stdin
    child.stdin.end(options.input ?? '')
  })
}

function lines(text: string): string[] {
  return text.split('\n').filter((l) => l !== '')
}

/** The table's rows as cells (split on the three-space column gap). */
function rows(table: string): string[][] {
  return lines(table).map((l) => l.split(/ {3,}/))
}

let dir: string
before(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'kollect-cli-'))
})
after(() => rmSync(dir, { recursive: true, force: true }))

function write(name: string, text: string): string {
  const file = path.join(dir, name)
  writeFileSync(file, text)
  return file
}

// Two frontend Deployments the example target selects, and three it must not: a backend one
// (labelSelector), a tmp- one (matchPolicy), one in team-b (namespace); plus a Service.
function sampleObjects(): KubeObject[] {
  return [
    deployment(0),
    deployment(1),
    deployment(2, { tier: 'backend' }),
    deployment(3, { name: 'tmp-scratch' }),
    deployment(4, { namespace: 'team-b' }),
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'team-a' }, spec: { ports: [{ port: 80 }] } },
  ]
}

function kubectlList(items: KubeObject[]): string {
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '' }, items }, null, 2)
}

function multiDocYaml(items: KubeObject[]): string {
  return items.map((o) => toYaml(o)).join('---\n')
}

const HEADER = ['NAMESPACE', 'NAME', 'images', 'replicas', 'containerCount', 'labels', 'team', 'ready']
const EXPECTED_ROWS = [
  ['team-a', 'web-00000', '["registry.example.com/payments/web-000…', '1', '2', '{"app":"web-00000","tier":"frontend","t…', '"payments"', 'false'],
  ['team-a', 'web-00001', '["registry.example.com/payments/web-000…', '2', '2', '{"app":"web-00001","tier":"frontend","t…', '"payments"', 'true'],
]

function assertExampleSummary(stderr: string, source: string): void {
  const err = lines(stderr)
  assert.ok(err.includes('KollectTarget team-a/prod-deploys (apps/v1 Deployment) with KollectProfile team-a/deployments-basic'), stderr)
  assert.ok(err.includes(`6 objects read from ${source}`), stderr)
  assert.ok(err.includes('not selected: 3 (labels do not match labelSelector: 1, matchPolicy is false: 1, namespace is not selected (team-b): 1)'), stderr)
  assert.ok(err.includes('matched 2, extracted 2, failed 0'), stderr)
  assert.ok(err.includes('items: 2'), stderr)
  assert.ok(err.includes('Ready=True Extracted: 2 of 2 matched objects extracted'), stderr)
  assert.ok(err.includes('note: 1 object that is not apps/v1 Deployment skipped'), stderr)
}

describe('kollect (top level)', () => {
  test('--help prints the usage and exits 0', async () => {
    for (const args of [['--help'], ['-h'], ['help']]) {
      const r = await kollect(args)
      assert.equal(r.code, 0, r.stderr)
      assert.match(r.stdout, /^Usage: kollect <command> \[options\]/)
      assert.match(r.stdout, /\n {2}preview {4}/)
      assert.match(r.stdout, /\n {2}validate {3}/)
      assert.equal(r.stderr, '')
    }
  })

  test('--version prints the package version', async () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }
    const r = await kollect(['--version'])
    assert.equal(r.code, 0)
    assert.equal(r.stdout, `kollect ${pkg.version}\n`)
  })

  test('an unknown command, an unknown flag or no command is a usage error (2)', async () => {
    const unknown = await kollect(['frobnicate'])
    assert.equal(unknown.code, 2)
    assert.equal(lines(unknown.stderr)[0], 'kollect: unknown command "frobnicate"')
    assert.match(unknown.stderr, /Usage: kollect <command> \[options\]/)
    assert.equal(unknown.stdout, '')

    const flag = await kollect(['--frobnicate'])
    assert.equal(flag.code, 2)
    assert.equal(lines(flag.stderr)[0], 'kollect: unknown option --frobnicate')

    const none = await kollect([])
    assert.equal(none.code, 2)
    assert.match(none.stderr, /^Usage: kollect <command>/)
  })
})

describe('kollect validate', () => {
  test('--help prints its usage and exits 0', async () => {
    const r = await kollect(['validate', '--help'])
    assert.equal(r.code, 0)
    assert.match(r.stdout, /^Usage: kollect validate \[options\] FILE\|DIR\|- \.\.\./)
    assert.match(r.stdout, /Exit status: 0 every resource valid; 1/)
  })

  test('the examples are valid (0), and a non-Kollect document is skipped with a note', async () => {
    const files = ['crs', 'sinks'].flatMap((d) => readdirSync(path.join(ROOT, 'examples', d)).filter((f) => f.endsWith('.yaml')).sort().map((f) => `examples/${d}/${f}`))
    const r = await kollect(['validate', ...files])
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.stderr, '')
    const out = lines(r.stdout)
    assert.ok(out.includes('examples/crs/profile-deployments.yaml: document 1 (KollectProfile team-a/deployments-basic): valid'), r.stdout)
    assert.ok(out.includes('examples/crs/target-deployments.yaml: document 1 (KollectTarget team-a/prod-deploys): valid'), r.stdout)
    assert.ok(out.includes('examples/sinks/sink-postgres.yaml: document 1 (KollectSink team-a/shared-pg): valid'), r.stdout)
    assert.ok(out.includes('examples/crs/kustomization.yaml: document 1 (Kustomization): skipped, not a Kollect resource'), r.stdout)
    // Every example is one Kollect resource, except the two kustomizations.
    assert.equal(out.at(-1), `${files.length - 2} valid, 0 invalid, 2 skipped`)
  })

  test('a directory stands for its YAML files', async () => {
    const r = await kollect(['validate', '--quiet', 'examples/crs'])
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /^[1-9][0-9]* valid, 0 invalid, 1 skipped\n$/)
  })

  const cases: { name: string; file: string; text: string; errors: string[] }[] = [
    {
      name: 'a bad attribute name',
      file: 'bad-name.yaml',
      text: `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
metadata: {name: bad-name, namespace: team-a}
spec:
  attributes:
    - name: 1images
      cel: object.spec.template.spec.containers.map(c, c.image)
`,
      errors: ['bad-name.yaml: document 1 (KollectProfile team-a/bad-name): spec.attributes[0].name (1images): name "1images" must match ^[A-Za-z_][A-Za-z0-9_]*$'],
    },
    {
      name: 'a CEL syntax error, with its position, in the second document',
      file: 'cel.yaml',
      text: `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
metadata: {name: fine, namespace: team-a}
spec:
  attributes: [{name: replicas, jsonPath: $.spec.replicas}]
---
apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
metadata: {name: x, namespace: team-a}
spec:
  attributes:
    - name: images
      cel: object.spec.((
`,
      errors: ['cel.yaml: document 2 (KollectProfile team-a/x): spec.attributes[0].cel (images): Expected IDENTIFIER, got LPAREN at position 12'],
    },
    {
      name: 'an unknown field, and a matchPolicy that does not compile',
      file: 'target.yaml',
      text: `apiVersion: kollect.dev/v1alpha1
kind: KollectTarget
metadata: {name: t, namespace: team-a}
spec:
  resource: {group: apps, version: v1, kind: Deployment}
  labelSelecter: {matchLabels: {tier: frontend}}
  matchPolicy: "object.metadata.name.startsWith('tmp-'"
  profileRef: {name: deployments-basic}
`,
      errors: [
        'target.yaml: document 1 (KollectTarget team-a/t): spec.matchPolicy: Expected RPAREN, got EOF at position 38',
        'target.yaml: document 1 (KollectTarget team-a/t): spec.labelSelecter: unknown field',
      ],
    },
    {
      name: 'a bad duration',
      file: 'inventory.yaml',
      text: `apiVersion: kollect.dev/v1alpha1
kind: KollectInventory
metadata: {name: inv, namespace: team-a}
spec:
  targetRefs: [{name: prod-deploys}]
  debounce: 10 seconds
`,
      errors: ['inventory.yaml: document 1 (KollectInventory team-a/inv): spec.debounce: must be a duration such as 500ms, 10s, 2m or 1h30m (got "10 seconds")'],
    },
    {
      name: "the CRD's x-kubernetes-validations rules and the sink checks",
      file: 'sink.yaml',
      text: `apiVersion: kollect.dev/v1alpha1
kind: KollectSink
metadata: {name: s, namespace: team-a}
spec:
  type: file
  file: {path: "out/{cluster}/{team}.json"}
  git: {branch: main}
`,
      errors: [
        'sink.yaml: document 1 (KollectSink team-a/s): spec.git: the git block is only for sinks of type git',
        'sink.yaml: document 1 (KollectSink team-a/s): spec.file.path: unknown placeholder {team}',
      ],
    },
    {
      name: 'a YAML syntax error, with its line',
      file: 'syntax.yaml',
      text: `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
metadata:
  name: y
spec:
  attributes: [
    {name: a, cel: "object.kind"}
  bad: 1
`,
      errors: ['syntax.yaml: document 1: YAML syntax error at line 8, column 3: Flow sequence in block collection must be sufficiently indented and end with a ]'],
    },
    { name: 'an empty file', file: 'empty.yaml', text: '', errors: ['empty.yaml: empty: no YAML document in it'] },
    { name: 'a file of comments and separators only', file: 'comments.yaml', text: '# to do\n---\n---\n', errors: ['comments.yaml: empty: no YAML document in it'] },
  ]
  for (const c of cases) {
    test(`${c.name} is invalid (1), named by file, document, resource and field`, async () => {
      write(c.file, c.text)
      const r = await kollect(['validate', c.file], { cwd: dir })
      assert.equal(r.code, 1, r.stdout + r.stderr)
      assert.deepEqual(lines(r.stderr), c.errors)
    })
  }

  test('every invalid document is reported, and the others still count', async () => {
    const r = await kollect(['validate', 'cel.yaml', 'bad-name.yaml', 'no-such.yaml'], { cwd: dir })
    // The third file does not exist: a usage error (2) wins over invalid documents (1).
    assert.equal(r.code, 2)
    assert.ok(lines(r.stderr).includes('kollect validate: cannot read no-such.yaml: no such file'), r.stderr)
    assert.ok(lines(r.stdout).includes('cel.yaml: document 1 (KollectProfile team-a/fine): valid'), r.stdout)
    assert.equal(lines(r.stdout).at(-1), '1 valid, 2 invalid, 0 skipped')
  })

  test('a file that does not exist is a usage error (2)', async () => {
    const r = await kollect(['validate', 'no-such-file.yaml'], { cwd: dir })
    assert.equal(r.code, 2)
    assert.equal(lines(r.stderr)[0], 'kollect validate: cannot read no-such-file.yaml: no such file')
  })

  test('no files, or an unknown flag, is a usage error (2) with the usage', async () => {
    const none = await kollect(['validate'])
    assert.equal(none.code, 2)
    assert.equal(lines(none.stderr)[0], 'kollect validate: no files given')
    assert.match(none.stderr, /Usage: kollect validate/)
    const flag = await kollect(['validate', '--strict', PROFILE])
    assert.equal(flag.code, 2)
    assert.match(lines(flag.stderr)[0] as string, /^kollect validate: Unknown option '--strict'/)
  })

  test('- reads stdin', async () => {
    const r = await kollect(['validate', '-'], { input: readFileSync(path.join(ROOT, TARGET), 'utf8') })
    assert.equal(r.code, 0, r.stderr)
    assert.equal(lines(r.stdout)[0], 'stdin: document 1 (KollectTarget team-a/prod-deploys): valid')
  })
})

describe('kollect preview', () => {
  test('--help prints its usage and exits 0', async () => {
    const r = await kollect(['preview', '--help'])
    assert.equal(r.code, 0)
    assert.match(r.stdout, /^Usage: kollect preview --profile FILE --target FILE --objects FILE\|-/)
    assert.equal(r.stderr, '')
  })

  test('a kubectl List (JSON): the table has the frontend rows only, tmp- and others excluded', async () => {
    const objects = write('objects.json', kubectlList(sampleObjects()))
    const r = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects])
    assert.equal(r.code, 0, r.stderr)
    assert.deepEqual(rows(r.stdout), [HEADER, ...EXPECTED_ROWS])
    assertExampleSummary(r.stderr, objects)
  })

  test('multi-document YAML gives the same table', async () => {
    const objects = write('objects.yaml', multiDocYaml(sampleObjects()))
    const r = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects])
    assert.equal(r.code, 0, r.stderr)
    assert.deepEqual(rows(r.stdout), [HEADER, ...EXPECTED_ROWS])
  })

  test('--objects - reads stdin', async () => {
    const r = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', '-'], { input: kubectlList(sampleObjects()) })
    assert.equal(r.code, 0, r.stderr)
    assert.deepEqual(rows(r.stdout), [HEADER, ...EXPECTED_ROWS])
    assertExampleSummary(r.stderr, 'stdin')
  })

  test('--output json is the items, with the extracted attribute values', async () => {
    const objects = write('objects.json', kubectlList(sampleObjects()))
    const r = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects, '--output', 'json'])
    assert.equal(r.code, 0, r.stderr)
    const items = JSON.parse(r.stdout) as Item[]
    assert.deepEqual(items.map((i) => `${i.namespace}/${i.name}`), ['team-a/web-00000', 'team-a/web-00001'])
    const first = items[0] as Item
    assert.deepEqual({ ...first, attributes: undefined }, {
      group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'team-a', name: 'web-00000',
      uid: '6f1c1d2e-0000-4000-8000-000000000000', target: { namespace: 'team-a', name: 'prod-deploys' }, attributes: undefined,
    })
    assert.deepEqual(first.attributes, {
      images: ['registry.example.com/payments/web-00000:1.0.0', 'registry.example.com/sidecars/envoy:1.29.1'],
      replicas: 1,
      containerCount: 2,
      labels: { app: 'web-00000', tier: 'frontend', team: 'payments', 'app.kubernetes.io/part-of': 'shop' },
      team: 'payments',
      ready: false,
    })
    assert.equal(items[1]?.attributes['replicas'], 2)
    assert.equal(items[1]?.attributes['ready'], true)
  })

  test('--output yaml is the same items as YAML', async () => {
    const objects = write('objects.json', kubectlList(sampleObjects()))
    const json = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects, '-o', 'json'])
    const yaml = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects, '-o', 'yaml'])
    assert.equal(yaml.code, 0, yaml.stderr)
    assert.deepEqual(parseYaml(yaml.stdout), JSON.parse(json.stdout))
  })

  test('a failing required attribute: exit 1, with the errors counted per attribute', async () => {
    const profile = write('profile-failing.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
metadata: {name: deployments-basic, namespace: team-a}
spec:
  attributes:
    - {name: image, cel: "object.spec.template.spec.containers[0].image"}
    - {name: replicas, jsonPath: $.spec.replicas, type: boolean}
    - {name: strategy, cel: object.spec.strategy.type, type: integer, optional: true}
`)
    const objects = write('objects.json', kubectlList(sampleObjects()))
    const r = await kollect(['preview', '--profile', profile, '--target', TARGET, '--objects', objects])
    assert.equal(r.code, 1, r.stderr)
    assert.deepEqual(rows(r.stdout), [['NAMESPACE', 'NAME', 'image', 'replicas', 'strategy']])
    const err = lines(r.stderr)
    const from = err.indexOf('matched 2, extracted 0, failed 2')
    assert.ok(from > 0, r.stderr)
    assert.deepEqual(err.slice(from, from + 6), [
      'matched 2, extracted 0, failed 2',
      'errors by attribute:',
      '  replicas: 2 objects; first: team-a/web-00000: expected boolean, got number 1',
      '  strategy (optional: the key is left out): 2 objects; first: team-a/web-00000: expected integer, got string "RollingUpdate"',
      'items: 0',
      'Ready=True ExtractedWithErrors: 2 of 2 objects had extraction errors',
    ])
  })

  test('an invalid profile or target: exit 1 with the reason, nothing on stdout', async () => {
    const profile = write('profile-invalid.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
metadata: {name: deployments-basic, namespace: team-a}
spec:
  attributes: [{name: images, cel: "object.spec.(("}]
`)
    const objects = write('objects.json', kubectlList(sampleObjects()))
    const bad = await kollect(['preview', '--profile', profile, '--target', TARGET, '--objects', objects])
    assert.equal(bad.code, 1)
    assert.equal(bad.stdout, '')
    assert.deepEqual(lines(bad.stderr), [
      'KollectProfile team-a/deployments-basic is invalid:',
      '  spec.attributes[0].cel (images): Expected IDENTIFIER, got LPAREN at position 12',
    ])

    const target = write('target-invalid.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectTarget
metadata: {name: t, namespace: team-a}
spec:
  resource: {group: apps, version: v1, kind: Deployment}
  matchPolicy: "object.metadata.name.size() >"
  profileRef: {name: deployments-basic}
`)
    const policy = await kollect(['preview', '--profile', PROFILE, '--target', target, '--objects', objects])
    assert.equal(policy.code, 1)
    assert.equal(policy.stdout, '')
    assert.ok(lines(policy.stderr).includes('KollectTarget team-a/t is not ready: InvalidMatchPolicy: spec.matchPolicy: Unexpected token: EOF at position 29'), policy.stderr)
  })

  test('the same objects through kollect preview and through the target sync hook give the same items, counts and reasons', async () => {
    const parent = loadExampleCr('target-deployments.yaml')
    parent['spec'] = { ...(parent['spec'] as object), namespaces: ['team-a', 'team-b', 'team-c', 'kube-system'] }
    const deployments = [...sampleObjects().filter((o) => o.kind === 'Deployment'), deployment(5, { namespace: 'team-c' }), deployment(6, { namespace: 'kube-system' })]
    const target = write('target-four-namespaces.yaml', toYaml(parent))
    const objects = write('objects-four-namespaces.json', kubectlList(deployments))
    const r = await kollect(['preview', '--profile', PROFILE, '--target', target, '--objects', objects, '--scope', SCOPE, '-o', 'json'])
    assert.equal(r.code, 0, r.stderr)

    // The hook as Metacontroller calls it: only the target's kind, keyed namespace/name, as JSON.
    const request = JSON.parse(JSON.stringify(targetSyncRequest(deployments, { target: parent, scopes: [loadExampleCr('scope.yaml')] }))) as SyncRequest
    const outcomes: ObjectOutcome[] = []
    const hook = syncTarget(request, { plural: { plural: 'deployments', source: 'spec' }, observe: (_key, outcome) => outcomes.push(outcome) })
    const status = hook.response.status as { matchedCount: number; extractedCount: number; failedCount: number; conditions: Condition[] }

    assert.deepEqual(JSON.parse(r.stdout) as Item[], JSON.parse(JSON.stringify(hook.report?.items)) as Item[])
    assert.deepEqual(hook.report?.items.map((i) => `${i.namespace}/${i.name}`), ['team-a/web-00000', 'team-a/web-00001', 'team-b/web-00004'])
    const err = lines(r.stderr)
    assert.ok(err.includes(`matched ${status.matchedCount}, extracted ${status.extractedCount}, failed ${status.failedCount}`), r.stderr)
    assert.deepEqual(outcomes.flatMap((o) => ('rejection' in o ? [o.rejection.type] : [])).sort(), ['labelsDoNotMatch', 'matchPolicyFalse', 'namespaceDenied', 'namespaceNotSelected'])
    assert.ok(err.includes('not selected: 4 (labels do not match labelSelector: 1, matchPolicy is false: 1, ' +
      'namespace is denied by scope (kube-system): 1, namespace is not selected (team-c): 1)'), r.stderr)
    const degraded = status.conditions.find((c) => c.type === 'Degraded')
    assert.equal(degraded?.reason, 'ScopeNamespaceDenied')
    assert.ok(err.includes(`Degraded=True ${degraded.reason}: ${degraded.message}`), r.stderr)
  })

  test('--scope widens the namespaces as the cluster would; without it a note says why they are refused', async () => {
    const target = write('target-two-namespaces.yaml', readFileSync(path.join(ROOT, TARGET), 'utf8').replace('  labelSelector:', '  namespaces: [team-a, team-b]\n  labelSelector:'))
    const objects = write('objects.json', kubectlList(sampleObjects()))
    const scoped = await kollect(['preview', '--profile', PROFILE, '--target', target, '--objects', objects, '--scope', SCOPE])
    assert.equal(scoped.code, 0, scoped.stderr)
    assert.deepEqual(rows(scoped.stdout).map((r) => `${r[0]}/${r[1]}`), ['NAMESPACE/NAME', 'team-a/web-00000', 'team-a/web-00001', 'team-b/web-00004'])

    const unscoped = await kollect(['preview', '--profile', PROFILE, '--target', target, '--objects', objects])
    assert.equal(unscoped.code, 0, unscoped.stderr)
    assert.equal(rows(unscoped.stdout).length, 3)
    const err = lines(unscoped.stderr)
    assert.ok(err.includes('Degraded=True ScopeNamespaceDenied: namespaces not allowed by scope: team-b (no KollectScope: own namespace only)'), unscoped.stderr)
    assert.ok(err.includes('note: no --scope: like a namespace without a KollectScope, the target sees only its own namespace (team-a); ' +
      "pass --scope with the namespace's KollectScopes"), unscoped.stderr)
  })

  test('offline, objects without a namespace are cluster-scoped whatever the kind: a scope allowing "*" selects them', async () => {
    const fleet = (name: string, size: number, namespace?: string): KubeObject =>
      ({ apiVersion: 'fleet.example.com/v1', kind: 'Fleet', metadata: { name, uid: `uid-${name}`, ...(namespace ? { namespace } : {}) }, spec: { size } })
    const objects = write('fleets.json', kubectlList([fleet('east', 3), fleet('west', 5), fleet('mine', 1, 'team-a')]))
    const both = write('fleet.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectProfile
metadata: {name: fleet-size, namespace: team-a}
spec:
  attributes:
    - {name: size, cel: object.spec.size, type: integer}
---
apiVersion: kollect.dev/v1alpha1
kind: KollectTarget
metadata: {name: fleets, namespace: team-a}
spec:
  resource: {group: fleet.example.com, version: v1, kind: Fleet, plural: fleets}
  profileRef: {name: fleet-size}
`)
    const scope = write('fleet-scope.yaml', `apiVersion: kollect.dev/v1alpha1
kind: KollectScope
metadata: {name: platform, namespace: team-a}
spec:
  allowedNamespaces: ['*']
`)
    const wide = await kollect(['preview', '--profile', both, '--target', both, '--objects', objects, '--scope', scope])
    assert.equal(wide.code, 0, wide.stderr)
    assert.deepEqual(rows(wide.stdout).map((r) => `${r[0]}/${r[1]}=${r[2]}`), ['NAMESPACE/NAME=size', '<none>/east=3', '<none>/west=5', 'team-a/mine=1'])

    const own = await kollect(['preview', '--profile', both, '--target', both, '--objects', objects])
    assert.equal(own.code, 0, own.stderr)
    assert.deepEqual(rows(own.stdout).map((r) => `${r[0]}/${r[1]}`), ['NAMESPACE/NAME', 'team-a/mine'])
    assert.ok(lines(own.stderr).some((l) => l.startsWith('not selected: 2 (cluster-scoped, and the scope does not allow all namespaces ("*"): 2)')), own.stderr)
  })

  test('--progress reports every 1,000 objects on stderr; without it (not a terminal) nothing', async () => {
    const objects = write('many.json', kubectlList(Array.from({ length: 2500 }, (_, i) => deployment(i))))
    const withProgress = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects, '--progress', '-o', 'json'])
    assert.equal(withProgress.code, 0, withProgress.stderr)
    assert.deepEqual(lines(withProgress.stderr).filter((l) => l.startsWith('kollect: ')), ['kollect: checked 1000 of 2500 objects', 'kollect: checked 2000 of 2500 objects'])
    assert.equal((JSON.parse(withProgress.stdout) as Item[]).length, 2500)

    const quiet = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects, '-o', 'json'])
    assert.equal(quiet.code, 0)
    assert.deepEqual(lines(quiet.stderr).filter((l) => l.startsWith('kollect: ')), [])
  })

  test('objects that are not valid YAML: exit 1 with the syntax error, as validate exits for the same text', async () => {
    const text = 'items: [\n  bad: 1\n'
    const objects = write('objects-broken.yaml', text)
    const r = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects])
    assert.equal(r.code, 1, r.stderr)
    assert.equal(r.stdout, '')
    assert.ok(lines(r.stderr)[0]?.startsWith(`${objects}: document 1: YAML syntax error at line 3, column 1:`), r.stderr)
    const validate = await kollect(['validate', '-'], { input: text })
    assert.equal(validate.code, r.code, validate.stderr)
  })

  test('docs/preview.md prints -o yaml with its keys in the order the tool prints them', async () => {
    // The first item of an -o yaml output: its keys, with `attributes`' own keys apart (the doc's
    // example extracts other attributes than the example profile).
    const shape = (yaml: string) => {
      const keys: string[] = []
      const attributes: string[] = []
      let inAttributes = false
      for (const line of yaml.split('\n')) {
        if (keys.length > 0 && line.startsWith('- ')) break
        const m = /^(- | *)([\w.-]+):/.exec(line)
        if (!m) continue
        const depth = (m[1] as string).length
        if (depth === 2) inAttributes = m[2] === 'attributes'
        if (inAttributes && depth === 4) attributes.push(m[2] as string)
        else if (!inAttributes || depth === 2) keys.push(`${' '.repeat(depth)}${m[2]}`)
      }
      return { keys, attributes }
    }
    const doc = readFileSync(path.join(ROOT, 'docs', 'preview.md'), 'utf8')
    const example = /-o yaml 2>\/dev\/null\n([\s\S]*?)\n```/.exec(doc)?.[1]
    assert.ok(example, 'docs/preview.md has the -o yaml example')
    const objects = write('objects.json', kubectlList(sampleObjects()))
    const real = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects, '-o', 'yaml'])
    assert.equal(real.code, 0, real.stderr)
    const shown = shape(example)
    const printed = shape(real.stdout)
    assert.deepEqual(shown.keys, printed.keys)
    // Attributes print in code-unit order too.
    assert.deepEqual(printed.attributes, [...printed.attributes].sort())
    assert.deepEqual(shown.attributes, [...shown.attributes].sort())
  })

  test('usage errors exit 2', async () => {
    const objects = write('objects.json', kubectlList(sampleObjects()))
    const cases: [string[], string][] = [
      [['preview', '--target', TARGET, '--objects', objects], 'kollect preview: --profile FILE is required'],
      [['preview', '--profile', PROFILE, '--objects', objects], 'kollect preview: --target FILE is required'],
      [['preview', '--profile', PROFILE, '--target', TARGET], 'kollect preview: give --objects FILE (- for stdin), or --kubeconfig/--context to read a cluster'],
      [['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects, '--kubeconfig', 'k.yaml'], 'kollect preview: give --objects, or --kubeconfig/--context to read a cluster, not both'],
      [['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects, '-o', 'csv'], 'kollect preview: --output must be one of table, json, yaml, got "csv"'],
      [['preview', '--profile', PROFILE, '--target', TARGET, '--objects', path.join(dir, 'missing.json')], `kollect preview: cannot read ${path.join(dir, 'missing.json')}: no such file`],
      [['preview', '--profile', TARGET, '--target', TARGET, '--objects', objects], `kollect preview: ${TARGET} holds no KollectProfile`],
    ]
    for (const [args, message] of cases) {
      const r = await kollect(args)
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`)
      assert.equal(lines(r.stderr)[0], message)
      assert.equal(r.stdout, '')
    }
    const flag = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--objects', objects, '--bogus'])
    assert.equal(flag.code, 2)
    assert.match(flag.stderr, /^kollect preview: Unknown option '--bogus'/)
    assert.match(flag.stderr, /Usage: kollect preview/)
  })
})

// ---- reading a cluster: a fake API server that answers discovery and paged lists ----

describe('kollect preview --kubeconfig', () => {
  let server: Server
  let kubeconfig: string
  const requests: string[] = []
  const teamA = [deployment(0), deployment(1), deployment(2), deployment(3, { name: 'tmp-scratch' })]

  before(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const url = new URL(req.url ?? '/', 'http://x')
      requests.push(`${req.headers.authorization ?? ''} ${url.pathname}${url.search}`)
      const send = (body: unknown, status = 200) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(body))
      }
      if (url.pathname === '/apis/apps/v1') {
        return send({
          kind: 'APIResourceList', apiVersion: 'v1', groupVersion: 'apps/v1',
          resources: [{ name: 'deployments', singularName: 'deployment', namespaced: true, kind: 'Deployment', verbs: ['get', 'list', 'watch'] }],
        })
      }
      const m = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/deployments$/.exec(url.pathname)
      if (m) {
        // What the API server sends: a typed list whose items carry no apiVersion and kind.
        const strip = (o: KubeObject) => ({ ...o, apiVersion: undefined, kind: undefined })
        const list = (items: KubeObject[], next?: string) => send({
          kind: 'DeploymentList', apiVersion: 'apps/v1', metadata: { resourceVersion: '9', ...(next ? { continue: next } : {}) }, items: items.map(strip),
        })
        if (m[1] === 'team-a') return url.searchParams.get('continue') === 'page-2' ? list(teamA.slice(2)) : list(teamA.slice(0, 2), 'page-2')
        if (m[1] === 'team-b') return list([deployment(4, { namespace: 'team-b' })])
        return send({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: `namespaces "${m[1]}" is forbidden`, reason: 'Forbidden', code: 403 }, 403)
      }
      send({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'not found', reason: 'NotFound', code: 404 }, 404)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    kubeconfig = write('kubeconfig.yaml', toYaml({
      apiVersion: 'v1',
      kind: 'Config',
      // The client refuses plain HTTP unless TLS verification is off.
      clusters: [{ name: 'fake', cluster: { server: `http://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'dev', user: { token: 'dev-token' } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'dev', namespace: 'team-a' } }, { name: 'other', context: { cluster: 'fake', user: 'dev' } }],
      'current-context': 'other',
    }))
  })
  after(() => new Promise<void>((resolve) => server.close(() => resolve())))

  test('reads every page of each namespace the target names, with its label selector, as raw JSON', async () => {
    requests.length = 0
    const target = write('target-live.yaml', readFileSync(path.join(ROOT, TARGET), 'utf8').replace('  labelSelector:', '  namespaces: [team-a, team-b]\n  labelSelector:'))
    const profile = write('profile-live.yaml', readFileSync(path.join(ROOT, PROFILE), 'utf8') + '    - {name: created, cel: object.metadata.creationTimestamp}\n')
    const r = await kollect(['preview', '--profile', profile, '--target', target, '--kubeconfig', kubeconfig, '--context', 'fake', '--scope', SCOPE, '-o', 'json'])
    assert.equal(r.code, 0, r.stderr)
    const items = JSON.parse(r.stdout) as Item[]
    assert.deepEqual(items.map((i) => `${i.namespace}/${i.name}`), ['team-a/web-00000', 'team-a/web-00001', 'team-a/web-00002', 'team-b/web-00004'])
    // The timestamp as the API server wrote it: not re-serialised through a typed model.
    assert.equal(items[0]?.attributes['created'], '2026-11-01T10:00:00Z')
    assert.ok(lines(r.stderr).includes('5 objects read from the cluster (namespaces team-a, team-b)'), r.stderr)
    const lists = requests.filter((q) => q.includes('/deployments'))
    assert.deepEqual(lists, [
      'Bearer dev-token /apis/apps/v1/namespaces/team-a/deployments?labelSelector=tier%3Dfrontend&limit=500',
      'Bearer dev-token /apis/apps/v1/namespaces/team-a/deployments?labelSelector=tier%3Dfrontend&limit=500&continue=page-2',
      'Bearer dev-token /apis/apps/v1/namespaces/team-b/deployments?labelSelector=tier%3Dfrontend&limit=500',
    ])
  })

  test('a namespace the cluster refuses: exit 1 with the API server\'s message', async () => {
    const target = write('target-forbidden.yaml', readFileSync(path.join(ROOT, TARGET), 'utf8').replace('  labelSelector:', '  namespaces: [kube-system]\n  labelSelector:'))
    const r = await kollect(['preview', '--profile', PROFILE, '--target', target, '--kubeconfig', kubeconfig, '--context', 'fake'])
    assert.equal(r.code, 1)
    assert.equal(lines(r.stderr)[0], 'kollect preview: cannot list Deployment.apps/v1 in namespace kube-system: HTTP 403: namespaces "kube-system" is forbidden')
  })

  test('an unknown context is a usage error (2) that lists the contexts', async () => {
    const r = await kollect(['preview', '--profile', PROFILE, '--target', TARGET, '--kubeconfig', kubeconfig, '--context', 'prod'])
    assert.equal(r.code, 2)
    assert.equal(lines(r.stderr)[0], 'kollect preview: no context "prod" in the kubeconfig (contexts: fake, other)')
  })
})

describe('kollect inventory', () => {
  const inventory = { namespace: 'team-a', name: 'prod-inventory' }
  const items = makeItems(25)
  const snapshot = buildSnapshot(inventory, 'lab-west', items)

  test('every layout reads back as the same items, at any revision; the summary names the layout and checksum', async () => {
    for (const layout of ['document', 'perResource', 'sharded'] as const) {
      const repo = path.join(dir, `inventory-${layout}`)
      const sink = createGitSink(gitSinkOptions(repo, { layout, shards: 3 }))
      await sink.write(buildSnapshot(inventory, 'lab-west', items.slice(1)))
      await sink.write(snapshot)
      await sink.close()

      const now = await kollect(['inventory', '--repo', repo, '--cluster', 'lab-west', '-o', 'json', 'team-a/prod-inventory'])
      assert.equal(now.code, 0, now.stderr)
      assert.deepEqual(JSON.parse(now.stdout), snapshot.items, layout)
      assert.equal(now.stderr, `25 items, ${layout} layout${layout === 'perResource' ? '' : `, checksum ${snapshot.checksum}`}, at HEAD\n`)
      const before = await kollect(['inventory', '--repo', repo, '--cluster', 'lab-west', '--rev', 'HEAD~1', '-o', 'json', 'team-a/prod-inventory'])
      assert.deepEqual(JSON.parse(before.stdout), buildSnapshot(inventory, 'lab-west', items.slice(1)).items, layout)
    }
    const table = await kollect(['inventory', '--repo', path.join(dir, 'inventory-sharded'), '--cluster', 'lab-west', 'team-a/prod-inventory'])
    assert.deepEqual(rows(table.stdout)[0], ['NAMESPACE', 'NAME', ...Object.keys(items[0]!.attributes).sort()])
    assert.equal(rows(table.stdout).length, 26)
  })

  test('what is not there is exit 1 with a message; a wrong invocation is exit 2', async () => {
    const repo = path.join(dir, 'inventory-document')
    const cases: { args: string[]; code: number; stderr: RegExp }[] = [
      { args: ['--repo', repo, '--cluster', 'lab-east', 'team-a/prod-inventory'], code: 1, stderr: /team-a\/prod-inventory \(cluster lab-east\) is not in .* at HEAD/ },
      { args: ['--repo', repo, '--cluster', 'lab-west', '--rev', 'v9', 'team-a/prod-inventory'], code: 1, stderr: /cannot read v9 in / },
      { args: ['--repo', path.join(dir, 'nowhere'), '--cluster', 'lab-west', 'team-a/prod-inventory'], code: 1, stderr: /no such directory: / },
      { args: ['--repo', repo, '--cluster', 'lab-west', '--rev=--output=/tmp/x', 'team-a/prod-inventory'], code: 2, stderr: /is not a revision/ },
      { args: ['--repo', repo, '--cluster', 'lab-west', 'team-a/../x'], code: 2, stderr: /is not NAMESPACE\/NAME/ },
      { args: ['--repo', repo, 'team-a/prod-inventory'], code: 2, stderr: /--cluster is required/ },
    ]
    for (const c of cases) {
      const run = await kollect(['inventory', ...c.args])
      assert.equal(run.code, c.code, `${c.args.join(' ')}: ${run.stderr}`)
      assert.match(run.stderr, c.stderr)
      assert.equal(run.stdout, '')
    }
  })
})
