import { spawnSync } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import path from 'node:path'
import { ROOT } from './metacontroller.js'

// The binaries that scripts/install-helm.sh and scripts/install-kube.sh build (or that the
// environment overrides name). The scripts own the layout (tools cache, version keys,
// overrides) and print it with --print-paths; the tests only read it.

export type ToolScript =
  'install-helm.sh' | 'install-kube.sh' | 'install-versitygw.sh' | 'install-kafka.sh' | 'install-actionlint.sh' | 'install-promtool.sh' | 'install-gitea.sh'

/** NAME=path lines of `scripts/<script> --print-paths`, as a record. */
export function toolPaths(script: ToolScript): Record<string, string> {
  const r = spawnSync('bash', [path.join(ROOT, 'scripts', script), '--print-paths'], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 })
  if (r.status !== 0) throw new Error(`scripts/${script} --print-paths failed (${r.error?.message ?? `exit ${r.status}`}):\n${r.stderr}`)
  const out: Record<string, string> = {}
  for (const line of r.stdout.split('\n')) {
    const eq = line.indexOf('=')
    if (eq > 0) out[line.slice(0, eq)] = line.slice(eq + 1)
  }
  return out
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The path of one tool, which must exist: a missing one fails with the command that builds it. */
export function requireTool(script: ToolScript, name: string): string {
  const file = toolPaths(script)[name]
  if (!file) throw new Error(`scripts/${script} --print-paths names no ${name}`)
  if (!isExecutable(file)) {
    throw new Error(`${name}: no executable at ${file}. Build it with \`bash scripts/${script}\` (needs Go and the module proxy), or set ${name} to a prebuilt binary.`)
  }
  return file
}

/** Generous for a cold build from the module proxy on two cores. */
export const TOOL_BUILD_TIMEOUT_MS = 30 * 60_000

/**
 * requireTool, after running scripts/<script> when neither the override nor the cached build is
 * there: a missing tool is built, not skipped.
 */
export function ensureTool(script: ToolScript, name: string): string {
  if (!process.env[name] && !isExecutable(toolPaths(script)[name] ?? '')) {
    // Output to stderr: the test runner owns stdout.
    const build = spawnSync('bash', [path.join(ROOT, 'scripts', script)], { cwd: ROOT, stdio: ['ignore', 2, 2], timeout: TOOL_BUILD_TIMEOUT_MS })
    if (build.status !== 0) throw new Error(`scripts/${script} failed (${build.error?.message ?? `exit ${build.status}`}); set ${name} to a prebuilt binary`)
  }
  return requireTool(script, name)
}
