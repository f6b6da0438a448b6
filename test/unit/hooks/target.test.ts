import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { itemHash, itemKey, itemsChecksum } from '../../../api/canonical.js'
import { validateStatus } from '../../../api/crd-schemas.js'
import type { Condition, Item, KollectTargetSpec, KubeObject, TargetStatus, TargetStatusResource } from '../../../api/types.js'
import { DEFAULT_LIMITS } from '../../../hooks/limits.js'
import type { PluralResolution } from '../../../hooks/plural.js'
import type { CustomizeResponse, RelatedRule, SyncRequest } from '../../../hooks/request.js'
import { customizeTarget, NOT_WATCHED_RESYNC_SECONDS, refusedTargetSync, syncTarget, type TargetContext, type TargetSyncResult } from '../../../hooks/target.js'
import { controllerFor, customizeRequest, deployment, loadExampleCr, relatedMap, syncRequest, targetSyncRequest, TYPES } from '../../support/metacontroller.js'
import { asSyncRequest, cond, scopeCr, wire } from './fixtures.js'

const DEPLOYMENTS: PluralResolution = { plural: 'deployments', source: 'spec' }
const CTX: TargetContext = { plural: DEPLOYMENTS }
const TARGET_REF = { namespace: 'team-a', name: 'prod-deploys' }
const ENVOY = 'registry.example.com/sidecars/envoy:1.29.1'
const EXAMPLE_SCOPE = loadExampleCr('scope.yaml')

/** The example target (team-a/prod-deploys) with some spec fields replaced; undefined removes a field. */
function target(spec: Partial<Record<keyof KollectTargetSpec, unknown>> = {}): KubeObject {
  const t = loadExampleCr('target-deployments.yaml')
  return wire({ ...t, spec: { ...(t['spec'] as object), ...spec } })
}

function profile(extraAttributes: object[] = [], edit?: (attributes: Record<string, unknown>[]) => void): KubeObject {
  const p = loadExampleCr('profile-deployments.yaml')
  const spec = wire(p['spec']) as { attributes: Record<string, unknown>[] }
  spec.attributes.push(...(extraAttributes as Record<string, unknown>[]))
  edit?.(spec.attributes)
  return { ...p, spec }
}

// ---- customize ----

const SCOPE_RULE: RelatedRule = { apiVersion: 'kollect.dev/v1alpha1', resource: 'kollectscopes', namespace: 'team-a', labelSelector: {} }
const PROFILE_RULE: RelatedRule = { apiVersion: 'kollect.dev/v1alpha1', resource: 'kollectprofiles', namespace: 'team-a', names: ['deployments-basic'] }
const FRONTEND = { matchLabels: { tier: 'frontend' } }

function deploymentRule(extra: Partial<RelatedRule>): RelatedRule {
  return { apiVersion: 'apps/v1', resource: 'deployments', labelSelector: FRONTEND, ...extra }
}

describe('customizeTarget', () => {
  const cases: { reason: string; parent: KubeObject; plural?: PluralResolution; want: CustomizeResponse }[] = [
    {
      reason: 'without namespaces the target reads its own namespace',
      parent: target(),
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, deploymentRule({ namespace: 'team-a' })] },
    },
    {
      reason: 'a namespaces list gives one rule per namespace, sorted',
      parent: target({ namespaces: ['team-c', 'team-a', 'team-b'] }),
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, deploymentRule({ namespace: 'team-a' }), deploymentRule({ namespace: 'team-b' }), deploymentRule({ namespace: 'team-c' })] },
    },
    {
      reason: '* gives one rule without a namespace',
      parent: target({ namespaces: ['*'] }),
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, deploymentRule({})] },
    },
    {
      reason: 'a namespaceSelector becomes the rule namespaceSelector',
      parent: target({ namespaceSelector: { matchLabels: { 'kollect.dev/collect': 'true' } } }),
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, deploymentRule({ namespaceSelector: { matchLabels: { 'kollect.dev/collect': 'true' } } })] },
    },
    {
      reason: 'a suspended target asks for no objects, only its scope and profile',
      parent: target({ suspend: true }),
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE] },
    },
    {
      reason: 'an unresolved plural asks for no objects',
      parent: target(),
      plural: { plural: null, source: 'unresolved', message: 'no kind Deployment in apps/v1' },
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE] },
    },
    {
      reason: 'the labelSelector is passed through with only matchLabels and matchExpressions',
      parent: target({
        labelSelector: { matchLabels: { tier: 'frontend' }, matchExpressions: [{ key: 'team', operator: 'Exists' }], extra: 'dropped' },
        namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }], other: 1 },
      }),
      want: {
        relatedResources: [
          SCOPE_RULE,
          PROFILE_RULE,
          {
            apiVersion: 'apps/v1',
            resource: 'deployments',
            labelSelector: { matchLabels: { tier: 'frontend' }, matchExpressions: [{ key: 'team', operator: 'Exists' }] },
            namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }] },
          },
        ],
      },
    },
    {
      reason: 'no labelSelector gives an empty selector, which selects everything',
      parent: target({ labelSelector: undefined }),
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, deploymentRule({ labelSelector: {}, namespace: 'team-a' })] },
    },
    {
      reason: 'a core kind uses the bare version as apiVersion',
      parent: target({ resource: { version: 'v1', kind: 'ConfigMap' }, labelSelector: undefined }),
      plural: { plural: 'configmaps', source: 'well-known' },
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, { apiVersion: 'v1', resource: 'configmaps', labelSelector: {}, namespace: 'team-a' }] },
    },
    {
      reason: 'a cluster-scoped kind gets no namespace, whatever namespaces says',
      parent: target({ resource: { version: 'v1', kind: 'Namespace' }, namespaces: ['team-a'], labelSelector: undefined }),
      plural: { plural: 'namespaces', source: 'well-known' },
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, { apiVersion: 'v1', resource: 'namespaces', labelSelector: {} }] },
    },
    {
      reason: 'PriorityClass, resolved as cluster-scoped, gets no namespace',
      parent: target({ resource: { group: 'scheduling.k8s.io', version: 'v1', kind: 'PriorityClass' }, labelSelector: undefined }),
      plural: { plural: 'priorityclasses', source: 'discovery', namespaced: false },
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, { apiVersion: 'scheduling.k8s.io/v1', resource: 'priorityclasses', labelSelector: {} }] },
    },
    {
      reason: 'a custom kind discovery calls cluster-scoped gets no namespace, whatever namespaces or the spec plural say',
      parent: target({ resource: { group: 'fleet.example.com', version: 'v1', kind: 'Fleet', plural: 'fleets' }, namespaces: ['team-a', 'team-b'], labelSelector: undefined }),
      plural: { plural: 'fleets', source: 'spec', namespaced: false },
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, { apiVersion: 'fleet.example.com/v1', resource: 'fleets', labelSelector: {} }] },
    },
    {
      reason: 'discovery outranks the table: a kind it calls namespaced gets the own namespace',
      parent: target({ resource: { version: 'v1', kind: 'Namespace' }, labelSelector: undefined }),
      plural: { plural: 'namespaces', source: 'discovery', namespaced: true },
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE, { apiVersion: 'v1', resource: 'namespaces', labelSelector: {}, namespace: 'team-a' }] },
    },
    {
      reason: 'an invalid spec (no profileRef) selects nothing; sync reports InvalidSpec',
      parent: target({ profileRef: undefined }),
      want: { relatedResources: [SCOPE_RULE] },
    },
    {
      reason: 'an invalid spec (duplicate namespaces) selects nothing',
      parent: target({ namespaces: ['team-c', 'team-a', 'team-c'] }),
      want: { relatedResources: [SCOPE_RULE, PROFILE_RULE] },
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const req = wire(customizeRequest(controllerFor('kollect-targets'), c.parent)) as unknown as Parameters<typeof customizeTarget>[0]
      assert.deepStrictEqual(customizeTarget(req, { plural: c.plural ?? DEPLOYMENTS }), c.want)
    })
  }
})

// ---- sync ----

/** What the example profile extracts from deployment(i, opts). */
function item(i: number, opts: { namespace?: string; name?: string; extra?: Record<string, number> } = {}): Item {
  const name = opts.name ?? `web-${String(i).padStart(5, '0')}`
  const replicas = 1 + (i % 4)
  const readyReplicas = i % 10 === 0 ? replicas - 1 : replicas
  return {
    group: 'apps',
    version: 'v1',
    kind: 'Deployment',
    namespace: opts.namespace ?? 'team-a',
    name,
    uid: `6f1c1d2e-0000-4000-8000-${String(i).padStart(12, '0')}`,
    target: TARGET_REF,
    attributes: {
      images: [`registry.example.com/payments/${name}:1.${i % 9}.${i % 7}`, ENVOY],
      replicas,
      containerCount: 2,
      labels: { app: name, tier: 'frontend', team: 'payments', 'app.kubernetes.io/part-of': 'shop' },
      team: 'payments',
      ready: readyReplicas === replicas,
      ...opts.extra,
    },
  }
}

const RESOURCE = { group: 'apps', version: 'v1', kind: 'Deployment', plural: 'deployments' }

interface Counts {
  matchedCount: number
  extractedCount: number
  failedCount: number
  lastError?: string
}

function synced(counts: Counts, items: Item[], conditions: Condition[], failedKeys: string[] = []): TargetSyncResult {
  const checksum = itemsChecksum(items)
  return {
    response: {
      status: { observedGeneration: 1, lastError: '', ...counts, checksum, conditions, resource: RESOURCE },
      children: [],
    },
    // The example objects are all at metadata.generation 3.
    report: { target: TARGET_REF, generation: 1, uid: 'uid-prod-deploys', checksum, items, failedKeys, itemHashes: items.map(itemHash), itemGenerations: items.map(() => 3) },
  }
}

function refused(reason: string, message: string, opts: { emptyReport?: boolean; resource?: TargetStatusResource | null } = {}): TargetSyncResult {
  const status: TargetStatus = {
    observedGeneration: 1,
    matchedCount: 0,
    extractedCount: 0,
    failedCount: 0,
    lastError: message.length <= 256 ? message : message.slice(0, 255) + '…',
    checksum: '',
    conditions: [cond('Ready', 'False', reason, message)],
  }
  if (opts.resource !== null) status.resource = opts.resource ?? RESOURCE
  return {
    response: { status, children: [] },
    report: opts.emptyReport ? { target: TARGET_REF, generation: 1, uid: 'uid-prod-deploys', checksum: itemsChecksum([]), items: [], failedKeys: [], itemGenerations: [] } : null,
  }
}

function request(deployments: KubeObject[], extra: { scopes?: KubeObject[]; target?: KubeObject; profile?: KubeObject } = {}): SyncRequest {
  return asSyncRequest(targetSyncRequest(deployments, extra))
}

// Five Deployments of which only web-00001 and web-00003 are selected by the example target.
const MIXED = [
  deployment(3),
  deployment(1),
  deployment(2, { name: 'tmp-scratch' }), // excluded by matchPolicy
  deployment(4, { tier: 'backend' }), // excluded by labelSelector
  deployment(5, { namespace: 'team-b' }), // not requested
]

describe('syncTarget', () => {
  const cases: { reason: string; req: () => SyncRequest; ctx?: TargetContext; want: TargetSyncResult }[] = [
    {
      reason: 'the example target extracts its frontend Deployments and leaves out tmp-, backend and other-namespace ones',
      req: () => request(MIXED),
      want: synced({ matchedCount: 2, extractedCount: 2, failedCount: 0 }, [item(1), item(3)], [cond('Ready', 'True', 'Extracted', '2 of 2 matched objects extracted')]),
    },
    {
      reason: 'no Deployments at all is a ready, empty target with the checksum of no items',
      req: () => request([]),
      want: synced({ matchedCount: 0, extractedCount: 0, failedCount: 0 }, [], [cond('Ready', 'True', 'Extracted', '0 of 0 matched objects extracted')]),
    },
    {
      reason: 'a missing profile is ProfileNotFound, and no report so the exporter keeps its items',
      req: () => request(MIXED, { profile: { ...profile(), metadata: { name: 'other', namespace: 'team-a' } } }),
      want: refused('ProfileNotFound', 'KollectProfile team-a/deployments-basic not found'),
    },
    {
      reason: 'a profile with a CEL syntax error is ProfileInvalid, naming the attribute, the error and its position',
      req: () => request(MIXED, { profile: profile([], (a) => { (a[2] as { cel: string }).cel = 'size(object.spec.template.spec.containers' }) }),
      want: refused('ProfileInvalid', 'KollectProfile deployments-basic: spec.attributes[2].cel (containerCount): Expected RPAREN, got EOF at position 41'),
    },
    {
      reason: 'a scope that does not allow Deployments is ScopeResourceDenied with an empty report, so exported items go',
      req: () => request(MIXED, { scopes: [scopeCr('sts-only', { allowedResources: [{ group: 'apps', kind: 'StatefulSet' }] })] }),
      want: refused('ScopeResourceDenied', 'Deployment.apps is not allowed by the scope of namespace team-a (KollectScope sts-only)', { emptyReport: true }),
    },
    {
      reason: 'core Secrets are refused without a scope',
      req: () => request([], { target: target({ resource: { version: 'v1', kind: 'Secret', plural: 'secrets' }, labelSelector: undefined, matchPolicy: undefined }) }),
      ctx: { plural: { plural: 'secrets', source: 'spec' } },
      want: refused('ScopeResourceDenied', 'Secret is not allowed by the scope of namespace team-a (no KollectScope: own namespace only)', {
        emptyReport: true,
        resource: { group: '', version: 'v1', kind: 'Secret', plural: 'secrets' },
      }),
    },
    {
      reason: 'a namespace the scope denies is refused with Degraded naming it, and none of its objects are extracted',
      req: () =>
        request([deployment(1), deployment(6, { namespace: 'kube-system' }), deployment(3, { namespace: 'team-b' })], {
          target: target({ namespaces: ['team-a', 'kube-system'] }),
          scopes: [EXAMPLE_SCOPE],
        }),
      want: synced({ matchedCount: 1, extractedCount: 1, failedCount: 0 }, [item(1)], [
        cond('Degraded', 'True', 'ScopeNamespaceDenied', 'namespaces not allowed by scope: kube-system (KollectScope team-a)'),
        cond('Ready', 'True', 'Extracted', '1 of 1 matched objects extracted'),
      ]),
    },
    {
      reason: 'without a scope another namespace is refused, and its objects are not extracted even if Metacontroller sent them',
      req: () => request([deployment(1), deployment(3, { namespace: 'team-b' })], { target: target({ namespaces: ['team-b'] }) }),
      want: synced({ matchedCount: 0, extractedCount: 0, failedCount: 0 }, [], [
        cond('Degraded', 'True', 'ScopeNamespaceDenied', 'namespaces not allowed by scope: team-b (no KollectScope: own namespace only)'),
        cond('Ready', 'True', 'Extracted', '0 of 0 matched objects extracted'),
      ]),
    },
    {
      reason: 'a related scope of another namespace is ignored: it cannot widen the target\'s namespaces (nor name itself in messages)',
      req: () => request([deployment(1), deployment(3, { namespace: 'team-b' })], {
        target: target({ namespaces: ['team-b'] }),
        scopes: [scopeCr('wide-open', { allowedNamespaces: ['*'] }, 'team-b')],
      }),
      want: synced({ matchedCount: 0, extractedCount: 0, failedCount: 0 }, [], [
        cond('Degraded', 'True', 'ScopeNamespaceDenied', 'namespaces not allowed by scope: team-b (no KollectScope: own namespace only)'),
        cond('Ready', 'True', 'Extracted', '0 of 0 matched objects extracted'),
      ]),
    },
    {
      reason: 'a required attribute that errors on one object fails that object only: counted, keyed in failedKeys, named in lastError',
      req: () => request([deployment(1), deployment(0)], { profile: profile([{ name: 'ratio', cel: '100 / int(object.status.readyReplicas)' }]) }),
      want: synced(
        { matchedCount: 2, extractedCount: 1, failedCount: 1, lastError: 'team-a/web-00000: ratio: division by zero' },
        [item(1, { extra: { ratio: 50 } })],
        [cond('Ready', 'True', 'ExtractedWithErrors', '1 of 2 objects had extraction errors')],
        [itemKey(item(0))],
      ),
    },
    {
      reason: 'a match policy that errors on one object keeps that object in failedKeys so its exported item is not deleted',
      req: () => request([deployment(1), deployment(3)], { target: target({ matchPolicy: "object.metadata.name != 'web-00003' || 1 / 0 == 0" }) }),
      want: synced(
        { matchedCount: 1, extractedCount: 1, failedCount: 1, lastError: 'team-a/web-00003: matchPolicy failed: division by zero' },
        [item(1)],
        [cond('Ready', 'True', 'ExtractedWithErrors', '1 of 1 objects had extraction errors')],
        [itemKey(item(3))],
      ),
    },
    {
      reason: 'a match policy that does not compile is InvalidMatchPolicy with its position',
      req: () => request(MIXED, { target: target({ matchPolicy: 'object.metadata.name.startsWith(' }) }),
      want: refused('InvalidMatchPolicy', 'spec.matchPolicy: Unexpected token: EOF at position 32'),
    },
    {
      reason: 'a spec without resource is InvalidSpec, with no resource in status and no report',
      req: () => request(MIXED, { target: target({ resource: undefined }) }),
      want: refused('InvalidSpec', 'spec.resource: required field is missing', { resource: null }),
    },
    {
      reason: 'a suspended target reports Suspended and hands nothing to the exporter',
      req: () => request(MIXED, { target: target({ suspend: true }) }),
      want: refused('Suspended', 'target is suspended; the exporter keeps its last items'),
    },
    {
      reason: 'a CEL value past a runtime bound stops the whole sync: ResourceLimit, no report, so the exporter keeps the last items',
      req: () => request(MIXED, { profile: profile([{ name: 'letters', cel: "object.metadata.name.split('')" }]) }),
      ctx: { plural: DEPLOYMENTS, limits: { ...DEFAULT_LIMITS, maxListLength: 5 } },
      want: { ...refused('ResourceLimit', 'extraction stopped: attribute letters: a CEL list at position 0 has 9 elements; the limit is 5', { resource: null }), stopped: 'ResourceLimit' },
    },
    {
      reason: 'a match policy past a runtime bound stops the whole sync the same way',
      req: () => request(MIXED, { target: target({ matchPolicy: `size(${Array(8).fill('object.metadata.name').join(' + ')}) > 0` }) }),
      ctx: { plural: DEPLOYMENTS, limits: { ...DEFAULT_LIMITS, maxStringLength: 60 } },
      want: { ...refused('ResourceLimit', 'extraction stopped: matchPolicy: a CEL string at position 5 has 66 characters; the limit is 60', { resource: null }), stopped: 'ResourceLimit' },
    },
    {
      reason: 'an unresolved plural is ResourceUnresolved with the resolver message',
      req: () => request(MIXED),
      ctx: { plural: { plural: null, source: 'unresolved', message: 'no kind Deployment in apps/v1' } },
      want: refused('ResourceUnresolved', 'no kind Deployment in apps/v1', { resource: { ...RESOURCE, plural: '' } }),
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const got = syncTarget(c.req(), c.ctx ?? CTX)
      assert.deepStrictEqual(got, c.want)
      assert.deepStrictEqual(validateStatus('KollectTarget', got.response.status), { valid: true })
      if (got.report) assert.equal(got.report.checksum, itemsChecksum(got.report.items))
    })
  }

  test('the status is byte-identical across two calls, and whatever the order of the related objects', () => {
    const first = syncTarget(request(MIXED), CTX)
    const second = syncTarget(request(MIXED), CTX)
    const reordered = request([...MIXED].reverse())
    const map = reordered.related[TYPES.deployment] as Record<string, KubeObject>
    reordered.related[TYPES.deployment] = Object.fromEntries(Object.entries(map).reverse())
    const third = syncTarget(reordered, CTX)
    assert.equal(JSON.stringify(second.response.status), JSON.stringify(first.response.status))
    assert.equal(JSON.stringify(third.response.status), JSON.stringify(first.response.status))
    assert.equal(JSON.stringify(third.report), JSON.stringify(first.report))
    assert.deepStrictEqual(first.report?.items.map((i) => i.name), ['web-00001', 'web-00003'], 'items sorted by identity')
  })

  test('items are sorted by identity: namespace before name', () => {
    const got = syncTarget(
      request([deployment(3, { namespace: 'team-b', name: 'alpha' }), deployment(1, { name: 'zulu' }), deployment(5, { namespace: 'team-b', name: 'beta' })], {
        target: target({ namespaces: ['team-a', 'team-b'] }),
        scopes: [EXAMPLE_SCOPE],
      }),
      CTX,
    )
    assert.deepStrictEqual(got.report?.items.map((i) => `${i.namespace}/${i.name}`), ['team-a/zulu', 'team-b/alpha', 'team-b/beta'])
  })

  test('a namespaceSelector target extracts from every namespace Metacontroller selected that the scope allows', () => {
    // customize hands namespace selection to Metacontroller; sync must not fall back to the own namespace.
    const got = syncTarget(
      request([deployment(1), deployment(3, { namespace: 'team-b' }), deployment(5, { namespace: 'kube-system' })], {
        target: target({ namespaceSelector: {} }),
        scopes: [EXAMPLE_SCOPE],
      }),
      CTX,
    )
    assert.deepStrictEqual(
      { matched: got.response.status.matchedCount, items: got.report?.items.map((i) => `${i.namespace}/${i.name}`) },
      { matched: 2, items: ['team-a/web-00001', 'team-b/web-00003'] },
    )
  })

  test('namespaces together with namespaceSelector is an invalid spec, as the CRD rule says', () => {
    // customize follows namespaceSelector and sync follows namespaces, so the pair cannot be honoured.
    const got = syncTarget(request(MIXED, { target: target({ namespaces: ['team-a'], namespaceSelector: {} }) }), CTX)
    const ready = got.response.status.conditions?.find((c) => c.type === 'Ready')
    assert.deepStrictEqual({ status: ready?.status, reason: ready?.reason, report: got.report }, { status: 'False', reason: 'InvalidSpec', report: null })
  })

  test('the per-sync output bound counts UTF-8 bytes, not characters', () => {
    const image = 'registry.example.com/' + 'é'.repeat(200)
    const objects = [deployment(1, { image }), deployment(3, { image })]
    const unbounded = syncTarget(request(objects), CTX)
    const bytes = (unbounded.report?.items ?? []).reduce((n, i) => n + Buffer.byteLength(JSON.stringify(i.attributes)), 0)
    const chars = (unbounded.report?.items ?? []).reduce((n, i) => n + JSON.stringify(i.attributes).length, 0)
    assert.ok(chars < bytes)
    const limit = chars + 1
    const got = syncTarget(request(objects), { plural: DEPLOYMENTS, limits: { ...DEFAULT_LIMITS, maxRequestItemBytes: limit } })
    assert.deepStrictEqual(got, refused('OutputTooLarge', `extracted attributes exceed ${limit} bytes for one sync; split the target or trim the profile`))
  })

  test('a label named __proto__ is part of the item and of the checksum', () => {
    const withLabel = (value: string) => {
      const req = request([deployment(1)])
      const labels = (req.related[TYPES.deployment]?.['team-a/web-00001']?.metadata?.labels ?? {}) as Record<string, string>
      Object.defineProperty(labels, '__proto__', { value, enumerable: true, writable: true, configurable: true })
      return syncTarget(req, CTX)
    }
    const x = withLabel('x')
    const y = withLabel('y')
    const labels = x.report?.items[0]?.attributes['labels'] as Record<string, string>
    assert.equal(Object.hasOwn(labels, '__proto__') && labels['__proto__'], 'x')
    assert.notEqual(x.report?.checksum, y.report?.checksum)
  })
})

// ---- cluster-scoped kinds, and kinds Metacontroller does not watch yet ----

describe('syncTarget: scope of the kind', () => {
  const ALL_NAMESPACES = scopeCr('platform', {
    allowedNamespaces: ['*'],
    allowedResources: [{ group: 'scheduling.k8s.io', kind: 'PriorityClass' }, { group: 'fleet.example.com', kind: 'Fleet' }],
  })
  const valueProfile = profile([], (a) => a.splice(0, a.length, { name: 'value', cel: 'object.value' }))
  const PRIORITY = { group: 'scheduling.k8s.io', version: 'v1', kind: 'PriorityClass' }
  const FLEET = { group: 'fleet.example.com', version: 'v1', kind: 'Fleet' }
  const obj = (res: typeof PRIORITY, name: string, value: number, namespace?: string): KubeObject => ({
    apiVersion: `${res.group}/${res.version}`,
    kind: res.kind,
    metadata: { name, uid: `uid-${name}`, ...(namespace ? { namespace } : {}) },
    value,
  })
  const syncOf = (res: typeof PRIORITY, objects: KubeObject[], scopes: KubeObject[], relatedTypes?: string[]): SyncRequest => {
    const type = `${res.kind}.${res.group}/${res.version}`
    const parent = target({ resource: res, labelSelector: undefined, matchPolicy: undefined, namespaces: undefined })
    return asSyncRequest(syncRequest(controllerFor('kollect-targets'), parent, relatedMap(relatedTypes ?? [TYPES.scope, TYPES.profile, type], {
      [TYPES.profile]: [valueProfile],
      [TYPES.scope]: scopes,
      ...(relatedTypes && !relatedTypes.includes(type) ? {} : { [type]: objects }),
    })))
  }
  /** What matters here: Ready, the counts, the items' identities and values, and the resync. */
  const outcome = (got: TargetSyncResult) => {
    const ready = got.response.status.conditions?.find((c) => c.type === 'Ready')
    return {
      ready: `${ready?.status} ${ready?.reason}`,
      matched: got.response.status.matchedCount,
      items: got.report?.items.map((i) => `${i.namespace}/${i.name}=${String(i.attributes['value'])}`) ?? null,
      resyncAfterSeconds: got.response.resyncAfterSeconds,
    }
  }
  const cases: { reason: string; req: () => SyncRequest; plural: PluralResolution; want: ReturnType<typeof outcome> }[] = [
    {
      reason: 'PriorityClass resolved as cluster-scoped selects its objects, none of which has a namespace',
      req: () => syncOf(PRIORITY, [obj(PRIORITY, 'high', 1000), obj(PRIORITY, 'low', 10)], [ALL_NAMESPACES]),
      plural: { plural: 'priorityclasses', source: 'discovery', namespaced: false },
      want: { ready: 'True Extracted', matched: 2, items: ['/high=1000', '/low=10'], resyncAfterSeconds: undefined },
    },
    {
      reason: 'a cluster-scoped custom kind resolved by discovery selects its objects',
      req: () => syncOf(FLEET, [obj(FLEET, 'east', 3), obj(FLEET, 'west', 5)], [ALL_NAMESPACES]),
      plural: { plural: 'fleets', source: 'discovery', namespaced: false },
      want: { ready: 'True Extracted', matched: 2, items: ['/east=3', '/west=5'], resyncAfterSeconds: undefined },
    },
    {
      reason: 'a kind resolved as namespaced whose objects have no namespace: they are cluster-scoped objects and are selected',
      req: () => syncOf(FLEET, [obj(FLEET, 'east', 3), obj(FLEET, 'north', 4, 'team-b')], [ALL_NAMESPACES]),
      plural: { plural: 'fleets', source: 'spec', namespaced: true },
      want: { ready: 'True Extracted', matched: 1, items: ['/east=3'], resyncAfterSeconds: undefined },
    },
    {
      reason: 'objects without a namespace still need a scope allowing all namespaces, as a cluster-scoped kind does',
      req: () => syncOf(FLEET, [obj(FLEET, 'east', 3), obj(FLEET, 'own', 4, 'team-a')], [scopeCr('fleets', { allowedResources: [{ group: 'fleet.example.com', kind: 'Fleet' }] })]),
      plural: { plural: 'fleets', source: 'spec', namespaced: undefined },
      want: { ready: 'True Extracted', matched: 1, items: ['team-a/own=4'], resyncAfterSeconds: undefined },
    },
    {
      reason: 'a cluster-scoped kind without a scope allowing all namespaces is ScopeNamespaceDenied',
      req: () => syncOf(PRIORITY, [obj(PRIORITY, 'high', 1000)], [scopeCr('narrow', { allowedResources: [{ group: 'scheduling.k8s.io', kind: 'PriorityClass' }] })]),
      plural: { plural: 'priorityclasses', source: 'well-known', namespaced: false },
      want: { ready: 'False ScopeNamespaceDenied', matched: 0, items: [], resyncAfterSeconds: undefined },
    },
    {
      reason: 'an empty entry for the kind is a watched kind with no objects: Ready, 0 of 0',
      req: () => syncOf(FLEET, [], [ALL_NAMESPACES]),
      plural: { plural: 'fleets', source: 'discovery', namespaced: false },
      want: { ready: 'True Extracted', matched: 0, items: [], resyncAfterSeconds: undefined },
    },
    {
      reason: 'no entry at all for the kind is ResourceNotWatched: no report, so the exporter keeps its items, and a resync',
      req: () => syncOf(FLEET, [], [ALL_NAMESPACES], [TYPES.scope, TYPES.profile]),
      plural: { plural: 'fleets', source: 'discovery', namespaced: false },
      want: { ready: 'False ResourceNotWatched', matched: 0, items: null, resyncAfterSeconds: NOT_WATCHED_RESYNC_SECONDS },
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const got = syncTarget(c.req(), { plural: c.plural })
      assert.deepStrictEqual(outcome(got), c.want)
      assert.deepStrictEqual(validateStatus('KollectTarget', got.response.status), { valid: true })
    })
  }

  test('ResourceNotWatched says why, what happens next and what to do now, in the condition and lastError', () => {
    const got = syncTarget(syncOf(FLEET, [], [ALL_NAMESPACES], [TYPES.scope, TYPES.profile]), { plural: { plural: 'fleets', source: 'discovery', namespaced: false } })
    const message = 'Metacontroller does not watch Fleet.fleet.example.com for this target: its cached customize answer predates the kind. ' +
      'It asks again within 20 minutes; a spec edit makes it ask now (labels and annotations do not count). The exporter keeps the last items'
    assert.deepStrictEqual(got, {
      response: {
        status: {
          observedGeneration: 1, matchedCount: 0, extractedCount: 0, failedCount: 0, lastError: message, checksum: '',
          conditions: [cond('Ready', 'False', 'ResourceNotWatched', message)],
          resource: { ...FLEET, plural: 'fleets' },
        },
        children: [],
        resyncAfterSeconds: NOT_WATCHED_RESYNC_SECONDS,
      },
      report: null,
    })
  })
})

describe('refusedTargetSync', () => {
  const REFUSAL = 'the exporter refused 2 items (9000 bytes): namespace team-a holds 30000 bytes of items and its share is 32768 bytes; ' +
    'split the target, trim the profile, or raise KOLLECT_EXPORTER_NAMESPACE_SHARE'

  test('Ready False ResourceLimit with the exporter\'s message in the condition and lastError; counts as extracted; no checksum; other conditions kept', () => {
    const synced = syncTarget(request([deployment(1), deployment(6, { namespace: 'kube-system' }), deployment(3)], {
      target: target({ namespaces: ['team-a', 'kube-system'] }), scopes: [EXAMPLE_SCOPE],
    }), CTX)
    const got = refusedTargetSync(synced.response, REFUSAL)
    assert.deepStrictEqual([got.status.matchedCount, got.status.extractedCount, got.status.failedCount], [2, 2, 0])
    assert.deepStrictEqual(got, {
      status: {
        ...synced.response.status,
        lastError: REFUSAL,
        checksum: '',
        conditions: [
          cond('Degraded', 'True', 'ScopeNamespaceDenied', 'namespaces not allowed by scope: kube-system (KollectScope team-a)'),
          cond('Ready', 'False', 'ResourceLimit', REFUSAL),
        ],
      },
      children: [],
    })
    assert.deepStrictEqual(validateStatus('KollectTarget', got.status), { valid: true })
  })

  test('identical refusals of identical syncs give byte-identical status; lastError is cut at 256 characters', () => {
    const once = () => JSON.stringify(refusedTargetSync(syncTarget(request([deployment(1)]), CTX).response, REFUSAL + ' '.repeat(300) + 'end'))
    assert.equal(once(), once())
    const status = (JSON.parse(once()) as { status: { lastError: string } }).status
    assert.equal(status.lastError.length, 256)
  })
})
