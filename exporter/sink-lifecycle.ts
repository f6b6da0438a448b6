import { refKey } from '../api/canonical.js'
import type { InventoryComposition, ObjectRef, ResolvedSink } from '../api/types.js'
import { DEFAULT_SINK } from './options.js'
import { poolKeyOf, type SinkPool } from './pool.js'
import { newSinkRuntime, type InventoryRuntime } from './runtime.js'
import type { SinkWriter } from './writer.js'

// The sink runtimes of an inventory: one per sink its composition names, a fresh one when a
// sink's spec changes, and what a finalize does to each.

function sinkRefs(c: InventoryComposition): { ref: ObjectRef; resolved: ResolvedSink | null }[] {
  if (c.sinks.length === 0) return c.useDefaultSink === false ? [] : [{ ref: DEFAULT_SINK, resolved: null }]
  return c.sinks.map((s) => ({ ref: { namespace: s.namespace, name: s.name }, resolved: s }))
}

/** Keep one runtime per sink of the composition; a changed sink spec gets a fresh sink. */
export function reconcileSinks(inv: InventoryRuntime, pool: SinkPool, writer: SinkWriter): void {
  const wanted = new Map(sinkRefs(inv.composition).map((s) => [refKey(s.ref), s]))
  for (const [key, rt] of inv.sinks) {
    const w = wanted.get(key)
    if (!w || poolKeyOf(w.resolved) !== rt.poolKey) {
      writer.stop(rt)
      pool.release(rt.poolKey)
      inv.sinks.delete(key)
    }
  }
  for (const [key, w] of wanted) {
    if (inv.sinks.has(key)) continue
    const poolKey = poolKeyOf(w.resolved)
    pool.acquire(poolKey, w.resolved)
    inv.sinks.set(key, newSinkRuntime(w.ref, poolKey, w.resolved))
  }
}

/** Stop every writer, then carry out each sink's deletion policy; throws what failed. */
export async function finalizeSinks(inv: InventoryRuntime, writer: SinkWriter, pool: SinkPool, cluster: string): Promise<void> {
  // Stop writers first, so a retrying write cannot land after the delete.
  for (const rt of inv.sinks.values()) writer.stop(rt)
  await Promise.allSettled([...inv.sinks.values()].map((rt) => rt.running))
  const failures: string[] = []
  await Promise.all([...inv.sinks.values()].map(async (rt) => {
    rt.pending = null
    if ((rt.resolved?.spec.deletionPolicy ?? 'Retain') !== 'Delete') return
    try {
      const sink = await pool.sinkFor(rt.poolKey, rt.resolved)
      await sink.remove(inv.composition.inventory, rt.resolved?.spec.cluster || cluster)
      rt.failing = null
    } catch (err) {
      rt.failing = (err as Error).message
      failures.push(`${refKey(rt.ref)}: ${(err as Error).message}`)
    }
  }))
  for (const rt of inv.sinks.values()) rt.abort = new AbortController()
  if (failures.length > 0) throw new Error(failures.join('; '))
}
