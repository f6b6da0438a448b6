import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { KubeObject, LabelSelector } from '../../../api/types.js'
import { compileCel, type CelProgram } from '../../../hooks/cel.js'
import { effectiveScope } from '../../../hooks/scope.js'
import {
  allowedByScope, describeRejection, inNamespace, matchesLabels, matchesSelector, passesMatchPolicy, select, splitApiVersion, type Predicate,
} from '../../../hooks/select.js'

const LABELS = { app: 'web', tier: 'frontend', team: 'payments' }

describe('matchesSelector', () => {
  const cases: { reason: string; labels: Record<string, string> | undefined; selector: LabelSelector | undefined; want: boolean }[] = [
    { reason: 'no selector selects everything', labels: LABELS, selector: undefined, want: true },
    { reason: 'an empty selector selects everything', labels: LABELS, selector: {}, want: true },
    { reason: 'an empty selector selects an object without labels', labels: undefined, selector: {}, want: true },
    { reason: 'matchLabels with equal values matches', labels: LABELS, selector: { matchLabels: { tier: 'frontend', app: 'web' } }, want: true },
    { reason: 'matchLabels with one different value does not match', labels: LABELS, selector: { matchLabels: { tier: 'backend', app: 'web' } }, want: false },
    { reason: 'matchLabels on an absent label does not match', labels: LABELS, selector: { matchLabels: { env: 'prod' } }, want: false },
    { reason: 'matchLabels on an object without labels does not match', labels: undefined, selector: { matchLabels: { tier: 'frontend' } }, want: false },
    { reason: 'In matches when the value is listed', labels: LABELS, selector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['backend', 'frontend'] }] }, want: true },
    { reason: 'In does not match an unlisted value', labels: LABELS, selector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['backend'] }] }, want: false },
    { reason: 'In does not match an absent label', labels: LABELS, selector: { matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }] }, want: false },
    { reason: 'NotIn does not match a listed value', labels: LABELS, selector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['frontend'] }] }, want: false },
    { reason: 'NotIn matches an unlisted value', labels: LABELS, selector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['backend'] }] }, want: true },
    { reason: 'NotIn matches an absent label, as in Kubernetes', labels: LABELS, selector: { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod'] }] }, want: true },
    { reason: 'Exists matches a present label whatever its value', labels: LABELS, selector: { matchExpressions: [{ key: 'team', operator: 'Exists' }] }, want: true },
    { reason: 'Exists does not match an absent label', labels: LABELS, selector: { matchExpressions: [{ key: 'env', operator: 'Exists' }] }, want: false },
    { reason: 'DoesNotExist matches an absent label', labels: LABELS, selector: { matchExpressions: [{ key: 'env', operator: 'DoesNotExist' }] }, want: true },
    { reason: 'DoesNotExist does not match a present label', labels: LABELS, selector: { matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] }, want: false },
    {
      reason: 'an inherited property is not a label: Exists on "constructor" does not match',
      labels: LABELS,
      selector: { matchExpressions: [{ key: 'constructor', operator: 'Exists' }] },
      want: false,
    },
    {
      reason: 'matchLabels and matchExpressions are ANDed: a failing expression vetoes matching labels',
      labels: LABELS,
      selector: { matchLabels: { tier: 'frontend' }, matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] },
      want: false,
    },
    {
      reason: 'matchLabels and matchExpressions all satisfied match',
      labels: LABELS,
      selector: { matchLabels: { tier: 'frontend' }, matchExpressions: [{ key: 'team', operator: 'In', values: ['payments'] }, { key: 'env', operator: 'DoesNotExist' }] },
      want: true,
    },
    {
      reason: 'an unknown operator matches nothing rather than everything',
      labels: LABELS,
      selector: { matchExpressions: [{ key: 'tier', operator: 'Equals' as 'In', values: ['frontend'] }] },
      want: false,
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      assert.equal(matchesSelector(c.labels, c.selector), c.want)
    })
  }
})

function obj(namespace: string, name: string, labels: Record<string, string> = LABELS, apiVersion = 'apps/v1', kind = 'Deployment'): KubeObject {
  return { apiVersion, kind, metadata: { namespace, name, labels } }
}

function program(expression: string): CelProgram {
  const c = compileCel(expression)
  if (!c.ok) throw new Error(c.error.message)
  return c.program
}

describe('selection predicates', () => {
  const noScope = effectiveScope('team-a', [])
  const cases: { reason: string; predicate: Predicate; object: KubeObject; want: string | null }[] = [
    { reason: 'inNamespace passes an allowed namespace', predicate: inNamespace(new Set(['team-a']), new Set()), object: obj('team-a', 'a'), want: null },
    { reason: 'inNamespace refuses a namespace that was not selected', predicate: inNamespace(new Set(['team-a']), new Set()), object: obj('team-b', 'a'), want: 'namespace team-b is not selected' },
    { reason: 'inNamespace with * passes any namespace that is not denied', predicate: inNamespace('*', new Set(['kube-system'])), object: obj('team-z', 'a'), want: null },
    { reason: 'inNamespace: denied wins over *', predicate: inNamespace('*', new Set(['kube-system'])), object: obj('kube-system', 'a'), want: 'namespace kube-system is denied by scope' },
    { reason: 'inNamespace: denied wins over an explicit allow',
      predicate: inNamespace(new Set(['kube-system']), new Set(['kube-system'])), object: obj('kube-system', 'a'),
      want: 'namespace kube-system is denied by scope' },
    { reason: 'matchesLabels passes matching labels', predicate: matchesLabels({ matchLabels: { tier: 'frontend' } }), object: obj('team-a', 'a'), want: null },
    { reason: 'matchesLabels gives its reason', predicate: matchesLabels({ matchLabels: { tier: 'backend' } }), object: obj('team-a', 'a'), want: 'labels do not match labelSelector' },
    { reason: 'no match policy passes everything', predicate: passesMatchPolicy(undefined), object: obj('team-a', 'tmp-a'), want: null },
    { reason: 'a true match policy passes', predicate: passesMatchPolicy(program("!object.metadata.name.startsWith('tmp-')")), object: obj('team-a', 'web'), want: null },
    { reason: 'a false match policy refuses', predicate: passesMatchPolicy(program("!object.metadata.name.startsWith('tmp-')")), object: obj('team-a', 'tmp-a'), want: 'matchPolicy is false' },
    { reason: 'a non-bool match policy refuses', predicate: passesMatchPolicy(program('object.metadata.name')), object: obj('team-a', 'web'), want: 'matchPolicy did not return a bool' },
    { reason: 'a failing match policy says why', predicate: passesMatchPolicy(program('1 / 0 == 1')), object: obj('team-a', 'web'), want: 'matchPolicy failed: division by zero' },
    { reason: 'allowedByScope passes a Deployment without a scope', predicate: allowedByScope(noScope), object: obj('team-a', 'web'), want: null },
    { reason: 'allowedByScope refuses a core Secret without a scope', predicate: allowedByScope(noScope), object: obj('team-a', 's', {}, 'v1', 'Secret'), want: 'Secret is not allowed by scope' },
    { reason: 'allowedByScope passes a Secret-named kind of another group', predicate: allowedByScope(noScope), object: obj('team-a', 's', {}, 'example.com/v1', 'Secret'), want: null },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const rejection = c.predicate(c.object)
      assert.equal(rejection && describeRejection(rejection), c.want)
    })
  }

  test('select returns the first failing reason in chain order, or null', () => {
    const chain = [inNamespace(new Set(['team-a']), new Set()), matchesLabels({ matchLabels: { tier: 'frontend' } }), passesMatchPolicy(program("object.metadata.name != 'skip'"))]
    assert.deepStrictEqual(
      [obj('team-a', 'web'), obj('team-b', 'web', { tier: 'backend' }), obj('team-a', 'web', { tier: 'backend' }), obj('team-a', 'skip')].map((o) => {
        const r = select(o, chain)
        return r && describeRejection(r)
      }),
      [null, 'namespace team-b is not selected', 'labels do not match labelSelector', 'matchPolicy is false'],
    )
  })

  test('splitApiVersion splits group and version, and a core apiVersion has an empty group', () => {
    assert.deepStrictEqual(
      ['apps/v1', 'v1', 'cert-manager.io/v1', ''].map(splitApiVersion),
      [['apps', 'v1'], ['', 'v1'], ['cert-manager.io', 'v1'], ['', '']],
    )
  })
})
