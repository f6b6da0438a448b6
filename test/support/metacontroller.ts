import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import type { KubeObject } from '../../api/types.js'

// Requests built the way Metacontroller builds them (hook version v2): the controller from a
// typed Go struct (kind, apiVersion, metadata, spec, status {} in that order), objects from
// informer caches (keys sorted, managedFields included), maps keyed "Kind.group/version" →
// "namespace/name", every declared type present, and Go's HTML-safe JSON escaping.

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')

export function controllerFor(name: 'kollect-targets' | 'kollect-inventories' | 'kollect-profiles' | 'kollect-sinks'): KubeObject {
  const cc = parse(readFileSync(path.join(ROOT, 'compositecontrollers', `${name}.yaml`), 'utf8')) as KubeObject
  const spec = cc['spec'] as Record<string, unknown>
  return { kind: cc.kind, apiVersion: cc.apiVersion, metadata: { name, uid: `cc-${name}`, generation: 1, resourceVersion: '100' }, spec, status: {} }
}

/** Go's map marshalling sorts keys; informer objects arrive that way. */
function sortedKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map(sortedKeys) as T
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const k of Object.keys(value).sort()) out[k] = sortedKeys((value as Record<string, unknown>)[k])
    return out as T
  }
  return value
}

/** encoding/json output: compact, with <, >, &, U+2028 and U+2029 escaped. */
export function goJson(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029')
}

function objectKey(o: KubeObject): string {
  return o.metadata?.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : (o.metadata?.name as string)
}

/** As encoding/json writes Metacontroller's maps: keys in byte order (ASCII here, where JavaScript's order is the same). */
function byKey<V>(entries: [string, V][]): Record<string, V> {
  return Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
}

export function relatedMap(types: string[], objects: Record<string, KubeObject[]>): Record<string, Record<string, KubeObject>> {
  const out = new Map<string, Record<string, KubeObject>>(types.map((t) => [t, {}]))
  for (const [t, list] of Object.entries(objects)) out.set(t, byKey(list.map((o) => [objectKey(o), sortedKeys(o)])))
  return byKey([...out])
}

export function syncRequest(controller: KubeObject, parent: KubeObject, related: Record<string, Record<string, KubeObject>>, finalizing = false): Record<string, unknown> {
  return { controller, parent: sortedKeys(parent), children: {}, related, finalizing }
}

export function customizeRequest(controller: KubeObject, parent: KubeObject): Record<string, unknown> {
  return { controller, parent: sortedKeys(parent) }
}

const managedFields = (manager: string, time: string) => [
  {
    apiVersion: 'apps/v1',
    fieldsType: 'FieldsV1',
    fieldsV1: {
      'f:metadata': { 'f:labels': { '.': {}, 'f:app': {}, 'f:tier': {} } },
      'f:spec': { 'f:replicas': {}, 'f:template': { 'f:spec': { 'f:containers': { 'k:{"name":"app"}': { '.': {}, 'f:image': {}, 'f:name': {} } } } } },
    },
    manager,
    operation: 'Apply',
    time,
  },
  {
    apiVersion: 'apps/v1',
    fieldsType: 'FieldsV1',
    fieldsV1: { 'f:status': { 'f:availableReplicas': {}, 'f:conditions': {}, 'f:readyReplicas': {}, 'f:replicas': {} } },
    manager: 'kube-controller-manager',
    operation: 'Update',
    subresource: 'status',
    time,
  },
]

/** A realistic Deployment (two containers, env, probes, managedFields unless told otherwise, status), deterministic in i. */
export function deployment(i: number, opts: { namespace?: string; tier?: string; name?: string; image?: string; managedFields?: boolean } = {}): KubeObject {
  const namespace = opts.namespace ?? 'team-a'
  const name = opts.name ?? `web-${String(i).padStart(5, '0')}`
  const replicas = 1 + (i % 4)
  const time = '2026-11-01T10:00:00Z'
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name,
      namespace,
      uid: `6f1c1d2e-0000-4000-8000-${String(i).padStart(12, '0')}`,
      generation: 3,
      resourceVersion: String(100000 + i),
      creationTimestamp: time,
      labels: { app: name, tier: opts.tier ?? 'frontend', team: 'payments', 'app.kubernetes.io/part-of': 'shop' },
      annotations: { 'deployment.kubernetes.io/revision': '3', 'kollect.dev/owner': 'payments <pay@example.com> & co' },
      ...(opts.managedFields === false ? {} : { managedFields: managedFields('argocd-controller', time) }),
    },
    spec: {
      replicas,
      revisionHistoryLimit: 10,
      progressDeadlineSeconds: 600,
      selector: { matchLabels: { app: name } },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: '25%' } },
      template: {
        metadata: { labels: { app: name, tier: opts.tier ?? 'frontend' } },
        spec: {
          serviceAccountName: name,
          terminationGracePeriodSeconds: 30,
          containers: [
            {
              name: 'app',
              image: opts.image ?? `registry.example.com/payments/${name}:1.${i % 9}.${i % 7}`,
              ports: [{ containerPort: 8080, name: 'http', protocol: 'TCP' }],
              env: [{ name: 'LOG_LEVEL', value: 'info' }, { name: 'DB_PASSWORD', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } }],
              resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
              readinessProbe: { httpGet: { path: '/ready', port: 8080 }, periodSeconds: 10 },
            },
            { name: 'envoy', image: 'registry.example.com/sidecars/envoy:1.29.1', ports: [{ containerPort: 15001, protocol: 'TCP' }], resources: { requests: { cpu: '50m', memory: '64Mi' } } },
          ],
        },
      },
    },
    status: {
      observedGeneration: 3,
      replicas,
      readyReplicas: i % 10 === 0 ? replicas - 1 : replicas,
      availableReplicas: replicas,
      updatedReplicas: replicas,
      conditions: [
        { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.', lastTransitionTime: time, lastUpdateTime: time },
        { type: 'Progressing', status: 'True', reason: 'NewReplicaSetAvailable', message: `ReplicaSet "${name}-5d4f" has successfully progressed.`, lastTransitionTime: time, lastUpdateTime: time },
      ],
    },
  }
}

/** An example CR as Metacontroller would send it: examples/crs/FILE, or examples/sinks/FILE. */
export function loadExampleCr(file: string, dir: 'crs' | 'sinks' = 'crs'): KubeObject {
  const obj = parse(readFileSync(path.join(ROOT, 'examples', dir, file), 'utf8')) as KubeObject
  obj.metadata = { ...obj.metadata, uid: `uid-${obj.metadata?.name}`, generation: 1, resourceVersion: '1', creationTimestamp: '2026-11-01T10:00:00Z' }
  return obj
}

export const TYPES = {
  profile: 'KollectProfile.kollect.dev/v1alpha1',
  scope: 'KollectScope.kollect.dev/v1alpha1',
  target: 'KollectTarget.kollect.dev/v1alpha1',
  sink: 'KollectSink.kollect.dev/v1alpha1',
  deployment: 'Deployment.apps/v1',
  pod: 'Pod.v1',
  namespace: 'Namespace.v1',
} as const

/** A full target sync request for the example profile and target, over the given Deployments. */
export function targetSyncRequest(deployments: KubeObject[], extra: { scopes?: KubeObject[]; target?: KubeObject; profile?: KubeObject } = {}): Record<string, unknown> {
  const target = extra.target ?? loadExampleCr('target-deployments.yaml')
  const profile = extra.profile ?? loadExampleCr('profile-deployments.yaml')
  const related = relatedMap([TYPES.scope, TYPES.profile, TYPES.deployment], {
    [TYPES.profile]: [profile],
    [TYPES.scope]: extra.scopes ?? [],
    [TYPES.deployment]: deployments,
  })
  return syncRequest(controllerFor('kollect-targets'), target, related)
}
