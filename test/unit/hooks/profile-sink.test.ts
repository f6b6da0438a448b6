import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { validateStatus } from '../../../api/crd-schemas.js'
import type { Condition, KollectSinkSpec, KubeObject, ProfileStatus, SinkStatus } from '../../../api/types.js'
import { syncProfile } from '../../../hooks/profile-sync.js'
import type { CustomizeRequest, SyncRequest, SyncResponse } from '../../../hooks/request.js'
import { customizeSink, mayCheck, reviewSink, syncSink, type SinkPolicy } from '../../../hooks/sink-sync.js'
import { enableLinearRegExps } from '../../../server/process/regexp-engine.js'
import { controllerFor, customizeRequest, loadExampleCr, relatedMap, syncRequest, TYPES } from '../../support/metacontroller.js'
import { asSyncRequest, cond, scopeCr, wire } from './fixtures.js'

// matches() patterns need the engine the process entry points switch on.
enableLinearRegExps()

function profileRequest(attributes?: object[]): SyncRequest {
  const p = loadExampleCr('profile-deployments.yaml')
  const parent = attributes ? { ...p, spec: { attributes } } : p
  return asSyncRequest(syncRequest(controllerFor('kollect-profiles'), parent, {}))
}

function profileStatus(attributeCount: number, ready: Condition): SyncResponse<ProfileStatus> {
  return { status: { observedGeneration: 1, attributeCount, conditions: [ready] }, children: [] }
}

describe('syncProfile', () => {
  const cases: { reason: string; attributes?: object[]; want: SyncResponse<ProfileStatus> }[] = [
    {
      reason: 'the example profile compiles all six attributes',
      want: profileStatus(6, cond('Ready', 'True', 'Compiled', '6 attributes compiled')),
    },
    {
      reason: 'each failing expression is named with its field, attribute, error and position; the good ones are not mentioned',
      attributes: [
        { name: 'images', cel: 'object.spec.template.spec.containers.map(c, c.image' },
        { name: 'replicas', jsonPath: '$.spec.replicas' },
        { name: 'ports', jsonPath: '$..ports[?(@.containerPort)]' },
        { name: 'name', cel: 'object.metadata.name.matches(object.metadata.labels.app)' },
      ],
      want: profileStatus(
        4,
        cond(
          'Ready',
          'False',
          'InvalidExpression',
          'spec.attributes[0].cel (images): Expected RPAREN, got EOF at position 51; ' +
            'spec.attributes[2].jsonPath (ports): filter expressions "?()" are not supported; use a CEL attribute at position 9; ' +
            'spec.attributes[3].cel (name): matches() needs a string literal pattern, so it can be checked before it runs at position 0',
        ),
      ),
    },
    {
      reason: 'a spec the CRD schema refuses is InvalidSpec, with the schema path',
      attributes: [{ name: 'replicas', jsonPath: '$.spec.replicas', type: 'int' }],
      want: profileStatus(1, cond('Ready', 'False', 'InvalidSpec', 'spec.attributes[0].type: must be one of "string", "integer", "number", "boolean", "list", "object"')),
    },
    {
      reason: 'an empty profile compiles to zero attributes',
      attributes: [],
      want: profileStatus(0, cond('Ready', 'True', 'Compiled', '0 attributes compiled')),
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const got = syncProfile(profileRequest(c.attributes))
      assert.deepStrictEqual(got, c.want)
      assert.deepStrictEqual(validateStatus('KollectProfile', got.status), { valid: true })
    })
  }
})

// Refuses link-local and loopback hosts, the way the server's SSRF guard does.
const POLICY: SinkPolicy = {
  checkEndpoint(url: string): string | null {
    const host = new URL(url).hostname
    return host.startsWith('169.254.') || host === 'localhost' ? `host ${host} is link-local or loopback` : null
  },
}

function sinkCr(spec: Partial<KollectSinkSpec> & Record<string, unknown>): KubeObject {
  return { apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectSink', metadata: { name: 's', namespace: 'team-a', generation: 2 }, spec }
}

function sinkStatus(ready: Condition): SyncResponse<SinkStatus> {
  return { status: { observedGeneration: ready.observedGeneration, conditions: [ready] }, children: [] }
}

const VALID = (generation: number) => sinkStatus(cond('Ready', 'True', 'Valid', 'configuration is valid', generation))
const INVALID = (message: string) => sinkStatus(cond('Ready', 'False', 'InvalidConfig', message, 2))

describe('syncSink', () => {
  const cases: { reason: string; parent: KubeObject; want: SyncResponse<SinkStatus> }[] = [
    { reason: 'the example git sink (local repository, templated path) is valid', parent: loadExampleCr('sink-git.yaml'), want: VALID(1) },
    { reason: 'the example git sink in review mode (a Gitea remote, the token in its secretRef) is valid', parent: loadExampleCr('sink-git-review.yaml', 'sinks'), want: VALID(1) },
    { reason: 'the example nats sink is valid when the policy allows its url', parent: loadExampleCr('sink-nats.yaml', 'sinks'), want: VALID(1) },
    { reason: 'the example postgres sink with its secretRef is valid', parent: loadExampleCr('sink-postgres.yaml', 'sinks'), want: VALID(1) },
    { reason: 'the example s3 sink with its secretRef is valid when the policy allows its endpoint', parent: loadExampleCr('sink-s3.yaml', 'sinks'), want: VALID(1) },
    {
      reason: 'a file sink with a relative templated path is valid',
      parent: sinkCr({ type: 'file', cluster: 'lab-west', file: { path: 'snapshots/{cluster}/{namespace}-{name}.yaml', format: 'yaml' } }),
      want: VALID(2),
    },
    {
      reason: 'a git sink with a remote the policy allows is valid',
      parent: sinkCr({ type: 'git', secretRef: { name: 'git-creds' }, git: { url: 'https://git.example.com/inventory.git', branch: 'main' } }),
      want: VALID(2),
    },
    {
      reason: 'a postgres sink without secretRef has nowhere to read its DSN from',
      parent: sinkCr({ type: 'postgres', postgres: { schema: 'public', table: 'kollect_items' } }),
      want: INVALID('spec.secretRef: a postgres sink reads its DSN from a Secret'),
    },
    {
      reason: 'a path template with ".." is refused',
      parent: sinkCr({ type: 'git', git: { path: 'inventory/../../etc/{name}.json' } }),
      want: INVALID('spec.git.path: must be relative and must not contain ".."'),
    },
    {
      reason: 'a backslash ".." is refused too',
      parent: sinkCr({ type: 'file', file: { path: 'out\\..\\..\\{name}.json' } }),
      want: INVALID('spec.file.path: must be relative and must not contain ".."'),
    },
    {
      reason: 'an absolute file path is refused',
      parent: sinkCr({ type: 'file', file: { path: '/etc/{name}.json' } }),
      want: INVALID('spec.file.path: must be relative and must not contain ".."'),
    },
    {
      reason: 'an unknown placeholder is refused, by name',
      parent: sinkCr({ type: 'git', git: { path: 'inventory/{bogus}/{name}.json' } }),
      want: INVALID('spec.git.path: unknown placeholder {bogus}'),
    },
    {
      reason: 'every problem of the path is reported, placeholders first',
      parent: sinkCr({ type: 'file', file: { path: '../{bogus}/{Name}.json' } }),
      want: INVALID('spec.file.path: unknown placeholder {bogus}; spec.file.path: unknown placeholder {Name}; spec.file.path: must be relative and must not contain ".."'),
    },
    {
      reason: 'a nats url the policy refuses is reported with the policy reason',
      parent: sinkCr({ type: 'nats', nats: { url: 'nats://169.254.169.254:4222' } }),
      want: INVALID('spec.nats.url: host 169.254.169.254 is link-local or loopback'),
    },
    {
      reason: 'a git url the policy refuses is reported with the policy reason',
      parent: sinkCr({ type: 'git', git: { url: 'https://localhost/repo.git' } }),
      want: INVALID('spec.git.url: host localhost is link-local or loopback'),
    },
    {
      reason: 'a type the schema does not know is refused with the allowed values',
      parent: sinkCr({ type: 'ftp' as 'file' }),
      want: INVALID('spec.type: must be one of "file", "git", "postgres", "nats", "s3", "kafka"'),
    },
    {
      reason: 'an s3 endpoint the policy refuses is reported with the policy reason',
      parent: sinkCr({ type: 's3', secretRef: { name: 's3-keys' }, s3: { bucket: 'inventory', endpoint: 'http://169.254.169.254' } }),
      want: INVALID('spec.s3.endpoint: host 169.254.169.254 is link-local or loopback'),
    },
    {
      reason: 'an s3 sink without a secretRef is refused: it never borrows the exporter\'s own cloud identity',
      parent: sinkCr({ type: 's3', s3: { bucket: 'inventory' } }),
      want: INVALID('spec.secretRef: an s3 sink reads its access keys from a Secret'),
    },
    {
      reason: 'an s3 prefix with an unknown placeholder or ".." is refused',
      parent: sinkCr({ type: 's3', secretRef: { name: 's3-keys' }, s3: { bucket: 'inventory', prefix: '../{bogus}' } }),
      want: INVALID('spec.s3.prefix: unknown placeholder {bogus}; spec.s3.prefix: must be relative and must not contain ".."'),
    },
    { reason: 'the example kafka sink is valid when the policy allows its brokers', parent: loadExampleCr('sink-kafka.yaml', 'sinks'), want: VALID(1) },
    {
      reason: 'every kafka broker passes the SSRF guard',
      parent: sinkCr({ type: 'kafka', kafka: { brokers: 'kafka.example.com:9092, 169.254.169.254:9092' } }),
      want: INVALID('spec.kafka.brokers: host 169.254.169.254 is link-local or loopback'),
    },
    {
      reason: 'a kafka broker without a port is refused',
      parent: sinkCr({ type: 'kafka', kafka: { brokers: 'kafka.example.com' } }),
      want: INVALID('spec.kafka.brokers: "kafka.example.com" must be host:port, with a port from 1 to 65535'),
    },
    {
      reason: 'a kafka broker on port 0 or above 65535 is refused, as the sink refuses it: never Ready=True Valid',
      parent: sinkCr({ type: 'kafka', kafka: { brokers: 'kafka.example.com:0,kafka.example.com:65536' } }),
      want: INVALID('spec.kafka.brokers: "kafka.example.com:0" must be host:port, with a port from 1 to 65535; ' +
        'spec.kafka.brokers: "kafka.example.com:65536" must be host:port, with a port from 1 to 65535'),
    },
    {
      reason: 'a kafka sink whose state topic is its events topic is refused',
      parent: sinkCr({ type: 'kafka', kafka: { brokers: 'kafka.example.com:9092', topic: 'inv', stateTopic: 'inv' } }),
      want: INVALID('spec.kafka.stateTopic: must differ from the topic'),
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const got = syncSink(asSyncRequest(syncRequest(controllerFor('kollect-sinks'), c.parent, {})), POLICY)
      assert.deepStrictEqual(got, c.want)
      assert.deepStrictEqual(validateStatus('KollectSink', wire(got.status)), { valid: true })
    })
  }

  test('a nats sink without its nats block is not valid configuration', () => {
    // The CRD rule "a nats sink needs the nats block with a url" is not enforced by ajv; the hook must re-check it.
    const got = syncSink(asSyncRequest(syncRequest(controllerFor('kollect-sinks'), sinkCr({ type: 'nats' }), {})), POLICY)
    const ready = got.status.conditions?.[0]
    assert.deepStrictEqual({ status: ready?.status, reason: ready?.reason }, { status: 'False', reason: 'InvalidConfig' })
  })

  test('the policy sees exactly the configured url, once', () => {
    const seen: string[] = []
    syncSink(asSyncRequest(syncRequest(controllerFor('kollect-sinks'), loadExampleCr('sink-nats.yaml', 'sinks'), {})), { checkEndpoint: (url) => (seen.push(url), null) })
    syncSink(asSyncRequest(syncRequest(controllerFor('kollect-sinks'), loadExampleCr('sink-git.yaml'), {})), { checkEndpoint: (url) => (seen.push(url), null) })
    assert.deepStrictEqual(seen, ['nats://nats.nats.svc:4222'])
  })
})

describe('syncSink with a reachability check', () => {
  const sink = () => asSyncRequest(syncRequest(controllerFor('kollect-sinks'), loadExampleCr('sink-nats.yaml', 'sinks'), {}))
  const cases: { reason: string; check: { reachable: boolean; message: string }; want: Condition[] }[] = [
    {
      reason: 'a sink that answered its healthcheck is Ready and Reachable',
      check: { reachable: true, message: '' },
      want: [cond('Ready', 'True', 'Valid', 'configuration is valid'), cond('Reachable', 'True', 'Reachable', 'the sink answered its healthcheck')],
    },
    {
      reason: 'an unreachable sink stays Ready (exports wait and retry) and says why it is Unreachable',
      check: { reachable: false, message: 'nats sink team-a/events: connect failed: ECONNREFUSED' },
      want: [cond('Ready', 'True', 'Valid', 'configuration is valid'), cond('Reachable', 'False', 'Unreachable', 'nats sink team-a/events: connect failed: ECONNREFUSED')],
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const got = syncSink(sink(), POLICY, c.check)
      assert.deepStrictEqual(got.status.conditions, c.want)
      assert.deepStrictEqual(validateStatus('KollectSink', wire(got.status)), { valid: true })
    })
  }
})

describe('customizeSink', () => {
  test('a sink asks for the KollectScopes of its own namespace only', () => {
    const parent = { ...loadExampleCr('sink-git.yaml'), metadata: { name: 'git', namespace: 'team-b', uid: 'u', generation: 1 } }
    assert.deepStrictEqual(customizeSink(wire(customizeRequest(controllerFor('kollect-sinks'), parent)) as unknown as CustomizeRequest), {
      relatedResources: [{ apiVersion: 'kollect.dev/v1alpha1', resource: 'kollectscopes', namespace: 'team-b', labelSelector: {} }],
    })
  })
})

describe('syncSink: the Secret a sink may use', () => {
  const FOREIGN = { type: 'git' as const, secretRef: { name: 'git-creds', namespace: 'team-b' }, git: { url: 'https://git.example.com/inv.git' } }
  const withScopes = (spec: Partial<KollectSinkSpec> & Record<string, unknown>, scopes: KubeObject[]) =>
    asSyncRequest(syncRequest(controllerFor('kollect-sinks'), sinkCr(spec), relatedMap([TYPES.scope], { [TYPES.scope]: scopes })))
  const DENIED = 'Secret team-b/git-creds of KollectSink team-a/s is not allowed by the scope of namespace team-a'
  const cases: { reason: string; spec: Partial<KollectSinkSpec> & Record<string, unknown>; scopes: KubeObject[]; want: SyncResponse<SinkStatus>; checked: boolean }[] = [
    {
      reason: 'another namespace\'s Secret without a scope is ScopeSecretDenied, naming the ref',
      spec: FOREIGN, scopes: [], checked: false,
      want: sinkStatus(cond('Ready', 'False', 'ScopeSecretDenied', `${DENIED} (no KollectScope: own namespace only)`, 2)),
    },
    {
      reason: 'a scope of the sink\'s namespace listing the Secret allows it',
      spec: FOREIGN, scopes: [scopeCr('creds', { allowedSecrets: [{ namespace: 'team-b', name: 'git-creds' }] })], checked: true,
      want: VALID(2),
    },
    {
      reason: 'a scope in the Secret\'s namespace cannot grant it: only the sink\'s namespace\'s scopes count',
      spec: FOREIGN, scopes: [scopeCr('creds', { allowedSecrets: [{ namespace: 'team-b', name: 'git-creds' }] }, 'team-b')], checked: false,
      want: sinkStatus(cond('Ready', 'False', 'ScopeSecretDenied', `${DENIED} (no KollectScope: own namespace only)`, 2)),
    },
    {
      reason: 'a denied Secret and a configuration problem are both reported, the denial as the reason',
      spec: { ...FOREIGN, git: { url: 'https://localhost/x.git' } }, scopes: [scopeCr('other', {})], checked: false,
      want: sinkStatus(cond('Ready', 'False', 'ScopeSecretDenied', `${DENIED} (KollectScope other); spec.git.url: host localhost is link-local or loopback`, 2)),
    },
    {
      reason: 'the sink\'s own namespace spelled out needs no scope',
      spec: { ...FOREIGN, secretRef: { name: 'git-creds', namespace: 'team-a' } }, scopes: [], checked: true,
      want: VALID(2),
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const req = withScopes(c.spec, c.scopes)
      const got = syncSink(req, POLICY)
      assert.deepStrictEqual(got, c.want)
      assert.equal(mayCheck(reviewSink(req, POLICY)), c.checked, 'reachability is checked only for a valid sink whose Secret is allowed')
      assert.deepStrictEqual(validateStatus('KollectSink', wire(got.status)), { valid: true })
    })
  }
})
