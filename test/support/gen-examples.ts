// Writes examples/requests/*.json: hook requests exactly as Metacontroller sends them, for the
// README's curl walkthrough and the golden contract tests. `npm run examples` regenerates them.
import { mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import type { KubeObject } from '../../api/types.js'
import {
  ROOT, TYPES, controllerFor, customizeRequest, deployment, goJson, loadExampleCr, relatedMap, syncRequest, targetSyncRequest,
} from './metacontroller.js'

export function exampleDeployments(changed = false): KubeObject[] {
  return [
    deployment(1, { name: 'checkout' }),
    deployment(2, { name: 'cart', image: changed ? 'registry.example.com/payments/cart:2.0.0' : undefined }),
    deployment(3, { name: 'search' }),
    deployment(4, { name: 'billing-worker', tier: 'backend' }),
    deployment(5, { name: 'tmp-experiment' }),
    deployment(6, { name: 'team-b-web', namespace: 'team-b' }),
  ]
}

export function exampleRequests(): Record<string, unknown> {
  const target = loadExampleCr('target-deployments.yaml')
  const inventory = loadExampleCr('inventory.yaml')
  const sink = loadExampleCr('sink-git.yaml')
  const profile = loadExampleCr('profile-deployments.yaml')
  const invRelated = relatedMap([TYPES.scope, TYPES.target, TYPES.sink], { [TYPES.target]: [target], [TYPES.sink]: [sink] })
  const deleting = {
    ...inventory,
    metadata: {
      ...inventory.metadata, generation: 2, deletionTimestamp: '2026-11-02T10:00:00Z', deletionGracePeriodSeconds: 0,
      finalizers: ['metacontroller.io/compositecontroller-kollect-inventories'],
    },
  }
  return {
    'target-customize': customizeRequest(controllerFor('kollect-targets'), target),
    'target-sync': targetSyncRequest(exampleDeployments()),
    'target-sync-changed': targetSyncRequest(exampleDeployments(true)),
    'inventory-customize': customizeRequest(controllerFor('kollect-inventories'), inventory),
    'inventory-sync': syncRequest(controllerFor('kollect-inventories'), inventory, invRelated),
    'inventory-finalize': syncRequest(controllerFor('kollect-inventories'), deleting, invRelated, true),
    'profile-sync': syncRequest(controllerFor('kollect-profiles'), profile, {}),
    'sink-customize': customizeRequest(controllerFor('kollect-sinks'), sink),
    'sink-sync': syncRequest(controllerFor('kollect-sinks'), sink, relatedMap([TYPES.scope], {})),
  }
}

if (process.argv[1] && path.resolve(process.argv[1]).endsWith(path.join('test', 'support', 'gen-examples.js'))) {
  const dir = path.join(ROOT, 'examples', 'requests')
  mkdirSync(dir, { recursive: true })
  for (const [name, body] of Object.entries(exampleRequests())) writeFileSync(path.join(dir, `${name}.json`), goJson(body) + '\n')
  console.log(`wrote ${Object.keys(exampleRequests()).length} requests to ${dir}`)
}
