// helm over charts/kollect for tests outside test/deploy/chart.test.ts (which builds a missing
// helm itself): the pinned helm from scripts/install-helm.sh, or $HELM.
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { ROOT } from './metacontroller.js'
import { requireTool } from './tools.js'

export const CHART = path.join(ROOT, 'charts', 'kollect')
// Pinned so that the result does not depend on which Kubernetes version a helm build assumes.
const KUBE_VERSION = '1.31.0'

export interface HelmRun {
  status: number | null
  stdout: string
  stderr: string
}

/** One helm command, with caches inside the repository (never the user's helm config). */
export function runHelm(args: string[]): HelmRun {
  const helm = requireTool('install-helm.sh', 'HELM')
  const r = spawnSync(helm, args, {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, HELM_CACHE_HOME: path.join(ROOT, '.cache', 'helm'), HELM_CONFIG_HOME: path.join(ROOT, '.cache', 'helm-config') },
  })
  if (r.error) throw r.error
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** The rendered YAML of release kollect in kollect-system; args: more helm arguments (--set, --show-only). */
export function helmTemplate(args: string[]): string {
  const r = runHelm(['template', 'kollect', CHART, '--namespace', 'kollect-system', '--kube-version', KUBE_VERSION, ...args])
  if (r.status !== 0) throw new Error(`helm template ${args.join(' ')} failed (exit ${r.status}):\n${r.stderr}`)
  return r.stdout
}

/** The CRDs the chart renders with crds.install=true (templates/crds.yaml), as one YAML text. */
export function templatedCrds(): string {
  return helmTemplate(['--set', 'crds.install=true', '--show-only', 'templates/crds.yaml'])
}
