import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { KollectScopeSpec } from '../../../api/types.js'
import { effectiveScope, resolveNamespaces, secretDenial, type EffectiveScope, type SecretRef } from '../../../hooks/scope.js'

// An EffectiveScope holds functions; it is compared through what it answers for a fixed set of probes.
const RESOURCES: [group: string, kind: string][] = [['apps', 'Deployment'], ['apps', 'StatefulSet'], ['batch', 'Job'], ['', 'ConfigMap'], ['', 'Secret']]
const SINKS = [{ namespace: 'team-a', name: 'git-demo' }, { namespace: 'platform', name: 'shared-pg' }, { namespace: 'platform', name: 'other' }]

interface ScopeView {
  allowedNamespaces: string[] | '*'
  deniedNamespaces: string[]
  resources: Record<string, boolean>
  sinks: Record<string, boolean>
  minDebounceMs: number
  sources: string[]
}

function view(scope: EffectiveScope): ScopeView {
  return {
    allowedNamespaces: scope.allowedNamespaces === '*' ? '*' : [...scope.allowedNamespaces].sort(),
    deniedNamespaces: [...scope.deniedNamespaces].sort(),
    resources: Object.fromEntries(RESOURCES.map(([g, k]) => [`${g}/${k}`, scope.resourceAllowed(g, k)])),
    sinks: Object.fromEntries(SINKS.map((s) => [`${s.namespace}/${s.name}`, scope.sinkAllowed(s)])),
    minDebounceMs: scope.minDebounceMs,
    sources: scope.sources,
  }
}

const ANY_BUT_SECRETS = { 'apps/Deployment': true, 'apps/StatefulSet': true, 'batch/Job': true, '/ConfigMap': true, '/Secret': false }
const OWN_SINKS_ONLY = { 'team-a/git-demo': true, 'platform/shared-pg': false, 'platform/other': false }
const EXAMPLE_SCOPE: KollectScopeSpec = {
  allowedNamespaces: ['team-a', 'team-b'],
  deniedNamespaces: ['kube-system'],
  allowedResources: [{ group: 'apps', kind: 'Deployment' }, { group: 'apps', kind: 'StatefulSet' }],
  minDebounce: '1s',
}

describe('effectiveScope', () => {
  const cases: { reason: string; scopes: { name: string; spec: KollectScopeSpec }[]; want: ScopeView }[] = [
    {
      reason: 'no scope: own namespace only, any kind but core Secrets, sinks in the same namespace only',
      scopes: [],
      want: { allowedNamespaces: ['team-a'], deniedNamespaces: [], resources: ANY_BUT_SECRETS, sinks: OWN_SINKS_ONLY, minDebounceMs: 0, sources: [] },
    },
    {
      reason: 'one scope: its namespaces, denials, resources and minimum debounce apply',
      scopes: [{ name: 'team-a', spec: EXAMPLE_SCOPE }],
      want: {
        allowedNamespaces: ['team-a', 'team-b'],
        deniedNamespaces: ['kube-system'],
        resources: { 'apps/Deployment': true, 'apps/StatefulSet': true, 'batch/Job': false, '/ConfigMap': false, '/Secret': false },
        sinks: OWN_SINKS_ONLY,
        minDebounceMs: 1000,
        sources: ['team-a'],
      },
    },
    {
      reason: 'a scope that leaves every list out takes the defaults of no scope',
      scopes: [{ name: 'empty', spec: {} }],
      want: { allowedNamespaces: ['team-a'], deniedNamespaces: [], resources: ANY_BUT_SECRETS, sinks: OWN_SINKS_ONLY, minDebounceMs: 0, sources: ['empty'] },
    },
    {
      reason: 'a scope listing a cross-namespace sink allows exactly that sink',
      scopes: [{ name: 'pg', spec: { allowedSinks: [{ namespace: 'platform', name: 'shared-pg' }] } }],
      want: {
        allowedNamespaces: ['team-a'],
        deniedNamespaces: [],
        resources: ANY_BUT_SECRETS,
        sinks: { 'team-a/git-demo': true, 'platform/shared-pg': true, 'platform/other': false },
        minDebounceMs: 0,
        sources: ['pg'],
      },
    },
    {
      reason: '* in allowedNamespaces allows every namespace that is not denied',
      scopes: [{ name: 'all', spec: { allowedNamespaces: ['*'], deniedNamespaces: ['kube-system'] } }],
      want: { allowedNamespaces: '*', deniedNamespaces: ['kube-system'], resources: ANY_BUT_SECRETS, sinks: OWN_SINKS_ONLY, minDebounceMs: 0, sources: ['all'] },
    },
    {
      reason: 'several scopes: allowed intersect, denied unite, resources intersect, cross-namespace sinks need every scope, largest minDebounce wins, sources sorted',
      scopes: [
        {
          name: 'z-platform',
          spec: {
            allowedNamespaces: ['team-a', 'team-b', 'team-c'],
            deniedNamespaces: ['kube-system'],
            allowedResources: [{ group: 'apps', kind: 'Deployment' }, { group: 'apps', kind: 'StatefulSet' }],
            allowedSinks: [{ namespace: 'platform', name: 'shared-pg' }, { namespace: 'platform', name: 'other' }],
            minDebounce: '5s',
          },
        },
        {
          name: 'a-security',
          spec: {
            allowedNamespaces: ['team-b', 'team-c', 'team-d'],
            deniedNamespaces: ['team-c'],
            allowedResources: [{ group: 'apps', kind: 'Deployment' }, { group: 'batch', kind: 'Job' }],
            allowedSinks: [{ namespace: 'platform', name: 'shared-pg' }],
            minDebounce: '1m30s',
          },
        },
      ],
      want: {
        allowedNamespaces: ['team-b', 'team-c'],
        deniedNamespaces: ['kube-system', 'team-c'],
        resources: { 'apps/Deployment': true, 'apps/StatefulSet': false, 'batch/Job': false, '/ConfigMap': false, '/Secret': false },
        sinks: { 'team-a/git-demo': true, 'platform/shared-pg': true, 'platform/other': false },
        minDebounceMs: 90_000,
        sources: ['a-security', 'z-platform'],
      },
    },
    {
      reason: '* in one scope and a list in another gives the list',
      scopes: [{ name: 'a', spec: { allowedNamespaces: ['*'] } }, { name: 'b', spec: { allowedNamespaces: ['team-a', 'team-x'] } }],
      want: { allowedNamespaces: ['team-a', 'team-x'], deniedNamespaces: [], resources: ANY_BUT_SECRETS, sinks: OWN_SINKS_ONLY, minDebounceMs: 0, sources: ['a', 'b'] },
    },
    {
      reason: 'a scope that leaves allowedNamespaces out limits the others to the own namespace',
      scopes: [{ name: 'a', spec: { allowedNamespaces: ['*'] } }, { name: 'b', spec: { deniedNamespaces: ['kube-system'] } }],
      want: { allowedNamespaces: ['team-a'], deniedNamespaces: ['kube-system'], resources: ANY_BUT_SECRETS, sinks: OWN_SINKS_ONLY, minDebounceMs: 0, sources: ['a', 'b'] },
    },
    {
      reason: 'a * kind allows every kind of its group, but never core Secrets',
      scopes: [{ name: 'core', spec: { allowedResources: [{ group: '', kind: '*' }] } }],
      want: {
        allowedNamespaces: ['team-a'],
        deniedNamespaces: [],
        resources: { 'apps/Deployment': false, 'apps/StatefulSet': false, 'batch/Job': false, '/ConfigMap': true, '/Secret': false },
        sinks: OWN_SINKS_ONLY,
        minDebounceMs: 0,
        sources: ['core'],
      },
    },
    {
      reason: 'core Secrets are allowed only when a scope names them explicitly',
      scopes: [{ name: 'secrets', spec: { allowedResources: [{ kind: 'Secret' }, { group: 'apps', kind: '*' }] } }],
      want: {
        allowedNamespaces: ['team-a'],
        deniedNamespaces: [],
        resources: { 'apps/Deployment': true, 'apps/StatefulSet': true, 'batch/Job': false, '/ConfigMap': false, '/Secret': true },
        sinks: OWN_SINKS_ONLY,
        minDebounceMs: 0,
        sources: ['secrets'],
      },
    },
    {
      reason: 'a second scope without allowedResources keeps its default (no core Secrets), so the combination refuses Secrets',
      scopes: [{ name: 'secrets', spec: { allowedResources: [{ kind: 'Secret' }, { kind: 'ConfigMap' }] } }, { name: 'plain', spec: {} }],
      want: {
        allowedNamespaces: ['team-a'],
        deniedNamespaces: [],
        resources: { 'apps/Deployment': false, 'apps/StatefulSet': false, 'batch/Job': false, '/ConfigMap': true, '/Secret': false },
        sinks: OWN_SINKS_ONLY,
        minDebounceMs: 0,
        sources: ['plain', 'secrets'],
      },
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      assert.deepStrictEqual(view(effectiveScope('team-a', c.scopes)), c.want)
    })
  }
})

describe('secretAllowed and secretDenial', () => {
  type Scopes = { name: string; spec: KollectScopeSpec }[]
  const GIT = { namespace: 'platform', name: 'git-creds' }
  const cases: { reason: string; scopes: Scopes; sinkNamespace?: string; ref: SecretRef; want: boolean }[] = [
    { reason: 'a Secret of the sink\'s own namespace, no scope', scopes: [], ref: { name: 'git-creds' }, want: true },
    { reason: 'the own namespace spelled out is the own namespace', scopes: [], ref: { name: 'git-creds', namespace: 'team-a' }, want: true },
    { reason: 'an empty namespace means the sink\'s own', scopes: [], ref: { name: 'git-creds', namespace: '' }, want: true },
    { reason: 'another namespace\'s Secret without a scope is refused', scopes: [], ref: GIT, want: false },
    { reason: 'a scope without allowedSecrets refuses it', scopes: [{ name: 's', spec: { allowedSinks: [{ ...GIT }] } }], ref: GIT, want: false },
    { reason: 'a scope listing exactly that Secret allows it', scopes: [{ name: 's', spec: { allowedSecrets: [GIT] } }], ref: GIT, want: true },
    { reason: 'a scope listing another Secret of that namespace refuses it', scopes: [{ name: 's', spec: { allowedSecrets: [{ namespace: 'platform', name: 'pg-creds' }] } }], ref: GIT, want: false },
    { reason: 'the same name in another namespace is another Secret', scopes: [{ name: 's', spec: { allowedSecrets: [{ namespace: 'team-b', name: 'git-creds' }] } }], ref: GIT, want: false },
    { reason: 'two scopes: one listing it is not enough (most restrictive reading)', scopes: [{ name: 'a', spec: { allowedSecrets: [GIT] } }, { name: 'b', spec: {} }], ref: GIT, want: false },
    { reason: 'two scopes both listing it allow it',
      scopes: [{ name: 'a', spec: { allowedSecrets: [GIT] } }, { name: 'b', spec: { allowedSecrets: [{ namespace: 'x', name: 'y' }, GIT] } }],
      ref: GIT, want: true },
    { reason: 'a grant in team-a\'s scope does not extend to a sink of another namespace', scopes: [{ name: 's', spec: { allowedSecrets: [GIT] } }], sinkNamespace: 'team-b', ref: GIT, want: false },
    { reason: 'a sink of another namespace still uses its own Secrets', scopes: [], sinkNamespace: 'team-b', ref: { name: 'git-creds' }, want: true },
    { reason: 'a name that is not a string never matches a grant',
      scopes: [{ name: 's', spec: { allowedSecrets: [{ namespace: 'platform', name: 'undefined' }] } }],
      ref: { namespace: 'platform' } as unknown as SecretRef, want: false },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const scope = effectiveScope('team-a', c.scopes)
      const sink = { namespace: c.sinkNamespace ?? 'team-a', name: 'git' }
      assert.equal(scope.secretAllowed(sink.namespace, c.ref), c.want)
      assert.equal(secretDenial(sink, c.ref, scope) === null, c.want)
    })
  }

  test('a denial names the Secret, the sink and the scopes, and a sink without a secretRef is never denied', () => {
    assert.equal(secretDenial({ namespace: 'team-a', name: 'git' }, GIT, effectiveScope('team-a', [])),
      'Secret platform/git-creds of KollectSink team-a/git is not allowed by the scope of namespace team-a (no KollectScope: own namespace only)')
    assert.equal(secretDenial({ namespace: 'team-a', name: 'git' }, GIT, effectiveScope('team-a', [{ name: 'b', spec: {} }, { name: 'a', spec: { allowedSecrets: [GIT] } }])),
      'Secret platform/git-creds of KollectSink team-a/git is not allowed by the scope of namespace team-a (KollectScope a, b)')
    assert.equal(secretDenial({ namespace: 'team-a', name: 'files' }, undefined, effectiveScope('team-a', [])), null)
  })
})

describe('resolveNamespaces', () => {
  const noScope = effectiveScope('team-a', [])
  const everywhereButSystem = effectiveScope('team-a', [{ name: 'all', spec: { allowedNamespaces: ['*'], deniedNamespaces: ['kube-system'] } }])
  const listed = effectiveScope('team-a', [{ name: 'list', spec: { allowedNamespaces: ['team-b', 'kube-system', 'team-a'], deniedNamespaces: ['kube-system'] } }])
  const cases: { reason: string; requested: string[]; scope: EffectiveScope; want: { effective: string[] | '*'; refused: string[] } }[] = [
    { reason: 'without a scope the own namespace is granted', requested: ['team-a'], scope: noScope, want: { effective: ['team-a'], refused: [] } },
    {
      reason: 'without a scope other namespaces are refused, sorted',
      requested: ['team-b', 'team-a', 'apps'],
      scope: noScope,
      want: { effective: ['team-a'], refused: ['apps', 'team-b'] },
    },
    { reason: 'without a scope * means the own namespace, with nothing refused', requested: ['*'], scope: noScope, want: { effective: ['team-a'], refused: [] } },
    { reason: '* under a * scope stays *; denials apply per object', requested: ['*'], scope: everywhereButSystem, want: { effective: '*', refused: [] } },
    {
      reason: 'a list under a * scope keeps what is not denied and refuses the rest',
      requested: ['team-x', 'kube-system'],
      scope: everywhereButSystem,
      want: { effective: ['team-x'], refused: ['kube-system'] },
    },
    {
      reason: '* under a listing scope is the allowed list minus the denied',
      requested: ['*'],
      scope: listed,
      want: { effective: ['team-a', 'team-b'], refused: [] },
    },
    {
      reason: 'denied wins over allowed for an explicitly requested namespace',
      requested: ['kube-system', 'team-b', 'team-c'],
      scope: listed,
      want: { effective: ['team-b'], refused: ['kube-system', 'team-c'] },
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const { effective, refused } = resolveNamespaces(c.requested, c.scope)
      assert.deepStrictEqual({ effective: effective === '*' ? '*' : [...effective].sort(), refused }, c.want)
    })
  }
})
