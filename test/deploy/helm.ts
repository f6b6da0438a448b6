// A real helm for the chart tests: $HELM, else the pinned build in the tools cache
// (scripts/install-helm.sh --print-paths), built with the local Go toolchain when it is missing
// (a few minutes the first time). No helm is a failure, not a skip.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { k8sObjects, parseDocs, repoRoot, type K8sObject } from './k8s.js'
import { ensureTool } from '../support/tools.js'

export const CHART = join(repoRoot, 'charts', 'kollect')
export const RELEASE = 'kollect'
export const NAMESPACE = 'kollect-system'
// Pinned so that the result does not depend on which Kubernetes version a helm build assumes.
export const KUBE_VERSION = '1.31.0'
/** For the `before` that calls findHelm: a cold build plus a minute. */
export const HELM_SETUP_TIMEOUT_MS = 31 * 60_000

let helm = ''

/** Call in `before`: finds (or builds) helm for the functions below. */
export function findHelm(): void {
  helm = ensureTool('install-helm.sh', 'HELM')
}

export interface Run {
  status: number | null
  stdout: string
  stderr: string
}

export function runHelm(args: string[]): Run {
  const r = spawnSync(helm, args, { cwd: repoRoot, encoding: 'utf8', timeout: 60_000, env: { ...process.env, HELM_CACHE_HOME: join(repoRoot, '.cache', 'helm'), HELM_CONFIG_HOME: join(repoRoot, '.cache', 'helm-config') } })
  if (r.error) throw r.error
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

const setArgs = (set: string[]) => set.flatMap((s) => ['--set', s])

/** `helm template` for release kollect in kollect-system; set: --set arguments. */
export function render(set: string[] = [], extra: string[] = []): K8sObject[] {
  const r = runHelm(['template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, ...setArgs(set), ...extra])
  assert.equal(r.status, 0, `helm template ${set.join(' ')} failed:\n${r.stderr}`)
  return k8sObjects(parseDocs(r.stdout, `helm template ${set.join(' ')}`))
}

export function renderFails(set: string[]): string {
  const r = runHelm(['template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, ...setArgs(set)])
  assert.notEqual(r.status, 0, `helm template ${set.join(' ')} should fail`)
  return r.stderr
}

/** `helm lint --strict` with these --set arguments passes. */
export function assertLints(set: string[]): void {
  const r = runHelm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, ...setArgs(set)])
  assert.equal(r.status, 0, `helm lint ${set.join(' ')}:\n${r.stdout}\n${r.stderr}`)
}
