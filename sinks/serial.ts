/**
 * Runs tasks of one key one after another; tasks of different keys run side by side. A sink that
 * owns a working directory (files, a Git clone) uses one key: two exports must not interleave in
 * it. A sink whose state is per inventory (NATS) keys by inventory. A failed task does not stop
 * the ones queued after it, and a key is forgotten once its queue is empty.
 */
export class SerialQueue {
  private readonly tails = new Map<string, Promise<void>>()

  run<T>(task: () => Promise<T>, key = ''): Promise<T> {
    const result = (this.tails.get(key) ?? Promise.resolve()).then(task)
    const settled = result.then(() => undefined, () => undefined)
    this.tails.set(key, settled)
    void settled.then(() => {
      if (this.tails.get(key) === settled) this.tails.delete(key)
    })
    return result
  }

  /** Resolves once everything queued so far has settled. */
  async drain(): Promise<void> {
    await Promise.all(this.tails.values())
  }
}
