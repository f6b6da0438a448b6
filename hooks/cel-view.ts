// The object as cel-js can read it. cel-js tells a map from other values by its constructor
// property, so a map with an own key "constructor" is an "Unsupported type" there; in the copy
// made here every such map is a Map, which cel-js reads as a map. hooks/cel.ts uses the copy only
// for an evaluation that met such a map.

const views = new WeakMap<object, unknown>()
/** On a map whose value under this key is computed when read (the redacted last-applied annotation): the copy leaves it unread. */
const LAZY: unique symbol = Symbol('lazy key')
type MaybeLazy = Record<string, unknown> & { [LAZY]?: string }
/** Requests nest at most 512 deep; a deeper value is left as it is. */
const MAX_VIEW_DEPTH = 1000

export function readLazily(map: object, key: string): void {
  Object.defineProperty(map, LAZY, { value: key })
}

/** The object as cel-js can read it: every map with an own "constructor" key a Map. */
export function celView(object: unknown): unknown {
  if (typeof object !== 'object' || object === null) return object
  let view = views.get(object)
  if (view === undefined) views.set(object, view = withMaps(object, 0))
  return view
}

function withMaps(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null || depth > MAX_VIEW_DEPTH) return value
  if (Array.isArray(value)) {
    let out: unknown[] | null = null
    for (let i = 0; i < value.length; i++) {
      const v = withMaps(value[i], depth + 1)
      if (v !== value[i]) (out ??= value.slice())[i] = v
    }
    return out ?? value
  }
  const obj = value as MaybeLazy
  const own = Object.hasOwn(obj, 'constructor')
  // Maps, Dates, bytes: values cel-js types itself.
  if (!own && obj.constructor !== Object && obj.constructor !== undefined) return value
  const lazy = obj[LAZY]
  const keys = Object.keys(obj)
  let changed: Map<string, unknown> | null = null
  for (const k of keys) {
    if (k === lazy && !own) continue
    const v = withMaps(obj[k], depth + 1)
    if (v !== obj[k]) (changed ??= new Map()).set(k, v)
  }
  if (own) return new Map(keys.map((k) => [k, changed?.has(k) ? changed.get(k) : obj[k]]))
  if (!changed) return value
  const out: MaybeLazy = {}
  for (const k of keys) {
    // defineProperty: a "__proto__" key stays a key, and a lazy value stays unread.
    const descriptor = changed.has(k)
      ? { value: changed.get(k), enumerable: true, writable: true, configurable: true }
      : Object.getOwnPropertyDescriptor(obj, k) as PropertyDescriptor
    Object.defineProperty(out, k, descriptor)
  }
  if (lazy !== undefined) readLazily(out, lazy)
  return out
}
