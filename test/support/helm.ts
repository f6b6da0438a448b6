// helm over charts/kollect for every test: $HELM, else the pinned build in the tools cache
// (scripts/install-helm.sh), built with the local Go toolchain when it is missing (a few minutes
// the first time; call findHelm in a `before` with HELM_SETUP_TIMEOUT_MS). No helm is a failure, not a skip.
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { ROOT } from './metacontroller.js'
import { ensureTool, TOOL_BUILD_TIMEOUT_MS } from './tools.js'

export const CHART = path.join(ROOT, 'charts', 'kollect')
export const RELEASE = 'kollect'
export const NAMESPACE = 'kollect-system'
// Pinned so that the result does not depend on which Kubernetes version a helm build assumes.
export const KUBE_VERSION = '1.31.0'
/** For the `before` that calls findHelm: a cold build plus a minute. */
export const HELM_SETUP_TIMEOUT_MS = TOOL_BUILD_TIMEOUT_MS + 60_000

let helm: string | undefined

/** The helm binary, found (or built) once. */
export function findHelm(): string {
  helm ??= ensureTool('install-helm.sh', 'HELM')
  return helm
}

export interface HelmRun {
  status: number | null
  stdout: string
  stderr: string
}

/**
 * The image the tests render and install: a local build named kollect, as e2e/kind loads it.
 * The source chart has no default image (none is published yet) and refuses to render without
 * one, so runHelm sets it first on every command that renders the chart; a later
 * `--set image.repository=…` (empty included) overrides it.
 */
export const LOCAL_IMAGE = ['--set', 'image.repository=kollect']
const RENDERING = new Set(['template', 'lint', 'install', 'upgrade'])

/** One helm command, with caches inside the repository (never the user's helm config). */
export function runHelm(args: string[]): HelmRun {
  if (RENDERING.has(args[0] ?? '')) args = [args[0] as string, ...LOCAL_IMAGE, ...args.slice(1)]
  const r = spawnSync(findHelm(), args, {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, HELM_CACHE_HOME: path.join(ROOT, '.cache', 'helm'), HELM_CONFIG_HOME: path.join(ROOT, '.cache', 'helm-config') },
  })
  if (r.error) throw r.error
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** `helm template` of release kollect in kollect-system, as a run; args: more helm arguments (--set, --show-only). */
export function runTemplate(args: string[]): HelmRun {
  return runHelm(['template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, ...args])
}

/** The rendered YAML of `helm template`; a failure throws with helm's message. */
export function helmTemplate(args: string[]): string {
  const r = runTemplate(args)
  if (r.status !== 0) throw new Error(`helm template ${args.join(' ')} failed (exit ${r.status}):\n${r.stderr}`)
  return r.stdout
}

/** The CRDs the chart renders with crds.install=true (templates/crds.yaml), as one YAML text. */
export function templatedCrds(): string {
  return helmTemplate(['--set', 'crds.install=true', '--show-only', 'templates/crds.yaml'])
}
