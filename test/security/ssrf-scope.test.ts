import assert from 'node:assert/strict'
import dnsPromises from 'node:dns/promises'
import { existsSync, readFileSync } from 'node:fs'
import { syncBuiltinESMExports } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import type { KubeObject } from '../../api/types.js'
import { blockedAddress, checkEndpoint, checkResolvedEndpoint } from '../../server/guards/ssrf.js'
import { startHooksServer, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { controllerFor, deployment, syncRequest, targetSyncRequest } from '../support/metacontroller.js'
import { PERMANENT, ROUTES, conditionOf, fileSink, inventorySync, meta, scope, send, sleep, statusOf, targetWith, walk } from './support.js'

// SSRF guard on sink endpoints (statically, after DNS, and through the hooks and the exporter),
// and KollectScope enforcement of sinks, debounce and combined scopes through the server.

const refused = (host: string, why: string) => `host ${host} is ${why} (private sinks are disabled)`

describe('checkEndpoint (static)', () => {
  const REFUSED: [string, string][] = [
    ['nats://127.0.0.1:4222', refused('127.0.0.1', 'a loopback address')],
    ['nats://127.1.2.3:4222', refused('127.1.2.3', 'a loopback address')],
    ['http://127.1/', refused('127.0.0.1', 'a loopback address')],
    ['http://2130706433/', refused('127.0.0.1', 'a loopback address')],
    ['http://0x7f.0.0.1/', refused('127.0.0.1', 'a loopback address')],
    ['http://0.0.0.0:8080/', refused('0.0.0.0', 'an unspecified address')],
    ['https://[::1]:8443/repo.git', refused('::1', 'a loopback address')],
    ['nats://169.254.10.20:4222', refused('169.254.10.20', 'a link-local or metadata address')],
    ['http://169.254.169.254/latest/meta-data/', refused('169.254.169.254', 'a link-local or metadata address')],
    ['http://100.100.100.200/latest/meta-data/', refused('100.100.100.200', 'a metadata address')],
    ['http://[fd00:ec2::254]/latest/meta-data/', refused('fd00:ec2::254', 'a metadata address')],
    ['http://[fe80::1]/', refused('fe80::1', 'a link-local address')],
    ['http://metadata.google.internal/computeMetadata/v1/', 'host metadata.google.internal is not allowed (private sinks are disabled)'],
    ['http://metadata/', 'host metadata is not allowed (private sinks are disabled)'],
    ['https://localhost/org/repo.git', 'host localhost is not allowed (private sinks are disabled)'],
    ['https://LOCALHOST:8443/org/repo.git', 'host localhost is not allowed (private sinks are disabled)'],
    ['https://git.localhost/org/repo.git', 'host git.localhost is not allowed (private sinks are disabled)'],
    ['nats://a.b.localhost:4222', 'host a.b.localhost is not allowed (private sinks are disabled)'],
    ['file:///etc/passwd', 'local paths are not allowed as sink endpoints'],
    ['FILE:///var/lib/repo.git', 'local paths are not allowed as sink endpoints'],
    ['/var/lib/kollect/repo.git', 'local paths are not allowed as sink endpoints'],
    ['git@localhost:org/repo.git', 'host localhost is not allowed (private sinks are disabled)'],
    ['git@127.0.0.1:org/repo.git', refused('127.0.0.1', 'a loopback address')],
    ['ssh://git@localhost:22/org/repo.git', 'host localhost is not allowed (private sinks are disabled)'],
    ['not a url at all', 'the endpoint URL cannot be parsed'],
  ]
  for (const [url, message] of REFUSED) {
    test(`refuses ${url}`, () => {
      assert.equal(checkEndpoint(url, false), message)
      assert.equal(checkEndpoint(url, true), null, 'allowPrivate=true allows it')
    })
  }

  const ALLOWED = [
    'https://github.com/org/repo.git', 'git@github.com:org/repo.git', 'ssh://git@gitlab.example.com/org/repo.git',
    'nats://10.0.0.5:4222', 'nats://nats.nats.svc:4222', 'nats://nats.nats.svc.cluster.local:4222', 'tls://nats.example.com:4222',
    'postgres://kollect@db.prod.svc:5432/inventory', 'http://192.168.1.10/', 'http://172.16.0.1/', 'https://[2001:db8::1]/repo.git',
  ]
  for (const url of ALLOWED) {
    test(`allows ${url}`, () => {
      assert.equal(checkEndpoint(url, false), null)
      assert.equal(checkEndpoint(url, true), null)
    })
  }

  test('allowPrivate=true allows every endpoint, local paths included', () => {
    for (const [url] of REFUSED) assert.equal(checkEndpoint(url, true), null, url)
  })

  test('blockedAddress on dotted IPv4-mapped IPv6', () => {
    assert.equal(blockedAddress('::ffff:127.0.0.1'), 'a loopback address')
    assert.equal(blockedAddress('::ffff:169.254.169.254'), 'a link-local or metadata address')
    assert.equal(blockedAddress('::ffff:10.0.0.5'), null)
  })

  // Known bug: WHATWG URL rewrites [::ffff:127.0.0.1] to [::ffff:7f00:1] and blockedAddress only
  // recognises the dotted form (server/guards/ssrf.ts, the /^::ffff:(\d+\.\d+\.\d+\.\d+)$/ match), so
  // IPv4-mapped loopback and metadata addresses pass, and checkResolvedEndpoint skips DNS for IPs.
  for (const [url, host, why] of [
    ['http://[::ffff:127.0.0.1]/', '::ffff:7f00:1', 'a loopback address'],
    ['nats://[::ffff:127.0.0.1]:4222', '::ffff:7f00:1', 'a loopback address'],
    ['http://[::ffff:169.254.169.254]/latest/meta-data/', '::ffff:a9fe:a9fe', 'a link-local or metadata address'],
    ['http://[0:0:0:0:0:ffff:7f00:1]/', '::ffff:7f00:1', 'a loopback address'],
  ] as const) {
    test(`refuses IPv4-mapped ${url}`, async () => {
      assert.equal(blockedAddress(host), why, `blockedAddress(${host}), the form new URL() gives`)
      assert.match(checkEndpoint(url, false) ?? 'allowed', /\(private sinks are disabled\)$/)
      assert.match(await checkResolvedEndpoint(url, false) ?? 'allowed', /\(private sinks are disabled\)$/)
    })
  }

  // Known bug: a fully qualified name with its trailing dot is the same host, but BLOCKED_NAMES
  // and the ".localhost" suffix test compare the name as written (server/guards/ssrf.ts checkEndpoint).
  for (const url of ['https://localhost./org/repo.git', 'http://metadata.google.internal./computeMetadata/v1/', 'https://git.localhost./repo.git']) {
    test(`refuses the trailing-dot form ${url}`, () => {
      assert.match(checkEndpoint(url, false) ?? 'allowed', /is not allowed \(private sinks are disabled\)$/)
    })
  }
})

describe('checkResolvedEndpoint (after DNS)', () => {
  const isLoopback = (ip: string) => blockedAddress(ip) === 'a loopback address'

  test('a name that resolves to loopback on this machine is refused', async (t) => {
    // Names this machine resolves to loopback that the static list does not know: /etc/hosts
    // aliases (ip6-localhost, the hostname, …), the hostname, and "localhost." with its dot.
    const candidates = new Set<string>(['localhost.', os.hostname()])
    if (existsSync('/etc/hosts')) {
      for (const line of readFileSync('/etc/hosts', 'utf8').split('\n')) {
        const [ip, ...names] = line.replace(/#.*/, '').trim().split(/\s+/)
        if (ip && isLoopback(ip)) for (const n of names) candidates.add(n)
      }
    }
    const resolving: string[] = []
    for (const name of candidates) {
      if (!name || checkEndpoint(`https://${name}/repo.git`, false) !== null) continue // the static list refuses it already
      const addrs = await dnsPromises.lookup(name, { all: true }).catch(() => [])
      if (addrs.length > 0 && addrs.some((a) => isLoopback(a.address))) resolving.push(name)
    }
    t.diagnostic(`names resolving to loopback here: ${resolving.join(', ')}`)
    assert.ok(resolving.length > 0, `none of ${[...candidates].join(', ')} resolves to loopback`)
    for (const name of resolving) {
      assert.equal(await checkResolvedEndpoint(`https://${name}/org/repo.git`, false), `host ${name} resolves to a loopback address (private sinks are disabled)`)
      assert.equal(await checkResolvedEndpoint(`nats://${name}:4222`, true), null, 'allowPrivate=true')
    }
  })

  describe('with a controlled resolver', () => {
    const original = dnsPromises.lookup
    const table: Record<string, { address: string; family: number }[]> = {
      'rebind.example.com': [{ address: '93.184.216.34', family: 4 }, { address: '169.254.169.254', family: 4 }],
      'loop6.example.com': [{ address: '::1', family: 6 }],
      'mapped.example.com': [{ address: '::ffff:127.0.0.1', family: 6 }],
      'public.example.com': [{ address: '93.184.216.34', family: 4 }],
      'internal.example.com': [{ address: '10.1.2.3', family: 4 }],
    }
    before(() => {
      const fake = async (host: string, options: unknown) => {
        const hit = table[host]
        if (hit) return hit
        return original(host, options as never)
      }
      Object.defineProperty(dnsPromises, 'lookup', { value: fake, configurable: true, writable: true })
      syncBuiltinESMExports()
    })
    after(() => {
      Object.defineProperty(dnsPromises, 'lookup', { value: original, configurable: true, writable: true })
      syncBuiltinESMExports()
    })

    test('any blocked address among the answers refuses the name', async () => {
      assert.equal(await checkResolvedEndpoint('https://rebind.example.com/repo.git', false), 'host rebind.example.com resolves to a link-local or metadata address (private sinks are disabled)')
      assert.equal(await checkResolvedEndpoint('nats://loop6.example.com:4222', false), 'host loop6.example.com resolves to a loopback address (private sinks are disabled)')
      assert.equal(await checkResolvedEndpoint('nats://mapped.example.com:4222', false), 'host mapped.example.com resolves to a loopback address (private sinks are disabled)')
    })

    test('public and cluster-private answers are allowed; allowPrivate skips the lookup', async () => {
      assert.equal(await checkResolvedEndpoint('https://public.example.com/repo.git', false), null)
      assert.equal(await checkResolvedEndpoint('postgres://u@internal.example.com:5432/db', false), null)
      assert.equal(await checkResolvedEndpoint('https://rebind.example.com/repo.git', true), null)
    })

    test('the static refusal comes first, and unresolvable names are left to the connect', async () => {
      assert.equal(await checkResolvedEndpoint('http://169.254.169.254/', false), refused('169.254.169.254', 'a link-local or metadata address'))
      assert.equal(await checkResolvedEndpoint('https://no-such-host.invalid/repo.git', false), null)
    })
  })
})

// ---- through the server ----

function sinkSync(spec: Record<string, unknown>, name = 'events'): string {
  return JSON.stringify(syncRequest(controllerFor('kollect-sinks'), { ...meta('KollectSink', 'team-a', name), spec }, {}))
}

function ready(res: RawResponse) {
  const c = conditionOf(res, 'Ready')
  return [c?.status, c?.reason, c?.message]
}

describe('sink endpoints through the hooks server', () => {
  let strict: HooksServer
  let open: HooksServer
  before(async () => {
    strict = await startHooksServer({ KOLLECT_ALLOW_PRIVATE_SINKS: 'false' })
    open = await startHooksServer({ KOLLECT_ALLOW_PRIVATE_SINKS: 'true' })
  })
  after(async () => {
    await Promise.all([strict.close(), open.close()])
  })

  test('a NATS sink on 127.0.0.1 is InvalidConfig without KOLLECT_ALLOW_PRIVATE_SINKS, Valid with it', async () => {
    const body = sinkSync({ type: 'nats', cluster: 'lab', nats: { url: 'nats://127.0.0.1:4222' } })
    assert.deepEqual(ready(await send(strict.url, ROUTES.sinkSync, { body })), ['False', 'InvalidConfig', 'spec.nats.url: host 127.0.0.1 is a loopback address (private sinks are disabled)'])
    assert.deepEqual(ready(await send(open.url, ROUTES.sinkSync, { body })), ['True', 'Valid', 'configuration is valid'])
  })

  test('Git sinks on the metadata service, localhost (scp form) and file:// are InvalidConfig naming the host', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ url: 'https://169.254.169.254/repo.git' }, 'spec.git.url: host 169.254.169.254 is a link-local or metadata address (private sinks are disabled)'],
      [{ url: 'git@localhost:org/repo.git' }, 'spec.git.url: host localhost is not allowed (private sinks are disabled)'],
      [{ url: 'https://metadata.google.internal/repo.git' }, 'spec.git.url: host metadata.google.internal is not allowed (private sinks are disabled)'],
      [{ url: 'file:///etc' }, 'spec.git.url: local paths are not allowed as sink endpoints'],
    ]
    for (const [git, message] of cases) {
      const res = await send(strict.url, ROUTES.sinkSync, { body: sinkSync({ type: 'git', git }, 'git') })
      assert.deepEqual(ready(res), ['False', 'InvalidConfig', message])
    }
    assert.deepEqual(ready(await send(strict.url, ROUTES.sinkSync, { body: sinkSync({ type: 'git', git: { url: 'https://github.com/org/repo.git' } }, 'git') })), ['True', 'Valid', 'configuration is valid'])
  })

  test('a review-mode Git sink whose forge API is the metadata service is InvalidConfig naming the field, before any export', async () => {
    const review = { provider: 'gitea', apiUrl: 'http://169.254.169.254/api/v1', project: 'org/repo' }
    const body = sinkSync({ type: 'git', secretRef: { name: 'forge-token' }, git: { url: 'https://github.com/org/repo.git', review } }, 'git')
    assert.deepEqual(ready(await send(strict.url, ROUTES.sinkSync, { body })),
      ['False', 'InvalidConfig', 'spec.git.review.apiUrl: host 169.254.169.254 is a link-local or metadata address (private sinks are disabled)'])
  })

  test('S3 endpoints on the metadata service or loopback are InvalidConfig naming the host', async () => {
    const cases: [string, string][] = [
      ['http://169.254.169.254', 'spec.s3.endpoint: host 169.254.169.254 is a link-local or metadata address (private sinks are disabled)'],
      ['http://127.0.0.1:9000', 'spec.s3.endpoint: host 127.0.0.1 is a loopback address (private sinks are disabled)'],
    ]
    for (const [endpoint, message] of cases) {
      const res = await send(strict.url, ROUTES.sinkSync, { body: sinkSync({ type: 's3', secretRef: { name: 's3-keys' }, s3: { bucket: 'inventory', endpoint, pathStyle: true } }, 'objects') })
      assert.deepEqual(ready(res), ['False', 'InvalidConfig', message])
    }
    const body = sinkSync({ type: 's3', secretRef: { name: 's3-keys' }, s3: { bucket: 'inventory', endpoint: 'https://storage.googleapis.com' } }, 'objects')
    assert.deepEqual(ready(await send(strict.url, ROUTES.sinkSync, { body })).slice(0, 2), ['True', 'Valid'])
  })

  test('an IPv4-mapped loopback NATS URL is InvalidConfig too (known bug: Valid today)', async () => {
    const res = await send(strict.url, ROUTES.sinkSync, { body: sinkSync({ type: 'nats', nats: { url: 'nats://[::ffff:127.0.0.1]:4222' } }) })
    assert.equal(conditionOf(res, 'Ready')?.reason, 'InvalidConfig', res.text)
  })

  test('the exporter refuses a loopback NATS sink too, without connecting: the sink is Failing', async () => {
    assert.equal((await send(strict.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([deployment(1)])) })).status, 200)
    const natsSink: KubeObject = { ...meta('KollectSink', 'team-a', 'loop-nats'), spec: { type: 'nats', cluster: 'lab', nats: { url: 'nats://127.0.0.1:4222' } } }
    const body = inventorySync({ name: 'ssrf-inv', spec: { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name: 'loop-nats' }], debounce: '1ms', maxWait: '1ms' }, sinks: [natsSink] })
    assert.equal((await send(strict.url, ROUTES.inventorySync, { body: JSON.stringify(body) })).status, 200)
    let sink
    for (let i = 0; i < 200 && sink?.state !== 'Failing'; i++) {
      strict.exporter.flush()
      await sleep(10)
      sink = strict.exporter.inventoryState({ namespace: 'team-a', name: 'ssrf-inv' })?.sinks.find((s) => s.name === 'loop-nats')
    }
    assert.equal(sink?.state, 'Failing')
    assert.equal(sink?.message, `sink team-a/loop-nats: host 127.0.0.1 is a loopback address (private sinks are disabled)${PERMANENT}`)
    const res = await send(strict.url, ROUTES.inventorySync, { body: JSON.stringify(body) })
    assert.deepEqual([conditionOf(res, 'Degraded')?.reason, conditionOf(res, 'Synced')?.reason], ['SinkFailing', 'Failing'])
  })
})

describe('scope enforcement through the hooks server', () => {
  let server: HooksServer
  before(async () => {
    server = await startHooksServer({ KOLLECT_ALLOW_PRIVATE_SINKS: 'false' })
  })
  after(async () => {
    await server.close()
  })

  const crossNamespace = (scopes: KubeObject[], debounce = '10s', name = 'cross') => JSON.stringify(inventorySync({
    name,
    spec: { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ namespace: 'platform', name: 'shared' }], debounce },
    sinks: [fileSink('platform', 'shared')],
    scopes,
  }))
  const SHARED = { namespace: 'platform', name: 'shared' }

  test('a sink in another namespace is ScopeSinkDenied without a scope', async () => {
    const res = await send(server.url, ROUTES.inventorySync, { body: crossNamespace([]) })
    const message = 'sinks not allowed by the scope of namespace team-a: platform/shared'
    assert.deepEqual(ready(res), ['False', 'ScopeSinkDenied', message])
    assert.deepEqual([conditionOf(res, 'Degraded')?.status, conditionOf(res, 'Degraded')?.reason, conditionOf(res, 'Degraded')?.message], ['True', 'ScopeSinkDenied', message])
    assert.deepEqual(statusOf(res).sinks?.filter((s) => s.namespace === 'platform'), [])
  })

  test('a scope listing the sink in allowedSinks allows it', async () => {
    const res = await send(server.url, ROUTES.inventorySync, { body: crossNamespace([scope('platform-sinks', { allowedSinks: [SHARED] })]) })
    assert.deepEqual(ready(res), ['True', 'Resolved', '1 targets, 1 sinks'])
    assert.deepEqual((statusOf(res).sinks ?? []).map((s) => `${s.namespace}/${s.name}`), ['platform/shared'])
  })

  test('two scopes: the sink must be listed by both (most restrictive reading)', async () => {
    const res = await send(server.url, ROUTES.inventorySync, {
      body: crossNamespace([scope('a', { allowedSinks: [SHARED] }), scope('b', { allowedSinks: [{ namespace: 'platform', name: 'other' }] })]),
    })
    assert.deepEqual(ready(res), ['False', 'ScopeSinkDenied', 'sinks not allowed by the scope of namespace team-a: platform/shared'])
    const both = await send(server.url, ROUTES.inventorySync, { body: crossNamespace([scope('a', { allowedSinks: [SHARED] }), scope('b', { allowedSinks: [SHARED], minDebounce: '1s' })]) })
    assert.deepEqual(ready(both), ['True', 'Resolved', '1 targets, 1 sinks'])
  })

  test('a sinkRef whose namespace is "../team-a" is another namespace, not the own one', async () => {
    const body = JSON.stringify(inventorySync({
      name: 'dots',
      spec: { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ namespace: '../team-a', name: 'files' }] },
      sinks: [fileSink('../team-a', 'files')],
    }))
    assert.deepEqual(ready(await send(server.url, ROUTES.inventorySync, { body })), ['False', 'ScopeSinkDenied', 'sinks not allowed by the scope of namespace team-a: ../team-a/files'])
  })

  test('minDebounce raises a lower debounce; with two scopes the largest wins', async () => {
    const one = await send(server.url, ROUTES.inventorySync, { body: crossNamespace([scope('a', { allowedSinks: [SHARED], minDebounce: '5s' })], '1s', 'debounce-one') })
    assert.deepEqual(ready(one), ['True', 'Resolved', '1 targets, 1 sinks'])
    const degraded = conditionOf(one, 'Degraded')
    assert.deepEqual([degraded?.status, degraded?.reason, degraded?.message], ['False', 'AsExpected', 'debounce 1s raised to the scope minimum 5s'])
    const two = await send(server.url, ROUTES.inventorySync, {
      body: crossNamespace([scope('a', { allowedSinks: [SHARED], minDebounce: '5s' }), scope('b', { allowedSinks: [SHARED], minDebounce: '1m' })], '1s', 'debounce-two'),
    })
    assert.equal(conditionOf(two, 'Degraded')?.message, 'debounce 1s raised to the scope minimum 1m')
    const above = await send(server.url, ROUTES.inventorySync, { body: crossNamespace([scope('a', { allowedSinks: [SHARED], minDebounce: '5s' })], '30s', 'debounce-above') })
    assert.equal(conditionOf(above, 'Degraded')?.message, '')
  })

  test('two scopes on a target: allowed namespaces intersect, denied namespaces unite, kinds must pass both', async () => {
    const deps = ['team-a', 'team-b', 'team-c', 'team-d'].map((ns, i) => deployment(i, { namespace: ns }))
    const target = targetWith({ namespaces: ['team-a', 'team-b', 'team-c', 'team-d'] })
    const res = await send(server.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest(deps, { target, scopes: [
      scope('s1', { allowedNamespaces: ['*'], deniedNamespaces: ['team-b'] }),
      scope('s2', { allowedNamespaces: ['team-a', 'team-b', 'team-c'], deniedNamespaces: ['team-c'] }),
    ] })) })
    assert.equal(res.status, 200)
    assert.deepEqual([conditionOf(res, 'Degraded')?.reason, conditionOf(res, 'Degraded')?.message],
      ['ScopeNamespaceDenied', 'namespaces not allowed by scope: team-b, team-c, team-d (KollectScope s1, s2)'])
    assert.deepEqual([statusOf(res).matchedCount, statusOf(res).extractedCount], [1, 1])

    const kinds = await send(server.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([deployment(1)], { scopes: [
      scope('s1', { allowedResources: [{ group: 'apps', kind: 'Deployment' }] }),
      scope('s2', { allowedResources: [{ group: 'apps', kind: 'StatefulSet' }] }),
    ] })) })
    assert.deepEqual(ready(kinds), ['False', 'ScopeResourceDenied', 'Deployment.apps is not allowed by the scope of namespace team-a (KollectScope s1, s2)'])
  })

  test('an inventory whose only sinkRef is denied exports nowhere (known bug: the embedded default sink gets it)', async () => {
    // hooks/inventory.ts composeInventory leaves composition.sinks empty after the denial, and
    // exporter/exporter.ts sinkRefs() treats "no sinks" as "use the embedded default": the inventory
    // is exported to <dataDir>/repo although it named a sink and the scope refused it.
    assert.equal((await send(server.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([deployment(1)])) })).status, 200)
    const body = JSON.stringify(inventorySync({
      name: 'denied-only',
      spec: { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [SHARED], debounce: '1ms', maxWait: '1ms' },
      sinks: [fileSink('platform', 'shared')],
    }))
    const res = await send(server.url, ROUTES.inventorySync, { body })
    assert.equal(conditionOf(res, 'Ready')?.reason, 'ScopeSinkDenied')
    await sleep(20)
    server.exporter.flush()
    await server.exporter.idle()
    const written = existsSync(path.join(server.dataDir, 'repo')) ? walk(path.join(server.dataDir, 'repo')).filter((f) => f.includes('denied-only')) : []
    assert.deepEqual(written, [], 'nothing of the denied inventory is written anywhere')
    assert.deepEqual(statusOf(res).sinks, [], 'no sink is reported for an inventory whose sinks were all refused')
  })
})
