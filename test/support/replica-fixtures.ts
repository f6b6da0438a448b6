// Metacontroller-shaped fixtures for the multi-process topology tests (e2e/hooks-replicas,
// test/kube/peers): N targets of four Deployments each, a git KollectSink, and the inventory
// that composes them.
import type { KubeObject } from '../../api/types.js'
import { TYPES, controllerFor, deployment, goJson, loadExampleCr, relatedMap, syncRequest } from './metacontroller.js'

export function replicaTarget(i: number): KubeObject {
  const t = loadExampleCr('target-deployments.yaml')
  t.metadata = { ...t.metadata, name: `deploys-${i}`, uid: `uid-deploys-${i}` }
  return t
}

/** Four frontend Deployments per target; `image` changes the first one's, `drop` removes the last. */
export function replicaObjects(i: number, opts: { image?: string; drop?: boolean } = {}): KubeObject[] {
  const list = [0, 1, 2, 3].map((j) => deployment(i * 10 + j, { name: `t${i}-web-${j}`, ...(j === 0 && opts.image ? { image: opts.image } : {}) }))
  return opts.drop ? list.slice(0, -1) : list
}

export const historySink = (remote: string): KubeObject => ({
  apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectSink', metadata: { name: 'history', namespace: 'team-a', uid: 'sink-history', generation: 1 },
  spec: { type: 'git', cluster: 'e2e', deletionPolicy: 'Retain', git: { url: remote, branch: 'main' } },
})

/** The inventory sync body over targets `targets` and the history sink, as Metacontroller sends it. */
export function inventorySyncBody(remote: string, targets: number[]): string {
  const inv = loadExampleCr('inventory.yaml')
  inv['spec'] = { targetRefs: targets.map((i) => ({ name: `deploys-${i}` })), sinkRefs: [{ name: 'history' }], debounce: '300ms', maxWait: '5s' }
  return goJson(syncRequest(controllerFor('kollect-inventories'), inv,
    relatedMap([TYPES.scope, TYPES.target, TYPES.sink], { [TYPES.target]: targets.map(replicaTarget), [TYPES.sink]: [historySink(remote)] })))
}

/** Where the history sink writes the inventory's document. */
export const REPLICA_DOC = 'inventory/e2e/team-a/prod-inventory.json'
