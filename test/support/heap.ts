import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

setFlagsFromString('--expose-gc')
const collect = runInNewContext('gc') as () => void

/** V8 heap in use after full collections: what is still referenced. */
function heapUsed(): number {
  collect()
  collect()
  return process.memoryUsage().heapUsed
}

/** Heap bytes per element that `hold` keeps referenced (it returns what it holds). */
export function heapPerElement(n: number, hold: () => unknown): number {
  const before = heapUsed()
  const held = hold()
  const after = heapUsed()
  if (held === undefined) throw new Error('hold must return what it holds')
  return (after - before) / n
}
