// The chart tests' view of helm: rendered objects, expected failures and lint, over the one
// helm runner in test/support/helm.ts.
import assert from 'node:assert/strict'
import { CHART, KUBE_VERSION, runHelm, runTemplate } from '../support/helm.js'
import { k8sObjects, parseDocs, type K8sObject } from './k8s.js'

export { CHART, findHelm, HELM_SETUP_TIMEOUT_MS, KUBE_VERSION, NAMESPACE, RELEASE, runHelm } from '../support/helm.js'

const setArgs = (set: string[]) => set.flatMap((s) => ['--set', s])

/** `helm template` for release kollect in kollect-system; set: --set arguments. */
export function render(set: string[] = [], extra: string[] = []): K8sObject[] {
  const r = runTemplate([...setArgs(set), ...extra])
  assert.equal(r.status, 0, `helm template ${set.join(' ')} failed:\n${r.stderr}`)
  return k8sObjects(parseDocs(r.stdout, `helm template ${set.join(' ')}`))
}

export function renderFails(set: string[]): string {
  const r = runTemplate(setArgs(set))
  assert.notEqual(r.status, 0, `helm template ${set.join(' ')} should fail`)
  return r.stderr
}

/** `helm lint --strict` with these --set arguments passes. */
export function assertLints(set: string[]): void {
  const r = runHelm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, ...setArgs(set)])
  assert.equal(r.status, 0, `helm lint ${set.join(' ')}:\n${r.stdout}\n${r.stderr}`)
}
