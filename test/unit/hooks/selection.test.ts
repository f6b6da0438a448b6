import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { KollectTargetSpec, KubeObject } from '../../../api/types.js'
import type { PluralResolution } from '../../../hooks/plural.js'
import type { Rejection } from '../../../hooks/select.js'
import { syncTarget, type ObjectOutcome } from '../../../hooks/target.js'
import { previewSync } from '../../../cli/preview-sync.js'
import { deployment, loadExampleCr, targetSyncRequest } from '../../support/metacontroller.js'
import { asSyncRequest, scopeCr, wire } from './fixtures.js'

// The target sync hook (on the request Metacontroller sends) and `kollect preview` (on the
// request it builds from the same objects) must select the same objects for the same reasons.

const NAMESPACED: PluralResolution = { plural: 'deployments', source: 'spec', namespaced: true }
const EXAMPLE_SCOPE = loadExampleCr('scope.yaml')
const PROFILE = loadExampleCr('profile-deployments.yaml')

/** Deployments in several namespaces, one backend, one tmp-, one with an extra label, and one without a namespace. */
function objects(): KubeObject[] {
  const extra = deployment(6, { name: 'web-extra' })
  ;(extra.metadata?.labels as Record<string, string>)['extra'] = 'yes'
  const noNamespace = deployment(7, { name: 'orphan' })
  delete noNamespace.metadata?.namespace
  return [
    deployment(0),
    deployment(1, { tier: 'backend' }),
    deployment(2, { name: 'tmp-web' }),
    deployment(3, { namespace: 'team-b' }),
    deployment(4, { namespace: 'kube-system' }),
    deployment(5, { namespace: 'team-c' }),
    extra,
    noNamespace,
  ]
}

function target(spec: Partial<Record<keyof KollectTargetSpec, unknown>>): KubeObject {
  const t = loadExampleCr('target-deployments.yaml')
  const merged: Record<string, unknown> = { ...(t['spec'] as object), ...spec }
  for (const [k, v] of Object.entries(merged)) if (v === undefined) delete merged[k]
  return wire({ ...t, spec: merged })
}

type Want = Record<string, Rejection['type'] | 'selected'>

/** Outcomes by related key, a rejection named by its type. */
function summarise(outcomes: ReadonlyMap<string, ObjectOutcome>): Want {
  return Object.fromEntries([...outcomes].map(([key, o]) => [key, 'rejection' in o ? o.rejection.type : 'selected']))
}

/** Without a scope, everything outside team-a is left out for its namespace. */
const OTHER_NAMESPACES_UNSELECTED: Want = {
  'team-b/web-00003': 'namespaceNotSelected', 'kube-system/web-00004': 'namespaceNotSelected', 'team-c/web-00005': 'namespaceNotSelected', orphan: 'clusterScopedNotAllowed',
}
const ALL_ALLOWED_BUT_KUBE_SYSTEM = scopeCr('wide', { allowedNamespaces: ['*'], deniedNamespaces: ['kube-system'] })

const cases: { reason: string; spec: Partial<Record<keyof KollectTargetSpec, unknown>>; scopes?: KubeObject[]; plural?: PluralResolution; want: Want | { problem: string } }[] = [
  {
    reason: 'without namespaces and without a scope the target sees its own namespace only; an object without a namespace is cluster-scoped',
    spec: {},
    want: {
      'team-a/web-00000': 'selected', 'team-a/web-00001': 'labelsDoNotMatch', 'team-a/tmp-web': 'matchPolicyFalse', 'team-a/web-extra': 'selected',
      ...OTHER_NAMESPACES_UNSELECTED,
    },
  },
  {
    reason: 'an empty namespaces list is the own namespace, as no list is',
    spec: { namespaces: [] },
    want: {
      'team-a/web-00000': 'selected', 'team-a/web-00001': 'labelsDoNotMatch', 'team-a/tmp-web': 'matchPolicyFalse', 'team-a/web-extra': 'selected',
      ...OTHER_NAMESPACES_UNSELECTED,
    },
  },
  {
    reason: 'a namespaces list is cut to what the scope allows: team-c is refused, kube-system is denied',
    spec: { namespaces: ['team-a', 'team-b', 'team-c', 'kube-system'] },
    scopes: [EXAMPLE_SCOPE],
    want: {
      'team-a/web-00000': 'selected', 'team-a/web-00001': 'labelsDoNotMatch', 'team-a/tmp-web': 'matchPolicyFalse', 'team-a/web-extra': 'selected',
      'team-b/web-00003': 'selected', 'kube-system/web-00004': 'namespaceDenied', 'team-c/web-00005': 'namespaceNotSelected', orphan: 'clusterScopedNotAllowed',
    },
  },
  {
    reason: '"*" under a scope that allows all but kube-system selects every other namespace and cluster-scoped objects',
    spec: { namespaces: ['*'] },
    scopes: [ALL_ALLOWED_BUT_KUBE_SYSTEM],
    want: {
      'team-a/web-00000': 'selected', 'team-a/web-00001': 'labelsDoNotMatch', 'team-a/tmp-web': 'matchPolicyFalse', 'team-a/web-extra': 'selected',
      'team-b/web-00003': 'selected', 'kube-system/web-00004': 'namespaceDenied', 'team-c/web-00005': 'selected', orphan: 'selected',
    },
  },
  {
    reason: 'a label selector with matchExpressions picks the backend Deployment only',
    spec: { labelSelector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['backend'] }] } },
    want: {
      'team-a/web-00000': 'labelsDoNotMatch', 'team-a/web-00001': 'selected', 'team-a/tmp-web': 'labelsDoNotMatch', 'team-a/web-extra': 'labelsDoNotMatch',
      ...OTHER_NAMESPACES_UNSELECTED,
    },
  },
  {
    reason: 'a matchPolicy accepts and rejects by value (replicas is 1 + i % 4)',
    spec: { matchPolicy: 'object.spec.replicas >= 3.0' },
    want: {
      'team-a/web-00000': 'matchPolicyFalse', 'team-a/web-00001': 'labelsDoNotMatch', 'team-a/tmp-web': 'selected', 'team-a/web-extra': 'selected',
      ...OTHER_NAMESPACES_UNSELECTED,
    },
  },
  {
    reason: 'a matchPolicy that errors on some objects fails them, and passes the object it can read',
    spec: { matchPolicy: "object.metadata.labels.extra == 'yes'" },
    want: {
      'team-a/web-00000': 'matchPolicyFailed', 'team-a/web-00001': 'labelsDoNotMatch', 'team-a/tmp-web': 'matchPolicyFailed', 'team-a/web-extra': 'selected',
      ...OTHER_NAMESPACES_UNSELECTED,
    },
  },
  {
    reason: 'a matchPolicy that is not a bool rejects every object it sees',
    spec: { matchPolicy: 'object.metadata.name' },
    want: {
      'team-a/web-00000': 'matchPolicyNotBool', 'team-a/web-00001': 'labelsDoNotMatch', 'team-a/tmp-web': 'matchPolicyNotBool', 'team-a/web-extra': 'matchPolicyNotBool',
      ...OTHER_NAMESPACES_UNSELECTED,
    },
  },
  { reason: 'a matchPolicy that does not compile selects nothing', spec: { matchPolicy: 'object.metadata.name.size() >' }, want: { problem: 'InvalidMatchPolicy' } },
  {
    reason: 'a cluster-scoped kind under a scope that does not allow all namespaces selects nothing',
    spec: {},
    scopes: [EXAMPLE_SCOPE],
    plural: { plural: 'deployments', source: 'discovery', namespaced: false },
    want: { problem: 'ScopeNamespaceDenied' },
  },
]

describe('selection: the target sync hook and kollect preview agree', () => {
  for (const c of cases) {
    test(c.reason, () => {
      const parent = target(c.spec)
      const plural = c.plural ?? NAMESPACED
      const scopes = c.scopes ?? []
      const hookOutcomes = new Map<string, ObjectOutcome>()
      const request = asSyncRequest(targetSyncRequest(objects(), { target: parent, scopes }))
      const hook = syncTarget(request, { plural, observe: (key, outcome) => hookOutcomes.set(key, outcome) })
      const preview = previewSync({ target: parent, profile: PROFILE, scopes, objects: objects(), plural })

      // Object by object, the whole rejection (type and its fields) included.
      assert.deepEqual(Object.fromEntries(preview.outcomes), Object.fromEntries(hookOutcomes))
      assert.deepEqual(preview.response, hook.response)
      assert.deepEqual(preview.report, hook.report)
      if ('problem' in c.want) {
        assert.equal(hookOutcomes.size, 0)
        const ready = (hook.response.status['conditions'] as { type: string; reason: string }[]).find((x) => x.type === 'Ready')
        assert.equal(ready?.reason, c.want.problem)
      } else {
        assert.deepEqual(summarise(hookOutcomes), c.want)
        const selected = Object.entries(c.want).filter(([, w]) => w === 'selected').map(([k]) => k.split('/').pop()).sort()
        assert.deepEqual(hook.report?.items.map((i) => i.name).sort(), selected)
      }
    })
  }
})
