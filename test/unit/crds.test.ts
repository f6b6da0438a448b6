import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parse as parseYaml } from 'yaml'
import { DEFAULT_KEEP_SNAPSHOTS } from '../../sinks/postgres/config.js'
import {
  crdFileForKind,
  crdForKind,
  findCrdDir,
  kinds,
  validateSpec,
  validateStatus,
  type CrdSchema,
  type KollectKind,
  type ValidationResult,
} from '../../api/crd-schemas.js'

// Found the same way the loader finds the CRDs, so the test runs from the source tree or dist/.
const root = resolve(findCrdDir(import.meta.url, {}), '..', '..')

function readYaml(...path: string[]): Record<string, unknown> {
  return parseYaml(readFileSync(join(root, ...path), 'utf8')) as Record<string, unknown>
}

function yamlFiles(dir: string): string[] {
  return readdirSync(join(root, dir))
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .sort()
}

function errorsOf(result: ValidationResult): { path: string; message: string }[] {
  return result.valid ? [] : result.errors
}

function assertInvalidAt(result: ValidationResult, path: string): void {
  const errors = errorsOf(result)
  assert.ok(
    errors.some((e) => e.path === path),
    `expected an error at ${path}, got ${JSON.stringify(errors)}`,
  )
}

function schemaAt(schema: CrdSchema, path: string[]): CrdSchema | undefined {
  let node: CrdSchema | undefined = schema
  for (const segment of path) {
    if (!node) return undefined
    node = segment === '[]' ? node.items : node.properties?.[segment]
  }
  return node
}

function openApi(kind: KollectKind): CrdSchema {
  const version = crdForKind(kind).spec.versions[0]
  assert.ok(version)
  return version.schema.openAPIV3Schema
}

const expected: Record<KollectKind, { plural: string; short: string; columns: string[]; status: string[] }> = {
  KollectProfile: {
    plural: 'kollectprofiles',
    short: 'kprof',
    columns: ['Attributes', 'Ready', 'Age'],
    status: ['attributeCount', 'conditions', 'observedGeneration'],
  },
  KollectTarget: {
    plural: 'kollecttargets',
    short: 'ktgt',
    columns: ['Ready', 'Kind', 'Matched', 'Extracted', 'Failed', 'Age'],
    status: ['checksum', 'conditions', 'extractedCount', 'failedCount', 'lastError', 'matchedCount', 'observedGeneration', 'resource'],
  },
  KollectSink: {
    plural: 'kollectsinks',
    short: 'ksink',
    columns: ['Type', 'Cluster', 'Ready', 'Reachable', 'Age'],
    status: ['conditions', 'observedGeneration'],
  },
  KollectInventory: {
    plural: 'kollectinventories',
    short: 'kinv',
    columns: ['Ready', 'Synced', 'Items', 'Last Export', 'Age'],
    status: ['checksum', 'conditions', 'itemCount', 'lastExportTime', 'observedGeneration', 'sinks', 'targetCount'],
  },
  KollectScope: {
    plural: 'kollectscopes',
    short: 'kscope',
    columns: ['Age'],
    status: ['observedGeneration'],
  },
}

// ---- the CRDs ----

test('every kind has a CRD with names, scope, one served storage version and the status subresource', () => {
  for (const kind of kinds) {
    const crd = crdForKind(kind)
    const want = expected[kind]
    assert.equal(crd.apiVersion, 'apiextensions.k8s.io/v1', kind)
    assert.equal(crd.metadata.name, `${want.plural}.kollect.dev`)
    assert.equal(crd.spec.group, 'kollect.dev')
    assert.equal(crd.spec.scope, 'Namespaced')
    assert.equal(crd.spec.names.kind, kind)
    assert.equal(crd.spec.names.listKind, `${kind}List`)
    assert.equal(crd.spec.names.plural, want.plural)
    assert.equal(crd.spec.names.singular, kind.toLowerCase())
    assert.deepEqual(crd.spec.names.shortNames, [want.short])
    assert.deepEqual(crd.spec.names.categories, ['kollect'])
    assert.equal(crd.spec.versions.length, 1)
    const [version] = crd.spec.versions
    assert.ok(version)
    assert.equal(version.name, 'v1alpha1')
    assert.equal(version.served, true)
    assert.equal(version.storage, true)
    assert.deepEqual(version.subresources, { status: {} }, `${kind} status subresource`)
    assert.ok(crdFileForKind(kind).endsWith(`kollect.dev_${want.plural}.yaml`))
  }
})

test('printer columns are the ones a person wants, and each points at a declared field', () => {
  for (const kind of kinds) {
    const version = crdForKind(kind).spec.versions[0]
    assert.ok(version)
    const columns = version.additionalPrinterColumns ?? []
    const defaultColumns = columns.filter((c) => (c.priority ?? 0) === 0).map((c) => c.name)
    assert.deepEqual(defaultColumns.map((c) => c.toUpperCase()), expected[kind].columns.map((c) => c.toUpperCase()), kind)
    const age = columns.find((c) => c.name === 'Age')
    assert.deepEqual(age && { type: age.type, jsonPath: age.jsonPath }, { type: 'date', jsonPath: '.metadata.creationTimestamp' })
    for (const column of columns) {
      if (column.jsonPath.startsWith('.metadata.')) continue
      // `.status.conditions[?(@.type=="Ready")].status` → status, conditions, [], status
      const path = column.jsonPath
        .replace(/\[\?\(@\.[A-Za-z]+=="[A-Za-z]+"\)\]/g, '.[]')
        .split('.')
        .filter((s) => s !== '')
      const field = schemaAt(openApi(kind), path)
      assert.ok(field, `${kind} column ${column.name}: ${column.jsonPath} is not in the schema`)
      const wantType = column.type === 'date' ? 'string' : column.type
      assert.equal(field.type, wantType, `${kind} column ${column.name}`)
    }
  }
  const target = crdForKind('KollectTarget').spec.versions[0]?.additionalPrinterColumns ?? []
  assert.equal(target.find((c) => c.name === 'Ready')?.jsonPath, '.status.conditions[?(@.type=="Ready")].status')
  assert.equal(target.find((c) => c.name === 'Kind')?.jsonPath, '.spec.resource.kind')
  const inventory = crdForKind('KollectInventory').spec.versions[0]?.additionalPrinterColumns ?? []
  assert.deepEqual(
    inventory.filter((c) => c.name === 'Items' || c.name === 'Last Export').map((c) => [c.jsonPath, c.type]),
    [['.status.itemCount', 'integer'], ['.status.lastExportTime', 'date']],
  )
})

test('schemas are structural, described, and the status lists exactly the fields the hooks emit', () => {
  for (const kind of kinds) {
    const schema = openApi(kind)
    const walk = (node: CrdSchema, path: string): void => {
      assert.ok(node.type, `${kind} ${path} has no type`)
      for (const [name, child] of Object.entries(node.properties ?? {})) {
        assert.ok(typeof child.description === 'string' && child.description.length > 0, `${kind} ${path}.${name} has no description`)
        walk(child, `${path}.${name}`)
      }
      if (node.items) walk(node.items, `${path}[]`)
      if (typeof node.additionalProperties === 'object') walk(node.additionalProperties, `${path}{}`)
    }
    const spec = schema.properties?.spec
    const status = schema.properties?.status
    assert.ok(spec && status, kind)
    walk(spec, 'spec')
    walk(status, 'status')
    assert.deepEqual(Object.keys(status.properties ?? {}).sort(), expected[kind].status, `${kind} status fields`)
    assert.equal(status['x-kubernetes-preserve-unknown-fields'], undefined, `${kind} status must round-trip`)
    assert.deepEqual(status.properties?.observedGeneration, {
      description: 'metadata.generation this status was computed from.',
      type: 'integer',
      format: 'int64',
    })
    const conditions = status.properties?.conditions
    if (conditions) {
      assert.equal(conditions['x-kubernetes-list-type'], 'map')
      assert.deepEqual(conditions['x-kubernetes-list-map-keys'], ['type'])
      assert.deepEqual(Object.keys(conditions.items?.properties ?? {}).sort(), ['message', 'observedGeneration', 'reason', 'status', 'type'])
      assert.deepEqual(conditions.items?.properties?.status?.enum, ['True', 'False', 'Unknown'])
    }
  }
})

test('the defaults the design states are in the schemas', () => {
  const defaults: [KollectKind, string, unknown][] = [
    ['KollectSink', 'spec.git.branch', 'main'],
    ['KollectSink', 'spec.git.layout', 'document'],
    ['KollectSink', 'spec.deletionPolicy', 'Retain'],
    ['KollectSink', 'spec.postgres.schema', 'public'],
    ['KollectSink', 'spec.postgres.table', 'kollect_items'],
    ['KollectSink', 'spec.postgres.keepSnapshots', DEFAULT_KEEP_SNAPSHOTS],
    ['KollectSink', 'spec.nats.stream', 'KOLLECT'],
    ['KollectSink', 'spec.nats.subject', 'kollect'],
    ['KollectSink', 'spec.s3.layout', 'document'],
    ['KollectSink', 'spec.s3.prefix', 'inventory/{cluster}/{namespace}/{name}'],
    ['KollectSink', 'spec.s3.keepSnapshots', 0],
    ['KollectInventory', 'spec.debounce', '10s'],
    ['KollectInventory', 'spec.maxWait', '2m'],
  ]
  for (const [kind, path, value] of defaults) {
    assert.equal(schemaAt(openApi(kind), path.split('.'))?.default, value, `${kind} ${path}`)
  }
  const attributes = schemaAt(openApi('KollectProfile'), ['spec', 'attributes'])
  assert.equal(attributes?.maxItems, 128)
  assert.equal(attributes?.['x-kubernetes-list-type'], 'map')
  assert.deepEqual(attributes?.['x-kubernetes-list-map-keys'], ['name'])
})

test('findCrdDir honours KOLLECT_CRD_DIR and otherwise searches upward from the module', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kollect-crds-'))
  try {
    const nested = join(dir, 'dist', 'api')
    mkdirSync(nested, { recursive: true })
    mkdirSync(join(dir, 'manifests', 'crds'), { recursive: true })
    assert.equal(findCrdDir(join(nested, 'crd-schemas.js'), {}), join(dir, 'manifests', 'crds'))
    assert.equal(findCrdDir(join(nested, 'crd-schemas.js'), { KOLLECT_CRD_DIR: nested }), nested)
    assert.throws(() => findCrdDir(nested, { KOLLECT_CRD_DIR: join(dir, 'missing') }), /KOLLECT_CRD_DIR/)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  assert.equal(findCrdDir(import.meta.url, {}), join(root, 'manifests', 'crds'))
})

test('the kustomizations list every manifest of their directory', () => {
  for (const dir of ['manifests/crds', 'compositecontrollers', 'examples/crs', 'examples/sinks']) {
    const kustomization = readYaml(dir, 'kustomization.yaml')
    assert.deepEqual([...(kustomization.resources as string[])].sort(), yamlFiles(dir), dir)
  }
})

// ---- specs ----

test('every example CR validates, with no unknown fields', () => {
  const seen = new Set<string>()
  for (const [dir, file] of ['examples/crs', 'examples/sinks'].flatMap((d) => yamlFiles(d).map((f) => [d, f] as const))) {
    const cr = readYaml(dir, file)
    const kind = cr.kind as KollectKind
    assert.ok(kinds.includes(kind), `${file}: ${String(cr.kind)}`)
    assert.equal(cr.apiVersion, 'kollect.dev/v1alpha1', file)
    assert.equal((cr.metadata as { namespace?: string }).namespace, 'team-a', file)
    assert.deepEqual(validateSpec(kind, cr.spec, { rejectUnknownFields: true }), { valid: true }, file)
    seen.add(kind)
  }
  assert.deepEqual([...seen].sort(), [...kinds].sort())
  const profile = readYaml('examples/crs', 'profile-deployments.yaml').spec as { attributes: { name: string }[] }
  assert.deepEqual(
    profile.attributes.map((a) => a.name),
    ['images', 'replicas', 'containerCount', 'labels', 'team', 'ready'],
  )
})

test('invalid specs fail at the offending field', () => {
  assertInvalidAt(
    validateSpec('KollectProfile', {
      attributes: [
        { name: 'ok', cel: 'object.metadata.name' },
        { name: 'alsoOk', jsonPath: '$.metadata.uid' },
        { name: '1bad', cel: 'object.kind' },
      ],
    }),
    'spec.attributes[2].name',
  )
  assertInvalidAt(validateSpec('KollectInventory', { targetRefs: [{ name: 'a' }], debounce: '10 sec' }), 'spec.debounce')
  assertInvalidAt(validateSpec('KollectInventory', { maxWait: '2 minutes' }), 'spec.maxWait')
  assertInvalidAt(validateSpec('KollectScope', { minDebounce: '5' }), 'spec.minDebounce')
  assertInvalidAt(validateSpec('KollectSink', { type: 'ftp' }), 'spec.type')
  assertInvalidAt(validateSpec('KollectSink', { type: 'git', deletionPolicy: 'Orphan' }), 'spec.deletionPolicy')
  assertInvalidAt(validateSpec('KollectSink', { type: 'nats', nats: {} }), 'spec.nats.url')
  assertInvalidAt(validateSpec('KollectSink', { type: 's3', s3: {} }), 'spec.s3.bucket')
  assertInvalidAt(validateSpec('KollectSink', { type: 's3', s3: { bucket: 'inv', keepSnapshots: -1 } }), 'spec.s3.keepSnapshots')
  assertInvalidAt(validateSpec('KollectSink', { type: 'postgres', postgres: { keepSnapshots: -1 } }), 'spec.postgres.keepSnapshots')
  assertInvalidAt(validateSpec('KollectSink', { type: 'postgres', postgres: { snapshotMaxAge: '90d' } }), 'spec.postgres.snapshotMaxAge')
  assertInvalidAt(validateSpec('KollectSink', { type: 'nats', nats: { url: 'nats://n:4222', maxAge: '1 week' } }), 'spec.nats.maxAge')
  assertInvalidAt(validateSpec('KollectSink', { type: 'nats', nats: { url: 'nats://n:4222', maxMessages: -1 } }), 'spec.nats.maxMessages')
  assertInvalidAt(
    validateSpec('KollectTarget', { resource: { group: 'apps', version: 'v1' }, profileRef: { name: 'p' } }),
    'spec.resource.kind',
  )
  assertInvalidAt(validateSpec('KollectTarget', { resource: { version: 'v1', kind: 'Pod' } }), 'spec.profileRef')
  assertInvalidAt(
    validateSpec('KollectTarget', {
      resource: { version: 'v1', kind: 'Pod' },
      profileRef: { name: 'p' },
      labelSelector: { matchExpressions: [{ key: 'tier', operator: 'Like' }] },
    }),
    'spec.labelSelector.matchExpressions[0].operator',
  )
  assertInvalidAt(validateSpec('KollectProfile', { attributes: [{ name: 'x', type: 'date', cel: '1' }] }), 'spec.attributes[0].type')
  assertInvalidAt(validateSpec('KollectProfile', { attributes: [{ name: 'x', cel: 'a'.repeat(4097) }] }), 'spec.attributes[0].cel')
  assertInvalidAt(
    validateSpec('KollectProfile', { attributes: Array.from({ length: 129 }, (_, i) => ({ name: `a${i}`, cel: '1' })) }),
    'spec.attributes',
  )
  assertInvalidAt(validateSpec('KollectTarget', undefined), 'spec')
  assert.deepEqual(validateSpec('KollectScope', undefined), { valid: true })
})

test('duplicate attribute names fail, as the API server rejects them for a map list', () => {
  const result = validateSpec('KollectProfile', {
    attributes: [
      { name: 'a', cel: '1' },
      { name: 'b', cel: '2' },
      { name: 'a', jsonPath: '$.x' },
    ],
  })
  assertInvalidAt(result, 'spec.attributes[2]')
  assert.equal(errorsOf(result).length, 1)
})

test('unknown spec fields pass by default (the API server prunes them) and fail when asked', () => {
  const spec = { type: 'git', gti: { branch: 'main' } }
  assert.deepEqual(validateSpec('KollectSink', spec), { valid: true })
  const strict = validateSpec('KollectSink', spec, { rejectUnknownFields: true })
  assert.deepEqual(errorsOf(strict), [{ path: 'spec.gti', message: 'unknown field' }])
  const labels = validateSpec(
    'KollectTarget',
    {
      resource: { version: 'v1', kind: 'Pod' },
      profileRef: { name: 'p' },
      labelSelector: { matchLabels: { 'app.kubernetes.io/name': 1 } },
    },
    { rejectUnknownFields: true },
  )
  assertInvalidAt(labels, 'spec.labelSelector.matchLabels["app.kubernetes.io/name"]')
})

// ---- statuses ----

const ready = { type: 'Ready', status: 'True', reason: 'Synced', message: 'all good', observedGeneration: 4 }

const sampleStatus: Record<KollectKind, Record<string, unknown>> = {
  KollectProfile: { observedGeneration: 4, attributeCount: 6, conditions: [ready] },
  KollectTarget: {
    observedGeneration: 4,
    matchedCount: 12,
    extractedCount: 11,
    failedCount: 1,
    lastError: 'team-a/web: attribute replicas: no value',
    checksum: 'a'.repeat(64),
    resource: { group: '', version: 'v1', kind: 'Pod', plural: 'pods' },
    conditions: [{ ...ready, status: 'False', reason: 'ExtractionFailed' }],
  },
  KollectSink: { observedGeneration: 1, conditions: [ready] },
  KollectInventory: {
    observedGeneration: 2,
    itemCount: 11,
    checksum: 'b'.repeat(64),
    lastExportTime: '2025-06-01T12:00:00Z',
    targetCount: 1,
    sinks: [
      { name: 'git-demo', namespace: 'team-a', state: 'Synced', checksum: 'b'.repeat(64), itemCount: 11, lastExportTime: '2025-06-01T12:00:00Z', message: '' },
      { name: 'shared-pg', namespace: 'platform', state: 'Failing', checksum: '', itemCount: 0, message: 'connection refused' },
    ],
    conditions: [
      ready,
      { type: 'Synced', status: 'False', reason: 'SinkFailing', message: 'platform/shared-pg: connection refused' },
      { type: 'Degraded', status: 'True', reason: 'SinkFailing', message: 'platform/shared-pg: connection refused' },
    ],
  },
  KollectScope: { observedGeneration: 1 },
}

test('a full status of every kind validates', () => {
  for (const kind of kinds) {
    assert.deepEqual(validateStatus(kind, sampleStatus[kind]), { valid: true }, kind)
    assert.deepEqual(validateStatus(kind, {}), { valid: true }, kind)
    assert.deepEqual(validateStatus(kind, undefined), { valid: true }, kind)
  }
})

test('a status the API server would prune or reject fails, so it cannot loop Metacontroller', () => {
  for (const kind of kinds) {
    assert.deepEqual(errorsOf(validateStatus(kind, { ...sampleStatus[kind], foo: 1 })), [{ path: 'status.foo', message: 'unknown field' }], kind)
  }
  const inventory = sampleStatus.KollectInventory
  const sinks = inventory.sinks as Record<string, unknown>[]
  const withSink = (sink: Record<string, unknown>): unknown => ({ ...inventory, sinks: [{ ...sinks[0], ...sink }] })
  assertInvalidAt(validateStatus('KollectInventory', withSink({ bogus: true })), 'status.sinks[0].bogus')
  assertInvalidAt(validateStatus('KollectInventory', withSink({ state: 'Behind' })), 'status.sinks[0].state')
  assertInvalidAt(validateStatus('KollectInventory', { lastExportTime: 'yesterday' }), 'status.lastExportTime')
  assertInvalidAt(validateStatus('KollectInventory', { itemCount: 1.5 }), 'status.itemCount')
  assertInvalidAt(validateStatus('KollectTarget', { lastError: null }), 'status.lastError')
  assertInvalidAt(validateStatus('KollectTarget', { resource: { kind: 'Pod', uid: 'x' } }), 'status.resource.uid')
  assertInvalidAt(validateStatus('KollectSink', { conditions: [{ ...ready, lastTransitionTime: '2025-06-01T12:00:00Z' }] }), 'status.conditions[0].lastTransitionTime')
  assertInvalidAt(validateStatus('KollectSink', { conditions: [{ ...ready, status: true }] }), 'status.conditions[0].status')
  assertInvalidAt(validateStatus('KollectSink', { conditions: [ready, { ...ready, status: 'False' }] }), 'status.conditions[1]')
  // Every condition a hook writes has a reason and a message (the Kubernetes convention); the CRD holds the hooks to it.
  const { reason: _reason, ...noReason } = ready
  assertInvalidAt(validateStatus('KollectTarget', { conditions: [noReason] }), 'status.conditions[0].reason')
  const { message: _message, ...noMessage } = ready
  assertInvalidAt(validateStatus('KollectInventory', { conditions: [noMessage] }), 'status.conditions[0].message')
})

// ---- CompositeControllers ----

const controllers: { file: string; kind: KollectKind; route: string; resync: number; hooks: string[] }[] = [
  { file: 'kollect-targets.yaml', kind: 'KollectTarget', route: 'targets', resync: 60, hooks: ['customize', 'finalize', 'sync'] },
  { file: 'kollect-inventories.yaml', kind: 'KollectInventory', route: 'inventories', resync: 60, hooks: ['customize', 'finalize', 'sync'] },
  { file: 'kollect-profiles.yaml', kind: 'KollectProfile', route: 'profiles', resync: 300, hooks: ['sync'] },
  { file: 'kollect-sinks.yaml', kind: 'KollectSink', route: 'sinks', resync: 300, hooks: ['customize', 'sync'] },
]

test('each CompositeController calls its kind\'s hooks at v2 on kollect-hooks, finalize only for targets and inventories', () => {
  assert.deepEqual(yamlFiles('compositecontrollers'), controllers.map((c) => c.file).sort())
  for (const want of controllers) {
    const cc = readYaml('compositecontrollers', want.file) as {
      apiVersion: string
      kind: string
      metadata: { name: string }
      spec: Record<string, unknown> & { hooks: Record<string, { version: string; webhook: Record<string, unknown> }> }
    }
    assert.equal(cc.apiVersion, 'metacontroller.k8s.io/v1alpha1', want.file)
    assert.equal(cc.kind, 'CompositeController')
    assert.equal(cc.metadata.name, want.file.replace(/\.yaml$/, ''))
    assert.deepEqual(cc.spec.parentResource, {
      apiVersion: 'kollect.dev/v1alpha1',
      resource: crdForKind(want.kind).spec.names.plural,
      ignoreStatusChanges: true,
    })
    assert.equal(cc.spec.childResources, undefined, want.file)
    assert.equal(cc.spec.generateSelector, true)
    assert.equal(cc.spec.resyncPeriodSeconds, want.resync)
    assert.deepEqual(Object.keys(cc.spec.hooks).sort(), want.hooks, want.file)
    for (const [name, hook] of Object.entries(cc.spec.hooks)) {
      assert.deepEqual(
        hook,
        {
          version: 'v2',
          webhook: {
            service: { name: 'kollect-hooks', namespace: 'kollect-system', port: 8080, protocol: 'http' },
            path: `/hooks/${want.route}/${name}`,
            timeout: '10s',
            authorization: {
              type: 'Bearer',
              secretRef: { name: 'kollect-hook-token', namespace: 'kollect-system', key: 'token' },
            },
          },
        },
        `${want.file} ${name}`,
      )
    }
  }
})
