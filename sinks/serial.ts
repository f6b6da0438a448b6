/**
 * Runs tasks one after another. A sink that owns a working directory (files, a Git clone)
 * must not interleave two exports in it; a failed task does not stop the ones queued after it.
 */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve()

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task)
    this.tail = result.catch(() => undefined)
    return result
  }

  /** Resolves once everything queued so far has settled. */
  async drain(): Promise<void> {
    await this.tail
  }
}
