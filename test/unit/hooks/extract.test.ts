import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { canonicalJson } from '../../../api/canonical.js'
import type { AttributeSpec, JsonObject, KubeObject } from '../../../api/types.js'
import { LAST_APPLIED, expressionInput, extractObject, type ExtractResult } from '../../../hooks/extract.js'
import { DEFAULT_LIMITS } from '../../../hooks/limits.js'
import { deployment } from '../../support/metacontroller.js'
import { profileOf, wire } from './fixtures.js'

// deployment(7): web-00007 in team-a, 4 replicas (all ready), containers app (8080) and envoy (15001).
const DEPLOY = wire(deployment(7))
const APP_IMAGE = 'registry.example.com/payments/web-00007:1.7.0'
const ENVOY_IMAGE = 'registry.example.com/sidecars/envoy:1.29.1'

function extract(object: KubeObject, attributes: AttributeSpec[], opts: { redactKeys?: string[]; maxItemBytes?: number } = {}): ExtractResult {
  return extractObject(object, profileOf(attributes, opts.redactKeys), opts.maxItemBytes ?? DEFAULT_LIMITS.maxItemBytes)
}

/** The result of a successful extraction: bytes is the size of the attributes as JSON. */
function extracted(attributes: JsonObject, errors: string[] = []): ExtractResult {
  const json = canonicalJson(attributes)
  return { attributes, errors, bytes: Buffer.byteLength(json), json }
}

/** The result when a required attribute failed: no attributes at all. */
function failed(errors: string[]): ExtractResult {
  return { errors, bytes: 0 }
}

interface Case {
  reason: string
  object?: KubeObject
  attributes: AttributeSpec[]
  redactKeys?: string[]
  maxItemBytes?: number
  want: ExtractResult
}

function runCases(cases: Case[]): void {
  for (const c of cases) {
    test(c.reason, () => {
      assert.deepStrictEqual(extract(c.object ?? DEPLOY, c.attributes, { redactKeys: c.redactKeys, maxItemBytes: c.maxItemBytes }), c.want)
    })
  }
}

describe('extractObject: CEL and JSONPath attributes on a Deployment', () => {
  runCases([
    {
      reason: 'a CEL map over the containers gives the images in pod template order',
      attributes: [{ name: 'images', cel: 'object.spec.template.spec.containers.map(c, c.image)' }],
      want: extracted({ images: [APP_IMAGE, ENVOY_IMAGE] }),
    },
    {
      reason: 'CEL strings, bools and JSONPath numbers land side by side in profile order',
      attributes: [
        { name: 'name', cel: 'object.metadata.name' },
        { name: 'ready', cel: 'object.status.readyReplicas == object.spec.replicas' },
        { name: 'replicas', jsonPath: '$.spec.replicas' },
      ],
      want: extracted({ name: 'web-00007', ready: true, replicas: 4 }),
    },
    {
      reason: 'a definite JSONPath with an index gives the scalar, not a one-element list',
      attributes: [{ name: 'sidecar', jsonPath: '$.spec.template.spec.containers[1].name' }],
      want: extracted({ sidecar: 'envoy' }),
    },
    {
      reason: 'a bracket-quoted key with dots and slashes is still a definite path',
      attributes: [{ name: 'partOf', jsonPath: "$.metadata.labels['app.kubernetes.io/part-of']" }],
      want: extracted({ partOf: 'shop' }),
    },
    {
      reason: 'a definite JSONPath to an object gives the object itself',
      attributes: [{ name: 'requests', jsonPath: '$.spec.template.spec.containers[0].resources.requests' }],
      want: extracted({ requests: { cpu: '100m', memory: '128Mi' } }),
    },
    {
      reason: 'a wildcard JSONPath gives a list of every match',
      attributes: [{ name: 'containers', jsonPath: '$.spec.template.spec.containers[*].name' }],
      want: extracted({ containers: ['app', 'envoy'] }),
    },
    {
      reason: 'a wildcard JSONPath with a single match is still a list, so the shape does not depend on the data',
      attributes: [{ name: 'periods', jsonPath: '$.spec.template.spec.containers[*].readinessProbe.periodSeconds' }],
      want: extracted({ periods: [10] }),
    },
    {
      reason: 'a wildcard JSONPath with no match is an empty list, not null',
      attributes: [{ name: 'initImages', jsonPath: '$.spec.template.spec.initContainers[*].image' }],
      want: extracted({ initImages: [] }),
    },
    {
      reason: 'recursive descent is a list too',
      attributes: [{ name: 'ports', jsonPath: '$..containerPort' }],
      want: extracted({ ports: [8080, 15001] }),
    },
    {
      reason: 'a slice is a list even when it selects one element',
      attributes: [{ name: 'first', jsonPath: '$.spec.template.spec.containers[0:1].name' }],
      want: extracted({ first: ['app'] }),
    },
    {
      reason: 'a union is a list',
      attributes: [{ name: 'both', jsonPath: '$.spec.template.spec.containers[0,1].name' }],
      want: extracted({ both: ['app', 'envoy'] }),
    },
  ])
})

describe('extractObject: missing values', () => {
  runCases([
    {
      reason: 'a required CEL attribute whose field is absent exports null',
      attributes: [{ name: 'paused', cel: 'object.spec.paused' }],
      want: extracted({ paused: null }),
    },
    {
      reason: 'a required JSONPath attribute whose field is absent exports null',
      attributes: [{ name: 'paused', jsonPath: '$.spec.paused' }],
      want: extracted({ paused: null }),
    },
    {
      reason: 'a missing key deep in a map is missing, not an evaluation error',
      attributes: [{ name: 'owner', cel: "object.metadata.labels['owner']" }],
      want: extracted({ owner: null }),
    },
    {
      reason: 'an optional attribute whose field is absent leaves its key out and keeps the others',
      attributes: [
        { name: 'paused', cel: 'object.spec.paused', optional: true },
        { name: 'nodeSelector', jsonPath: '$.spec.template.spec.nodeSelector', optional: true },
        { name: 'name', cel: 'object.metadata.name', optional: true },
      ],
      want: extracted({ name: 'web-00007' }),
    },
    {
      reason: 'has() turns absence into a false value rather than a missing one',
      attributes: [{ name: 'hasPaused', cel: 'has(object.spec.paused)' }],
      want: extracted({ hasPaused: false }),
    },
    {
      reason: 'an explicit CEL null is a value: a required attribute exports null, an optional one keeps the key',
      attributes: [
        { name: 'required', cel: 'null' },
        { name: 'optional', cel: 'null', optional: true },
      ],
      want: extracted({ required: null, optional: null }),
    },
  ])
})

describe('extractObject: type hints', () => {
  runCases([
    {
      reason: 'integer turns the double 3.0 into 3',
      attributes: [{ name: 'n', cel: '3.0', type: 'integer' }],
      want: extracted({ n: 3 }),
    },
    {
      reason: 'integer parses a numeric string',
      attributes: [{ name: 'n', cel: "'42'", type: 'integer' }],
      want: extracted({ n: 42 }),
    },
    {
      reason: 'integer refuses 3.5, and a required attribute takes the whole item down',
      attributes: [{ name: 'name', cel: 'object.metadata.name' }, { name: 'n', cel: '3.5', type: 'integer' }],
      want: failed(['n: expected integer, got number 3.5']),
    },
    {
      reason: 'integer refuses a non-numeric string',
      attributes: [{ name: 'n', cel: "'abc'", type: 'integer' }],
      want: failed(['n: expected integer, got string "abc"']),
    },
    {
      reason: 'a coercion failure on an optional attribute drops its key, keeps the others and is reported',
      attributes: [{ name: 'name', cel: 'object.metadata.name' }, { name: 'n', cel: "'abc'", type: 'integer', optional: true }],
      want: extracted({ name: 'web-00007' }, ['n: expected integer, got string "abc"']),
    },
    {
      reason: 'number parses a decimal string',
      attributes: [{ name: 'ratio', cel: "'2.5'", type: 'number' }],
      want: extracted({ ratio: 2.5 }),
    },
    {
      reason: 'string turns a number and a bool into their text',
      attributes: [
        { name: 'replicas', jsonPath: '$.spec.replicas', type: 'string' },
        { name: 'flag', cel: 'true', type: 'string' },
      ],
      want: extracted({ replicas: '4', flag: 'true' }),
    },
    {
      reason: 'string refuses an object',
      attributes: [{ name: 'labels', jsonPath: '$.metadata.labels', type: 'string' }],
      want: failed(['labels: expected string, got object']),
    },
    {
      reason: 'boolean accepts the strings "true" and "false"',
      attributes: [
        { name: 'yes', cel: "'true'", type: 'boolean' },
        { name: 'no', cel: "'false'", type: 'boolean' },
      ],
      want: extracted({ yes: true, no: false }),
    },
    {
      reason: 'boolean refuses any other string',
      attributes: [{ name: 'b', cel: "'yes'", type: 'boolean' }],
      want: failed(['b: expected boolean, got string "yes"']),
    },
    {
      reason: 'list wraps a scalar and leaves a list alone',
      attributes: [
        { name: 'names', cel: 'object.metadata.name', type: 'list' },
        { name: 'images', jsonPath: '$.spec.template.spec.containers[*].image', type: 'list' },
      ],
      want: extracted({ names: ['web-00007'], images: [APP_IMAGE, ENVOY_IMAGE] }),
    },
    {
      reason: 'object accepts a map',
      attributes: [{ name: 'selector', jsonPath: '$.spec.selector.matchLabels', type: 'object' }],
      want: extracted({ selector: { app: 'web-00007' } }),
    },
    {
      reason: 'object refuses a list',
      attributes: [{ name: 'containers', jsonPath: '$.spec.template.spec.containers', type: 'object' }],
      want: failed(['containers: expected object, got list']),
    },
    {
      reason: 'a type hint does not turn a missing value into a value',
      attributes: [{ name: 'paused', cel: 'object.spec.paused', type: 'boolean' }],
      want: extracted({ paused: null }),
    },
  ])
})

describe('extractObject: CEL evaluation errors', () => {
  runCases([
    {
      reason: 'a division by zero in a required attribute gives no attributes and names the attribute',
      attributes: [{ name: 'name', cel: 'object.metadata.name' }, { name: 'boom', cel: '1 / 0' }],
      want: failed(['boom: division by zero']),
    },
    {
      reason: 'a failed int() conversion in a required attribute gives no attributes and names the attribute',
      attributes: [{ name: 'owner', cel: 'int("x")' }, { name: 'name', cel: 'object.metadata.name' }],
      want: failed(['owner: int() type error: cannot convert to int']),
    },
    {
      reason: 'an error in an optional attribute drops only its key and is still reported',
      attributes: [{ name: 'boom', cel: '1 / 0', optional: true }, { name: 'name', cel: 'object.metadata.name' }],
      want: extracted({ name: 'web-00007' }, ['boom: division by zero']),
    },
    {
      reason: 'several failing attributes are all reported, in profile order',
      attributes: [{ name: 'a', cel: '1 / 0', optional: true }, { name: 'b', cel: 'int("x")' }],
      want: failed(['a: division by zero', 'b: int() type error: cannot convert to int']),
    },
    {
      reason: 'JSON numbers are doubles in CEL, so int arithmetic on them is a type error, not a crash',
      attributes: [{ name: 'next', cel: 'object.spec.replicas + 1' }],
      want: failed(['next: no such overload: dyn<double> + int']),
    },
    {
      reason: 'a NaN result cannot be exported',
      attributes: [{ name: 'nan', cel: '0.0 / 0.0' }],
      want: failed(['nan: value NaN is not a finite number']),
    },
  ])
})

describe('extractObject: CEL values become plain JSON', () => {
  runCases([
    {
      reason: 'an int literal (a bigint in cel-js) becomes a JSON number',
      attributes: [{ name: 'n', cel: '3' }],
      want: extracted({ n: 3 }),
    },
    {
      reason: 'int arithmetic on a converted field becomes a JSON number',
      attributes: [{ name: 'double', cel: 'int(object.spec.replicas) * 2' }],
      want: extracted({ double: 8 }),
    },
    {
      reason: 'an unsigned int becomes a JSON number',
      attributes: [{ name: 'u', cel: '7u' }],
      want: extracted({ u: 7 }),
    },
    {
      reason: 'an int beyond 2^53 becomes a decimal string instead of losing digits',
      attributes: [{ name: 'big', cel: '9223372036854775807' }],
      want: extracted({ big: '9223372036854775807' }),
    },
    {
      reason: 'a timestamp becomes RFC 3339 text',
      attributes: [{ name: 'at', cel: "timestamp('2026-11-01T10:00:00Z')" }],
      want: extracted({ at: '2026-11-01T10:00:00.000Z' }),
    },
    {
      reason: 'bytes become base64',
      attributes: [{ name: 'raw', cel: 'b"abc"' }],
      want: extracted({ raw: 'YWJj' }),
    },
    {
      reason: 'a map with int keys becomes an object with string keys',
      attributes: [{ name: 'm', cel: "{1: 'a'}" }],
      want: extracted({ m: { '1': 'a' } }),
    },
  ])

  test('a CEL optional is unwrapped: a present value is exported, an absent one is missing', () => {
    // object.?field is the idiomatic way to read a field that may be absent (optional types are enabled in cel.ts).
    assert.deepStrictEqual(
      extract(DEPLOY, [
        { name: 'replicas', cel: 'object.?spec.replicas' },
        { name: 'paused', cel: 'object.?spec.paused' },
        { name: 'strategy', cel: 'object.?spec.strategy.type', optional: true },
        { name: 'minReady', cel: 'object.?spec.minReadySeconds', optional: true },
      ]),
      extracted({ replicas: 4, paused: null, strategy: 'RollingUpdate' }),
    )
  })
})

describe('extractObject: Secret payloads never reach an expression', () => {
  const attributes: AttributeSpec[] = [
    { name: 'data', cel: 'object.data' },
    { name: 'hasData', cel: 'has(object.data)' },
    { name: 'stringData', jsonPath: '$.stringData' },
    { name: 'values', jsonPath: '$..*' },
    { name: 'whole', cel: 'object' },
  ]
  const metadata = { name: 'db', namespace: 'team-a' }
  runCases([
    {
      reason: 'a core Secret has neither data nor stringData, through CEL, JSONPath, recursive descent or the whole object',
      object: wire({ apiVersion: 'v1', kind: 'Secret', metadata, type: 'Opaque', data: { dsn: 'cG9zdGdyZXM6Ly8=' }, stringData: { raw: 'postgres://u:p@h/db' } }),
      attributes,
      want: extracted({
        data: null,
        hasData: false,
        stringData: null,
        values: ['v1', 'Secret', metadata, 'Opaque', 'db', 'team-a'],
        whole: { apiVersion: 'v1', kind: 'Secret', metadata, type: 'Opaque' },
      }),
    },
    {
      reason: 'a Secret without apiVersion is treated as a core Secret',
      object: wire({ kind: 'Secret', metadata, data: { dsn: 'cG9zdGdyZXM6Ly8=' } }),
      attributes: [{ name: 'hasData', cel: 'has(object.data)' }],
      want: extracted({ hasData: false }),
    },
    {
      reason: 'a ConfigMap keeps its data',
      object: wire({ apiVersion: 'v1', kind: 'ConfigMap', metadata, data: { mode: 'fast' } }),
      attributes: [{ name: 'data', cel: 'object.data' }, { name: 'hasData', cel: 'has(object.data)' }, { name: 'mode', jsonPath: '$.data.mode' }],
      want: extracted({ data: { mode: 'fast' }, hasData: true, mode: 'fast' }),
    },
  ])
})

describe('extractObject: redaction', () => {
  const object = wire({
    apiVersion: 'example.com/v1',
    kind: 'Connection',
    metadata: { name: 'c', namespace: 'team-a' },
    spec: {
      host: 'db.internal',
      password: 'hunter2',
      client: {
        token: 't0k3n',
        apiKey: 'k3y',
        client_secret: 'cl13nt',
        Authorization: 'Bearer abc',
        sessionCookie: 'c00k13',
        secretRef: { name: 'db-creds', key: 'password' },
        secretName: 'tls-cert',
      },
      backends: [{ name: 'a', options: { accessToken: 'x', 'DB-PASSWORD': 'y', timeout: '5s' } }],
    },
  })
  runCases([
    {
      reason: 'sensitive keys are redacted at any depth, profile redactKeys match case- and separator-insensitively, and references to secrets are kept',
      object,
      redactKeys: ['session-cookie'],
      attributes: [{ name: 'spec', cel: 'object.spec' }],
      want: extracted({
        spec: {
          host: 'db.internal',
          password: '[redacted]',
          client: {
            token: '[redacted]',
            apiKey: '[redacted]',
            client_secret: '[redacted]',
            Authorization: '[redacted]',
            sessionCookie: '[redacted]',
            secretRef: { name: 'db-creds', key: 'password' },
            secretName: 'tls-cert',
          },
          backends: [{ name: 'a', options: { accessToken: '[redacted]', 'DB-PASSWORD': '[redacted]', timeout: '5s' } }],
        },
      }),
    },
    {
      reason: 'without the profile entry, a key that is not built in stays visible',
      object,
      attributes: [{ name: 'cookie', jsonPath: '$.spec.client' }],
      want: extracted({
        cookie: {
          token: '[redacted]',
          apiKey: '[redacted]',
          client_secret: '[redacted]',
          Authorization: '[redacted]',
          sessionCookie: 'c00k13',
          secretRef: { name: 'db-creds', key: 'password' },
          secretName: 'tls-cert',
        },
      }),
    },
    {
      reason: 'an attribute whose own name is sensitive is redacted as a whole, whatever its shape',
      object,
      redactKeys: ['hostname'],
      attributes: [
        { name: 'token', jsonPath: '$.spec.client.token' },
        { name: 'dbPassword', cel: 'object.spec.backends' },
        { name: 'hostname', jsonPath: '$.spec.host' },
        { name: 'host', jsonPath: '$.spec.host' },
      ],
      want: extracted({ token: '[redacted]', dbPassword: '[redacted]', hostname: '[redacted]', host: 'db.internal' }),
    },
    {
      reason: 'a key that is exactly auth, or ends in a sensitive word, hides its whole subtree',
      object: wire({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, spec: { auth: { user: 'u' }, dbCredentials: ['a'], authors: ['x'] } }),
      attributes: [{ name: 'spec', jsonPath: '$.spec' }],
      want: extracted({ spec: { auth: '[redacted]', dbCredentials: '[redacted]', authors: ['x'] } }),
    },
    {
      reason: 'a missing sensitive attribute is still null, not a redaction marker that suggests a value',
      object,
      attributes: [{ name: 'token', jsonPath: '$.spec.nothing' }],
      want: extracted({ token: null }),
    },
  ])
})

describe('extractObject: __proto__ stays plain data', () => {
  test('__proto__ keys in the object are exported as own keys and pollute no prototype', () => {
    const object = JSON.parse(
      '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p","namespace":"team-a","annotations":{"__proto__":{"polluted":"yes","password":"p"},"a":"b"}}}',
    ) as KubeObject
    const got = extract(object, [
      { name: 'viaJsonPath', jsonPath: '$.metadata.annotations' },
      { name: 'viaCel', cel: 'object.metadata.annotations' },
      { name: 'values', cel: "object.metadata.annotations['__proto__'].polluted" },
    ])
    const annotations = JSON.parse('{"__proto__":{"polluted":"yes","password":"[redacted]"},"a":"b"}') as JsonObject
    assert.deepStrictEqual(got, extracted({ viaJsonPath: annotations, viaCel: annotations, values: 'yes' }))
    assert.ok(Object.hasOwn(got.attributes?.['viaCel'] as object, '__proto__'), 'the key is an own property')
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
    assert.equal(Object.getPrototypeOf(got.attributes?.['viaJsonPath']), Object.prototype)
  })

  test('a CEL map literal with a __proto__ key pollutes no prototype', () => {
    const got = extract(DEPLOY, [{ name: 'm', cel: "{'__proto__': {'polluted': true}}" }])
    // cel-js itself drops the key from map literals; what matters is that nothing leaks.
    assert.deepStrictEqual(got, extracted({ m: {} }))
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
    assert.equal(Object.getPrototypeOf(got.attributes?.['m']), Object.prototype)
  })

  test('an attribute named __proto__ is exported as an own key, not swallowed as a prototype', () => {
    // The name matches [A-Za-z_][A-Za-z0-9_]*, so the profile accepts it.
    const got = extract(DEPLOY, [{ name: '__proto__', cel: "{'tier': 'frontend'}" }, { name: 'name', cel: 'object.metadata.name' }])
    assert.deepStrictEqual(Object.keys(got.attributes ?? {}), ['__proto__', 'name'])
    assert.equal(JSON.stringify(got.attributes), '{"__proto__":{"tier":"frontend"},"name":"web-00007"}')
    assert.equal(Object.getPrototypeOf(got.attributes), Object.prototype)
  })
})

describe('extractObject: per-item size limit', () => {
  runCases([
    {
      reason: 'attributes exactly at the limit pass',
      attributes: [{ name: 'name', cel: 'object.metadata.name' }],
      maxItemBytes: Buffer.byteLength('{"name":"web-00007"}'),
      want: extracted({ name: 'web-00007' }),
    },
    {
      reason: 'one byte over the limit turns into an error and no attributes',
      attributes: [{ name: 'name', cel: 'object.metadata.name' }],
      maxItemBytes: Buffer.byteLength('{"name":"web-00007"}') - 1,
      want: failed(['attributes take 20 bytes; the limit per item is 19']),
    },
    {
      reason: 'the limit counts UTF-8 bytes, not characters',
      object: wire({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'é'.repeat(10) } }),
      attributes: [{ name: 'n', jsonPath: '$.metadata.name' }],
      maxItemBytes: 20,
      want: failed(['attributes take 28 bytes; the limit per item is 20']),
    },
    {
      reason: 'earlier optional errors are kept next to the size error',
      attributes: [{ name: 'boom', cel: '1 / 0', optional: true }, { name: 'images', jsonPath: '$..image' }],
      maxItemBytes: 10,
      want: failed(['boom: division by zero', `attributes take ${Buffer.byteLength(JSON.stringify({ images: [APP_IMAGE, ENVOY_IMAGE] }))} bytes; the limit per item is 10`]),
    },
  ])
})

describe('expressionInput: what expressions see', () => {
  const redactor = profileOf([]).redactor
  const applied = (text: unknown): KubeObject => wire({
    apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'team-a', annotations: { [LAST_APPLIED]: text as string, note: 'kept' } },
  })

  test('an object with neither Secret data nor the annotation is the same object (the hot path copies nothing)', () => {
    assert.equal(expressionInput(DEPLOY, redactor), DEPLOY)
  })

  test('prepared input is not prepared twice', () => {
    const once = expressionInput(applied('{"password":"p"}'), redactor)
    assert.equal(expressionInput(once, redactor), once)
  })

  test('the annotation is parsed, redacted and written back canonically; other annotations stay', () => {
    const input = expressionInput(applied('{"z":1,"a":{"apiKey":"k","list":[{"name":"API_TOKEN","value":"v"}]}}'), redactor)
    assert.deepEqual(input.metadata?.annotations, { [LAST_APPLIED]: '{"a":{"apiKey":"[redacted]","list":[{"name":"API_TOKEN","value":"[redacted]"}]},"z":1}', note: 'kept' })
  })

  test('a __proto__ key inside the annotation stays data and pollutes nothing', () => {
    const input = expressionInput(applied('{"__proto__":{"polluted":"yes","token":"t"}}'), redactor)
    assert.equal(input.metadata?.annotations?.[LAST_APPLIED], '{"__proto__":{"polluted":"yes","token":"[redacted]"}}')
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
  })

  test('an annotation nested past the stack is the marker, not an exception', () => {
    const input = expressionInput(applied('['.repeat(200_000) + ']'.repeat(200_000)), redactor)
    assert.equal(input.metadata?.annotations?.[LAST_APPLIED], '[redacted]')
  })

  test("a core Secret loses data and stringData, also in its annotation; another kind's data stays", () => {
    const secret = wire({
      apiVersion: 'v1', kind: 'Secret',
      metadata: { name: 's', annotations: { [LAST_APPLIED]: '{"kind":"Secret","apiVersion":"v1","data":{"a":"YQ=="},"type":"Opaque"}' } },
      data: { a: 'YQ==' }, stringData: { b: 'b' },
    })
    assert.deepEqual(expressionInput(secret, redactor), {
      apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', annotations: { [LAST_APPLIED]: '{"apiVersion":"v1","kind":"Secret","type":"Opaque"}' } },
    })
    const custom = wire({ apiVersion: 'example.com/v1', kind: 'Secret', metadata: { name: 's' }, data: { a: 'kept' } })
    assert.equal(expressionInput(custom, redactor), custom)
  })
})
