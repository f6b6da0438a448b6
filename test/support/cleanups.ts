/** What a test (or a suite) offers for cleanup: node:test's `t.after`. */
export type Later = { after(fn: () => unknown): void }

/** Cleanups run last in, first out: clients and the hub close before the servers they use go. */
export function cleanups(t: Later): Later {
  const list: (() => unknown)[] = []
  t.after(async () => {
    for (const fn of list.reverse()) await fn()
  })
  return { after: (fn) => list.push(fn) }
}
