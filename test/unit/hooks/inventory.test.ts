import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { validateStatus } from '../../../api/crd-schemas.js'
import type { InventoryExportState, KollectInventorySpec, KollectSinkSpec, KubeObject, SinkExportState } from '../../../api/types.js'
import { composeInventory, customizeInventory, finalizeInventoryResponse, resyncAfterSeconds, syncInventoryResponse } from '../../../hooks/inventory.js'
import { inventoryStatus, type Composed } from '../../../hooks/inventory-status.js'
import type { CustomizeRequest, CustomizeResponse, RelatedRule, SyncRequest } from '../../../hooks/request.js'
import { controllerFor, customizeRequest, loadExampleCr, relatedMap, syncRequest, TYPES } from '../../support/metacontroller.js'
import { asSyncRequest, cond, scopeCr, wire } from './fixtures.js'

const INVENTORY = { namespace: 'team-a', name: 'prod-inventory' }
const GIT_SINK = loadExampleCr('sink-git.yaml')
const GIT_SPEC = GIT_SINK['spec'] as KollectSinkSpec
const SHARED_PG: KubeObject = { ...loadExampleCr('sink-postgres.yaml', 'sinks'), metadata: { name: 'shared-pg', namespace: 'platform', uid: 'uid-shared-pg', generation: 1 } }
const PG_SPEC = SHARED_PG['spec'] as KollectSinkSpec
const PROD_DEPLOYS = loadExampleCr('target-deployments.yaml')

/** The example inventory (targets prod-deploys, sink git-demo, debounce 10s, maxWait 2m) with spec fields replaced; undefined removes one. */
function inventory(spec: Partial<Record<keyof KollectInventorySpec, unknown>> = {}): KubeObject {
  const inv = loadExampleCr('inventory.yaml')
  return wire({ ...inv, spec: { ...(inv['spec'] as object), ...spec } })
}

function request(parent: KubeObject, related: { targets?: KubeObject[]; sinks?: KubeObject[]; scopes?: KubeObject[] } = {}): SyncRequest {
  const map = relatedMap([TYPES.scope, TYPES.target, TYPES.sink], {
    [TYPES.target]: related.targets ?? [PROD_DEPLOYS],
    [TYPES.sink]: related.sinks ?? [GIT_SINK, SHARED_PG],
    [TYPES.scope]: related.scopes ?? [],
  })
  return asSyncRequest(syncRequest(controllerFor('kollect-inventories'), parent, map))
}

// ---- customize ----

const API = 'kollect.dev/v1alpha1'
const SCOPE_RULE: RelatedRule = { apiVersion: API, resource: 'kollectscopes', namespace: 'team-a', labelSelector: {} }

describe('customizeInventory', () => {
  const cases: { reason: string; parent: KubeObject; want: CustomizeResponse }[] = [
    {
      reason: 'the example asks for its scopes, its target by name and its sink by name',
      parent: inventory(),
      want: {
        relatedResources: [
          SCOPE_RULE,
          { apiVersion: API, resource: 'kollecttargets', namespace: 'team-a', names: ['prod-deploys'] },
          { apiVersion: API, resource: 'kollectsinks', namespace: 'team-a', names: ['git-demo'] },
        ],
      },
    },
    {
      reason: 'target names are sorted and deduplicated; sinks are grouped per namespace, namespaces and names sorted; another sink namespace\'s scopes are asked for too',
      parent: inventory({
        targetRefs: [{ name: 'b' }, { name: 'a' }, { name: 'b' }],
        sinkRefs: [{ name: 'z' }, { name: 'shared-pg', namespace: 'platform' }, { name: 'a', namespace: 'team-a' }, { name: 'events', namespace: 'platform' }, { name: 'a' }],
      }),
      want: {
        relatedResources: [
          SCOPE_RULE,
          { apiVersion: API, resource: 'kollecttargets', namespace: 'team-a', names: ['a', 'b'] },
          { apiVersion: API, resource: 'kollectsinks', namespace: 'platform', names: ['events', 'shared-pg'] },
          { apiVersion: API, resource: 'kollectsinks', namespace: 'team-a', names: ['a', 'z'] },
          { apiVersion: API, resource: 'kollectscopes', namespace: 'platform', labelSelector: {} },
        ],
      },
    },
    {
      reason: 'a targetSelector becomes a label selector on targets in the own namespace',
      parent: inventory({ targetRefs: undefined, targetSelector: { matchLabels: { env: 'prod' } }, sinkRefs: undefined }),
      want: { relatedResources: [SCOPE_RULE, { apiVersion: API, resource: 'kollecttargets', namespace: 'team-a', labelSelector: { matchLabels: { env: 'prod' } } }] },
    },
    {
      reason: 'an inventory naming nothing asks only for its scopes',
      parent: inventory({ targetRefs: undefined, sinkRefs: undefined }),
      want: { relatedResources: [SCOPE_RULE] },
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const req = wire(customizeRequest(controllerFor('kollect-inventories'), c.parent)) as unknown as CustomizeRequest
      assert.deepStrictEqual(customizeInventory(req), c.want)
    })
  }
})

// ---- compose ----

function composed(
  over: {
    targets?: string[]; sinks?: { namespace: string; name: string; spec: KollectSinkSpec }[]
    useDefaultSink?: boolean; debounceMs?: number; maxWaitMs?: number; suspend?: boolean
  },
  problems: { reason: string; message: string }[] = [],
): Composed {
  return {
    ok: true,
    problems,
    composition: {
      inventory: INVENTORY,
      generation: 1,
      targets: (over.targets ?? ['prod-deploys']).map((name) => ({ namespace: 'team-a', name })),
      sinks: over.sinks ?? [{ namespace: 'team-a', name: 'git-demo', spec: GIT_SPEC }],
      useDefaultSink: over.useDefaultSink ?? false,
      debounceMs: over.debounceMs ?? 10_000,
      maxWaitMs: over.maxWaitMs ?? 120_000,
      suspend: over.suspend ?? false,
    },
  }
}

const WITH_SHARED_PG = [{ name: 'git-demo' }, { name: 'shared-pg', namespace: 'platform' }]
const BOTH_SINKS = [{ namespace: 'team-a', name: 'git-demo', spec: GIT_SPEC }, { namespace: 'platform', name: 'shared-pg', spec: PG_SPEC }]
const ALLOW_SHARED_PG = scopeCr('pg', { allowedSinks: [{ namespace: 'platform', name: 'shared-pg' }] })
const VAULT_CREDS = { namespace: 'vault', name: 'git-creds' }
/** The example git sink with a remote and a Secret in the namespace vault. */
const REMOTE_GIT_SPEC: KollectSinkSpec = { ...GIT_SPEC, git: { ...GIT_SPEC.git, url: 'https://git.example.com/inv.git' }, secretRef: VAULT_CREDS }
const REMOTE_GIT: KubeObject = { ...GIT_SINK, spec: REMOTE_GIT_SPEC }
/** shared-pg in platform, reading its DSN from the namespace vault. */
const VAULT_PG_SPEC: KollectSinkSpec = { ...PG_SPEC, secretRef: { namespace: 'vault', name: 'pg-creds' } }
const VAULT_PG: KubeObject = { ...SHARED_PG, spec: VAULT_PG_SPEC }
const GIT_SECRET_DENIED = {
  reason: 'ScopeSecretDenied',
  message: 'Secret vault/git-creds of KollectSink team-a/git-demo is not allowed by the scope of namespace team-a (no KollectScope: own namespace only)',
}

describe('composeInventory', () => {
  const cases: { reason: string; req: () => SyncRequest; want: Composed }[] = [
    {
      reason: 'the example resolves its target and sink with its own debounce and maxWait',
      req: () => request(inventory()),
      want: composed({}),
    },
    {
      reason: 'a missing target is a TargetNotFound problem and the composition goes on without it',
      req: () => request(inventory({ targetRefs: [{ name: 'prod-deploys' }, { name: 'gone' }] })),
      want: composed({}, [{ reason: 'TargetNotFound', message: 'KollectTarget not found in team-a: gone' }]),
    },
    {
      reason: 'a sink in another namespace without a scope is ScopeSinkDenied and left out',
      req: () => request(inventory({ sinkRefs: WITH_SHARED_PG })),
      want: composed({}, [{ reason: 'ScopeSinkDenied', message: 'sinks not allowed by the scope of namespace team-a: platform/shared-pg' }]),
    },
    {
      reason: 'a sink in another namespace that the scope allows is resolved',
      req: () => request(inventory({ sinkRefs: WITH_SHARED_PG }), { scopes: [ALLOW_SHARED_PG] }),
      want: composed({ sinks: BOTH_SINKS }),
    },
    {
      reason: 'a sink whose Secret is in another namespace is ScopeSecretDenied and left out without a scope granting it',
      req: () => request(inventory(), { sinks: [REMOTE_GIT] }),
      want: composed({ sinks: [] }, [GIT_SECRET_DENIED]),
    },
    {
      reason: 'a scope of the sink\'s namespace listing the Secret in allowedSecrets lets the sink use it',
      req: () => request(inventory(), { sinks: [REMOTE_GIT], scopes: [scopeCr('vault', { allowedSecrets: [VAULT_CREDS] })] }),
      want: composed({ sinks: [{ namespace: 'team-a', name: 'git-demo', spec: REMOTE_GIT_SPEC }] }),
    },
    {
      reason: 'two scopes in the sink\'s namespace: one that does not list the Secret refuses it',
      req: () => request(inventory(), { sinks: [REMOTE_GIT], scopes: [scopeCr('vault', { allowedSecrets: [VAULT_CREDS] }), scopeCr('other', {})] }),
      want: composed({ sinks: [] }, [{ ...GIT_SECRET_DENIED, message: GIT_SECRET_DENIED.message.replace('(no KollectScope: own namespace only)', '(KollectScope other, vault)') }]),
    },
    {
      reason: 'a sink of another namespace is judged by its own namespace\'s scopes, not the inventory\'s',
      req: () => request(inventory({ sinkRefs: WITH_SHARED_PG }), {
        sinks: [GIT_SINK, VAULT_PG],
        scopes: [scopeCr('pg', { allowedSinks: [{ namespace: 'platform', name: 'shared-pg' }], allowedSecrets: [{ namespace: 'vault', name: 'pg-creds' }] })],
      }),
      want: composed({}, [{
        reason: 'ScopeSecretDenied',
        message: 'Secret vault/pg-creds of KollectSink platform/shared-pg is not allowed by the scope of namespace platform (no KollectScope: own namespace only)',
      }]),
    },
    {
      reason: 'the scope of the other sink\'s namespace can grant its Secret',
      req: () => request(inventory({ sinkRefs: WITH_SHARED_PG }), {
        sinks: [GIT_SINK, VAULT_PG], scopes: [ALLOW_SHARED_PG, scopeCr('platform', { allowedSecrets: [{ namespace: 'vault', name: 'pg-creds' }] }, 'platform')],
      }),
      want: composed({ sinks: [{ namespace: 'team-a', name: 'git-demo', spec: GIT_SPEC }, { namespace: 'platform', name: 'shared-pg', spec: VAULT_PG_SPEC }] }),
    },
    {
      reason: 'a related scope of another namespace never widens the inventory\'s: its allowedSinks and minDebounce are ignored',
      req: () => request(inventory({ sinkRefs: WITH_SHARED_PG }), { scopes: [scopeCr('platform', { allowedSinks: [{ namespace: 'platform', name: 'shared-pg' }], minDebounce: '1h' }, 'platform')] }),
      want: composed({}, [{ reason: 'ScopeSinkDenied', message: 'sinks not allowed by the scope of namespace team-a: platform/shared-pg' }]),
    },
    {
      reason: 'a sink that does not exist is SinkNotFound, and a repeated ref counts once',
      req: () => request(inventory({ sinkRefs: [{ name: 'git-demo' }, { name: 'nope' }, { name: 'git-demo', namespace: 'team-a' }] })),
      want: composed({}, [{ reason: 'SinkNotFound', message: 'KollectSink not found: team-a/nope' }]),
    },
    {
      reason: 'a debounce below the scope minimum is raised, with a DebounceRaised problem',
      req: () => request(inventory(), { scopes: [scopeCr('slow', { minDebounce: '30s' })] }),
      want: composed({ debounceMs: 30_000 }, [{ reason: 'DebounceRaised', message: 'debounce 10s raised to the scope minimum 30s' }]),
    },
    {
      reason: 'a raised debounce also lifts a maxWait that would fall below it',
      req: () => request(inventory(), { scopes: [scopeCr('slower', { minDebounce: '3m' })] }),
      want: composed({ debounceMs: 180_000, maxWaitMs: 180_000 }, [{ reason: 'DebounceRaised', message: 'debounce 10s raised to the scope minimum 3m' }]),
    },
    {
      reason: 'maxWait is never below debounce',
      req: () => request(inventory({ debounce: '1m30s', maxWait: '30s' })),
      want: composed({ debounceMs: 90_000, maxWaitMs: 90_000 }),
    },
    {
      reason: 'without debounce and maxWait the defaults are 10s and 2m',
      req: () => request(inventory({ debounce: undefined, maxWait: undefined })),
      want: composed({ debounceMs: 10_000, maxWaitMs: 120_000 }),
    },
    {
      reason: 'suspend is carried into the composition',
      req: () => request(inventory({ suspend: true })),
      want: composed({ suspend: true }),
    },
    {
      reason: 'with a targetSelector the related targets of the own namespace are the targets, in key order',
      req: () =>
        request(inventory({ targetRefs: undefined, targetSelector: { matchLabels: { env: 'prod' } } }), {
          targets: [{ ...PROD_DEPLOYS, metadata: { name: 'zz-deploys', namespace: 'team-a' } }, PROD_DEPLOYS, { ...PROD_DEPLOYS, metadata: { name: 'other', namespace: 'team-b' } }],
        }),
      want: composed({ targets: ['prod-deploys', 'zz-deploys'] }),
    },
    {
      reason: 'sinks that are all refused leave no sink at all, never the embedded default',
      req: () => request(inventory({ sinkRefs: [{ name: 'shared-pg', namespace: 'platform' }] })),
      want: composed({ sinks: [] }, [{ reason: 'ScopeSinkDenied', message: 'sinks not allowed by the scope of namespace team-a: platform/shared-pg' }]),
    },
    {
      reason: 'an inventory that names no sinks exports to the embedded default',
      req: () => request(inventory({ sinkRefs: undefined })),
      want: composed({ sinks: [], useDefaultSink: true }),
    },
    {
      reason: 'an invalid spec is not composed at all',
      req: () => request(inventory({ debounce: 'soon' })),
      want: { ok: false, problems: [{ reason: 'InvalidSpec', message: 'spec.debounce: must match pattern "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"' }] },
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      assert.deepStrictEqual(composeInventory(c.req()), c.want)
    })
  }
})

// ---- status ----

const CHECKSUM = 'f36372d41ec0b9e0222aa653c23bafca92a292419991f808ed2fcc84f847ca9d'
const EXPORTED_AT = '2026-11-01T10:00:05Z'
const GIT_SYNCED: SinkExportState = { namespace: 'team-a', name: 'git-demo', state: 'Synced', checksum: CHECKSUM, itemCount: 2, lastExportTime: EXPORTED_AT, message: '' }
const REVIEW_URL = 'https://gitea.example/platform/inventory/pulls/7'
const GIT_REVIEWING: SinkExportState = { ...GIT_SYNCED, state: 'AwaitingReview', reviewUrl: REVIEW_URL, message: `awaiting review: ${REVIEW_URL}` }
const PG_FAILING: SinkExportState = { namespace: 'platform', name: 'shared-pg', state: 'Failing', checksum: '', itemCount: 0, message: 'connection refused (attempt 3, next in 4s)' }
const PG_UNVERIFIED: SinkExportState = {
  namespace: 'platform', name: 'shared-pg', state: 'Unverified', checksum: CHECKSUM, itemCount: 2, lastExportTime: EXPORTED_AT,
  message: 'drift check failed, retrying with backoff: connection refused',
}

function exportState(over: Partial<InventoryExportState>): InventoryExportState {
  return { complete: true, missingTargets: [], itemCount: 2, checksum: CHECKSUM, lastExportTime: EXPORTED_AT, sinks: [GIT_SYNCED], ...over }
}

const SINK_DENIED = { reason: 'ScopeSinkDenied', message: 'sinks not allowed by the scope of namespace team-a: platform/shared-pg' }
const SINK_MISSING = { reason: 'SinkNotFound', message: 'KollectSink not found: team-a/git-demo' }
const MISSPELT_READY = cond('Ready', 'False', 'ResourceUnresolved', 'discovery knows no kind Deploymnet in apps/v1; set spec.resource.plural if the CRD is not installed yet')
/** A target of the inventory's namespace whose own sync fails (a misspelt kind), so it never reports. */
function failingTarget(name: string): KubeObject {
  return { ...PROD_DEPLOYS, metadata: { name, namespace: 'team-a' }, status: { observedGeneration: 1, conditions: [MISSPELT_READY] } }
}
const MISSING = (names: string[]) => names.map((name) => ({ namespace: 'team-a', name }))

describe('inventoryStatus', () => {
  const cases: { reason: string; composed: Composed; state: InventoryExportState | null; want: Record<string, unknown>; targets?: KubeObject[] }[] = [
    {
      reason: 'every sink holding the latest snapshot is Synced True Exported, not Degraded',
      composed: composed({}),
      state: exportState({}),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [GIT_SYNCED],
        lastExportTime: EXPORTED_AT,
        conditions: [
          cond('Degraded', 'False', 'AsExpected', ''),
          cond('Ready', 'True', 'Resolved', '1 targets, 1 sinks'),
          cond('Synced', 'True', 'Exported', '2 items exported to 1 sinks'),
        ],
      },
    },
    {
      reason: 'a first export still due is Pending, and lastExportTime is absent because there was none',
      composed: composed({}),
      state: exportState({
        lastExportTime: undefined, checksum: '', itemCount: 2,
        sinks: [{ namespace: 'team-a', name: 'git-demo', state: 'Pending', checksum: '', itemCount: 0, message: 'export due in 2s' }],
      }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: '',
        targetCount: 1,
        sinks: [{ namespace: 'team-a', name: 'git-demo', state: 'Pending', checksum: '', itemCount: 0, message: 'export due in 2s' }],
        conditions: [
          cond('Degraded', 'False', 'AsExpected', ''),
          cond('Ready', 'True', 'Resolved', '1 targets, 1 sinks'),
          cond('Synced', 'False', 'Pending', '1 of 1 sinks pending'),
        ],
      },
    },
    {
      reason: 'a change waiting for the debounce is Synced False Pending, though every sink still holds the last export; checksum and itemCount stay the last export\'s',
      composed: composed({}),
      state: exportState({ pending: true, nextChangeInMs: 1_500 }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [GIT_SYNCED],
        lastExportTime: EXPORTED_AT,
        conditions: [
          cond('Degraded', 'False', 'AsExpected', ''),
          cond('Ready', 'True', 'Resolved', '1 targets, 1 sinks'),
          cond('Synced', 'False', 'Pending', 'a change waits for the 10s debounce; checksum and itemCount are the last export\'s'),
        ],
      },
    },
    {
      reason: 'a sink awaiting review is Synced False AwaitingReview naming the request, and not Degraded',
      composed: composed({}),
      state: exportState({ sinks: [GIT_REVIEWING] }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [GIT_REVIEWING],
        lastExportTime: EXPORTED_AT,
        conditions: [
          cond('Degraded', 'False', 'AsExpected', ''),
          cond('Ready', 'True', 'Resolved', '1 targets, 1 sinks'),
          cond('Synced', 'False', 'AwaitingReview', `1 of 1 sinks await review: team-a/git-demo ${REVIEW_URL}`),
        ],
      },
    },
    {
      reason: 'a failing sink is Synced False Failing and Degraded True SinkFailing with its message; the healthy sink is unaffected',
      composed: composed({ sinks: BOTH_SINKS }),
      state: exportState({ sinks: [PG_FAILING, GIT_SYNCED] }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [PG_FAILING, GIT_SYNCED],
        lastExportTime: EXPORTED_AT,
        conditions: [
          cond('Degraded', 'True', 'SinkFailing', 'platform/shared-pg: connection refused (attempt 3, next in 4s)'),
          cond('Ready', 'True', 'Resolved', '1 targets, 2 sinks'),
          cond('Synced', 'False', 'Failing', '1 of 2 sinks failing'),
        ],
      },
    },
    {
      reason: 'a sink whose drift check fails is Synced False Unverified and Degraded True SinkUnverified with its message, never Exported',
      composed: composed({ sinks: BOTH_SINKS }),
      state: exportState({ sinks: [PG_UNVERIFIED, GIT_SYNCED] }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [PG_UNVERIFIED, GIT_SYNCED],
        lastExportTime: EXPORTED_AT,
        conditions: [
          cond('Degraded', 'True', 'SinkUnverified', 'platform/shared-pg: drift check failed, retrying with backoff: connection refused'),
          cond('Ready', 'True', 'Resolved', '1 targets, 2 sinks'),
          cond('Synced', 'False', 'Unverified', '1 of 2 sinks cannot be checked for drift; the checks are retried'),
        ],
      },
    },
    {
      reason: 'a failing write outranks a failing drift check in Synced and Degraded',
      composed: composed({ sinks: BOTH_SINKS }),
      state: exportState({ sinks: [PG_FAILING, { ...GIT_SYNCED, state: 'Unverified', message: 'drift check failed, retrying with backoff: fetch refused' }] }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [PG_FAILING, { ...GIT_SYNCED, state: 'Unverified', message: 'drift check failed, retrying with backoff: fetch refused' }],
        lastExportTime: EXPORTED_AT,
        conditions: [
          cond('Degraded', 'True', 'SinkFailing', 'platform/shared-pg: connection refused (attempt 3, next in 4s); team-a/git-demo: drift check failed, retrying with backoff: fetch refused'),
          cond('Ready', 'True', 'Resolved', '1 targets, 2 sinks'),
          cond('Synced', 'False', 'Failing', '1 of 2 sinks failing'),
        ],
      },
    },
    {
      reason: 'an exporter that has not heard from every target is WaitingForTargets and names them',
      composed: composed({ targets: ['prod-deploys', 'staging-deploys'] }),
      state: exportState({ complete: false, missingTargets: [{ namespace: 'team-a', name: 'staging-deploys' }], lastExportTime: undefined, sinks: [] }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 2,
        sinks: [],
        conditions: [
          cond('Degraded', 'False', 'AsExpected', ''),
          cond('Ready', 'True', 'Resolved', '2 targets, 0 sinks'),
          cond('Synced', 'False', 'WaitingForTargets', 'waiting for targets to report: staging-deploys'),
        ],
      },
    },
    {
      reason: 'a target that never reports because its own sync fails is named with its Ready reason and message, and one not yet synced says so',
      composed: composed({ targets: ['prod-deploys', 'misspelt', 'fresh'] }),
      state: exportState({ complete: false, missingTargets: MISSING(['misspelt', 'fresh']), lastExportTime: undefined, sinks: [] }),
      targets: [PROD_DEPLOYS, failingTarget('misspelt'), { ...PROD_DEPLOYS, metadata: { name: 'fresh', namespace: 'team-a' } }],
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 3,
        sinks: [],
        conditions: [
          cond('Degraded', 'False', 'AsExpected', ''),
          cond('Ready', 'True', 'Resolved', '3 targets, 0 sinks'),
          cond('Synced', 'False', 'WaitingForTargets', `waiting for targets to report: fresh (no status yet), misspelt (Ready=False ResourceUnresolved: ${MISSPELT_READY.message})`),
        ],
      },
    },
    {
      reason: 'many waited-for targets are named sorted, the first five only, and the rest counted',
      composed: composed({ targets: ['g', 'f', 'e', 'd', 'c', 'b', 'a'] }),
      state: exportState({ complete: false, missingTargets: MISSING(['g', 'f', 'e', 'd', 'c', 'b', 'a']), lastExportTime: undefined, sinks: [] }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 7,
        sinks: [],
        conditions: [
          cond('Degraded', 'False', 'AsExpected', ''),
          cond('Ready', 'True', 'Resolved', '7 targets, 0 sinks'),
          cond('Synced', 'False', 'WaitingForTargets', 'waiting for targets to report: a, b, c, d, e and 2 more'),
        ],
      },
    },
    {
      reason: 'every named sink refused is Synced False NoSinks naming them, never True "exported to 0 sinks", with Ready and Degraded on the refusal',
      composed: composed({ sinks: [] }, [SINK_DENIED]),
      state: exportState({ sinks: [], lastExportTime: undefined }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [],
        conditions: [
          cond('Degraded', 'True', 'ScopeSinkDenied', SINK_DENIED.message),
          cond('Ready', 'False', 'ScopeSinkDenied', SINK_DENIED.message),
          cond('Synced', 'False', 'NoSinks', `no sink to export to: ${SINK_DENIED.message}`),
        ],
      },
    },
    {
      reason: 'with no sink at all NoSinks comes before WaitingForTargets: a target reporting would still leave nowhere to write',
      composed: composed({ sinks: [] }, [SINK_MISSING, SINK_DENIED]),
      state: exportState({ complete: false, missingTargets: MISSING(['prod-deploys']), sinks: [], lastExportTime: undefined }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [],
        conditions: [
          cond('Degraded', 'True', 'SinkNotFound', `${SINK_MISSING.message}; ${SINK_DENIED.message}`),
          cond('Ready', 'False', 'SinkNotFound', `${SINK_MISSING.message}; ${SINK_DENIED.message}`),
          cond('Synced', 'False', 'NoSinks', `no sink to export to: ${SINK_MISSING.message}; ${SINK_DENIED.message}`),
        ],
      },
    },
    {
      reason: 'a composition with no sinks and no problem to name (admission bypassed) is NoSinks on all three, never Resolved',
      composed: composed({ sinks: [] }),
      state: exportState({ sinks: [], lastExportTime: undefined }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [],
        conditions: [
          cond('Degraded', 'True', 'NoSinks', 'no sink to export to'),
          cond('Ready', 'False', 'NoSinks', 'no sink to export to'),
          cond('Synced', 'False', 'NoSinks', 'no sink to export to'),
        ],
      },
    },
    {
      reason: 'an exporter holding no sink for a composition that has one is not Exported: no sink holds the export',
      composed: composed({}),
      state: exportState({ sinks: [], lastExportTime: undefined }),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [],
        conditions: [
          cond('Degraded', 'False', 'AsExpected', ''),
          cond('Ready', 'True', 'Resolved', '1 targets, 0 sinks'),
          cond('Synced', 'False', 'NoSinks', 'no sink to export to'),
        ],
      },
    },
    {
      reason: 'a suspended inventory is Synced False Suspended',
      composed: composed({ suspend: true }),
      state: exportState({}),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [GIT_SYNCED],
        lastExportTime: EXPORTED_AT,
        conditions: [
          cond('Degraded', 'False', 'AsExpected', ''),
          cond('Ready', 'True', 'Resolved', '1 targets, 1 sinks'),
          cond('Synced', 'False', 'Suspended', 'inventory is suspended; nothing is exported'),
        ],
      },
    },
    {
      reason: 'a blocking problem makes Ready False and Degraded True with its reason',
      composed: composed({}, [{ reason: 'TargetNotFound', message: 'KollectTarget not found in team-a: gone' }]),
      state: exportState({}),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [GIT_SYNCED],
        lastExportTime: EXPORTED_AT,
        conditions: [
          cond('Degraded', 'True', 'TargetNotFound', 'KollectTarget not found in team-a: gone'),
          cond('Ready', 'False', 'TargetNotFound', 'KollectTarget not found in team-a: gone'),
          cond('Synced', 'True', 'Exported', '2 items exported to 1 sinks'),
        ],
      },
    },
    {
      reason: 'a raised debounce is not blocking: Ready stays True and the note shows on Degraded False',
      composed: composed({ debounceMs: 5000 }, [{ reason: 'DebounceRaised', message: 'debounce 2s raised to the scope minimum 5s' }]),
      state: exportState({}),
      want: {
        observedGeneration: 1,
        itemCount: 2,
        checksum: CHECKSUM,
        targetCount: 1,
        sinks: [GIT_SYNCED],
        lastExportTime: EXPORTED_AT,
        conditions: [
          cond('Degraded', 'False', 'AsExpected', 'debounce 2s raised to the scope minimum 5s'),
          cond('Ready', 'True', 'Resolved', '1 targets, 1 sinks'),
          cond('Synced', 'True', 'Exported', '2 items exported to 1 sinks'),
        ],
      },
    },
    {
      reason: 'an invalid spec reports its problem on all three conditions, with empty summaries',
      composed: { ok: false, problems: [{ reason: 'InvalidSpec', message: 'spec.debounce: bad' }] },
      state: null,
      want: {
        observedGeneration: 1,
        itemCount: 0,
        checksum: '',
        targetCount: 0,
        sinks: [],
        conditions: [
          cond('Degraded', 'True', 'InvalidSpec', 'spec.debounce: bad'),
          cond('Ready', 'False', 'InvalidSpec', 'spec.debounce: bad'),
          cond('Synced', 'Unknown', 'InvalidSpec', 'spec.debounce: bad'),
        ],
      },
    },
    {
      reason: 'no answer from the exporter is ExporterUnavailable',
      composed: composed({}),
      state: null,
      want: {
        observedGeneration: 1,
        itemCount: 0,
        checksum: '',
        targetCount: 0,
        sinks: [],
        conditions: [
          cond('Degraded', 'True', 'ExporterUnavailable', 'the exporter did not answer'),
          cond('Ready', 'False', 'ExporterUnavailable', 'the exporter did not answer'),
          cond('Synced', 'Unknown', 'ExporterUnavailable', 'the exporter did not answer'),
        ],
      },
    },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const status = inventoryStatus(request(inventory(), c.targets ? { targets: c.targets } : {}), c.composed, c.state)
      assert.deepStrictEqual(status, c.want)
      assert.deepStrictEqual(validateStatus('KollectInventory', wire(status)), { valid: true })
    })
  }

  test('the time left until the next change never reaches status', () => {
    const req = request(inventory())
    const at = (ms: number) => JSON.stringify(inventoryStatus(req, composed({}), exportState({ pending: true, nextChangeInMs: ms })))
    assert.equal(at(1_999), at(3))
  })

  test('the status is byte-identical for identical inputs', () => {
    const a = inventoryStatus(request(inventory()), composeInventory(request(inventory())), exportState({ sinks: [PG_FAILING, GIT_SYNCED] }))
    const b = inventoryStatus(request(inventory()), composeInventory(request(inventory())), exportState({ sinks: [PG_FAILING, GIT_SYNCED] }))
    assert.equal(JSON.stringify(a), JSON.stringify(b))
  })

  test('sync wraps the status with no children; finalize is done only when the exporter confirms', () => {
    const req = request(inventory())
    const c = composeInventory(req)
    const state = exportState({})
    const status = inventoryStatus(req, c, state)
    assert.deepStrictEqual(
      [syncInventoryResponse(req, c, state), finalizeInventoryResponse(req, c, { finalized: true, state }), finalizeInventoryResponse(req, c, { finalized: false, state })],
      [{ status, children: [] }, { status, children: [], finalized: true }, { status, children: [], finalized: false, resyncAfterSeconds: 5 }],
    )
  })
})

describe('resyncAfterSeconds', () => {
  const PENDING_WRITE: SinkExportState = { ...GIT_SYNCED, state: 'Pending' }
  const cases: { reason: string; composed?: Composed; state: InventoryExportState; want: number | undefined }[] = [
    { reason: 'every sink synced and nothing waiting: no resync', state: exportState({}), want: undefined },
    { reason: 'a change waiting 1.5 s for the debounce: the time left rounded up, plus 1 s of margin', state: exportState({ pending: true, nextChangeInMs: 1_500 }), want: 3 },
    { reason: 'a debounce firing now: at least 1 s', state: exportState({ pending: true, nextChangeInMs: 0 }), want: 1 },
    { reason: 'a failing sink retrying in at most 8 s: 9 s', state: exportState({ sinks: [PG_FAILING, GIT_SYNCED], nextChangeInMs: 8_000 }), want: 9 },
    { reason: 'a failing sink backing off for 10 minutes: capped at 60 s', state: exportState({ sinks: [PG_FAILING, GIT_SYNCED], nextChangeInMs: 600_000 }), want: 60 },
    { reason: 'a sink awaiting review polled in 30 s: 31 s', state: exportState({ sinks: [GIT_REVIEWING], nextChangeInMs: 30_000 }), want: 31 },
    { reason: 'a write in flight with no timer: a short resync', state: exportState({ sinks: [PENDING_WRITE] }), want: 2 },
    { reason: 'a failing sink whose retry is running (no known end): a modest resync, not one a second', state: exportState({ sinks: [PG_FAILING, GIT_SYNCED] }), want: 10 },
    { reason: 'a drift check retried in at most 4 s: 5 s', state: exportState({ sinks: [PG_UNVERIFIED, GIT_SYNCED], nextChangeInMs: 4_000 }), want: 5 },
    { reason: 'a drift check retry running (no known end): a modest resync', state: exportState({ sinks: [PG_UNVERIFIED, GIT_SYNCED] }), want: 10 },
    { reason: 'targets not all heard from: a modest resync', state: exportState({ complete: false, missingTargets: [{ namespace: 'team-a', name: 'prod-deploys' }], sinks: [] }), want: 10 },
    { reason: 'an inventory with no sink waits for a sink or scope event, not a timer',
      composed: composed({ sinks: [] }), state: exportState({ complete: false, missingTargets: MISSING(['prod-deploys']), sinks: [] }), want: undefined },
    { reason: 'a suspended inventory never changes by itself: no resync', composed: composed({ suspend: true }), state: exportState({ pending: true, nextChangeInMs: 1_000 }), want: undefined },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const comp = c.composed ?? composed({})
      assert.ok(comp.ok)
      assert.equal(resyncAfterSeconds(comp.composition, c.state), c.want)
      const response = syncInventoryResponse(request(inventory()), comp, c.state)
      assert.equal(response.resyncAfterSeconds, c.want, 'the sync answer carries it')
      assert.equal('resyncAfterSeconds' in response, c.want !== undefined, 'absent, not undefined, when there is nothing to wait for')
    })
  }

  test('no composition or no exporter answer: no resync from the inventory (Metacontroller retries errors itself)', () => {
    const req = request(inventory())
    assert.equal('resyncAfterSeconds' in syncInventoryResponse(req, composed({}), null), false)
    assert.equal('resyncAfterSeconds' in syncInventoryResponse(req, { ok: false, problems: [{ reason: 'InvalidSpec', message: 'bad' }] }, exportState({})), false)
  })
})
