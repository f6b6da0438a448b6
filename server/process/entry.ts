import { realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/**
 * Whether the module at `moduleUrl` is the script node was started with. Comparing the URL with
 * `file://${argv[1]}` fails silently for a symlinked path (node runs the real file) and for a
 * path with a space (the URL has %20): the entry point then exits 0 having done nothing.
 */
export function isMainModule(moduleUrl: string, script: string | undefined = process.argv[1]): boolean {
  if (script === undefined) return false
  try {
    return realpathSync(fileURLToPath(moduleUrl)) === realpathSync(script)
  } catch {
    return false
  }
}
