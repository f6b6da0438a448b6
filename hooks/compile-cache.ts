import { LRUCache } from 'lru-cache'

/** Compiled programs (or their errors), by expression text and the limits that applied. */
export function compileCache<T extends object>(max = 5000): (key: string, compile: () => T) => T {
  const cache = new LRUCache<string, T>({ max })
  return (key, compile) => {
    let hit = cache.get(key)
    if (hit === undefined) {
      hit = compile()
      cache.set(key, hit)
    }
    return hit
  }
}
