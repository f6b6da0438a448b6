import { buildSnapshot } from '../../api/canonical.js'
import type { Item, JsonObject, ObjectRef, Snapshot } from '../../api/types.js'

export const TARGET: ObjectRef = { namespace: 'team-a', name: 'prod-deploys' }

function pad(i: number): string {
  return String(i).padStart(6, '0')
}

/** A Deployment-like item, deterministic in i; overrides replace top-level fields. */
export function makeItem(i: number, overrides: Partial<Item> = {}): Item {
  const namespace = `team-${['a', 'b', 'c'][i % 3]}`
  const name = `svc-${pad(i)}`
  const attributes: JsonObject = {
    images: [`registry.example.com/team/${name}:1.${i % 17}.${i % 5}`, 'registry.example.com/sidecars/envoy:1.29.1'],
    replicas: 1 + (i % 5),
    availableReplicas: 1 + (i % 5),
    labels: { app: name, tier: i % 2 === 0 ? 'frontend' : 'backend', 'app.kubernetes.io/part-of': 'shop' },
    strategy: 'RollingUpdate',
    containers: [
      { name: 'app', ports: [8080, 9090], resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } } },
      { name: 'envoy', ports: [15001], resources: { requests: { cpu: '50m', memory: '64Mi' } } },
    ],
    conditions: [
      { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable' },
      { type: 'Progressing', status: 'True', reason: 'NewReplicaSetAvailable' },
    ],
    owner: `team-${i % 7}@example.com`,
  }
  return {
    group: 'apps',
    version: 'v1',
    kind: 'Deployment',
    namespace,
    name,
    uid: `00000000-0000-4000-8000-${pad(i).padStart(12, '0')}`,
    target: TARGET,
    attributes,
    ...overrides,
  }
}

export function makeItems(n: number, from = 0): Item[] {
  return Array.from({ length: n }, (_, k) => makeItem(from + k))
}

/** The same item with one attribute changed, so its hash differs. */
export function bumpReplicas(item: Item, replicas: number): Item {
  return { ...item, attributes: { ...item.attributes, replicas } }
}

export function snapshotOf(inventory: ObjectRef, items: readonly Item[], cluster = 'lab-west'): Snapshot {
  return buildSnapshot(inventory, cluster, items)
}
