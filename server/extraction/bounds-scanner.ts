// The main thread's side of bounds-thread.ts: one thread that scans one arriving body at a time.
// A body that finds it busy (or one that cannot be shared) is scanned on the main thread, as
// before; a thread that fails is replaced at the next body, and its scan is the child's to do.
import { Worker } from 'node:worker_threads'
import type { ManagedFieldsCuts, Scan, ScanMark } from '../protocol/json-depth.js'
import type { Arrival } from './arrival.js'
import type { ScanAnswer, ScanJob } from './bounds-thread.js'

const THREAD_URL = new URL('./bounds-thread.js', import.meta.url)
/** Smaller bodies are scanned on the main thread: the hand-over would cost more than their scan (2 ms a MiB). */
const MIN_BYTES = 1024 * 1024

export class BoundsScanner {
  private worker: Worker | undefined
  private busy = false

  /**
   * The bounds scan of an arriving body on the scan thread (undefined: the body failed, or went
   * past max), with marks and cuts noted in place; or null when the thread cannot take it now, or the
   * body cannot be shared (Arrival.share()).
   */
  scan(arrival: Arrival, max: number, marks?: ScanMark[], cuts?: ManagedFieldsCuts): Promise<Scan.Plain | Scan.Suspect | undefined> | null {
    if (this.busy || (arrival.declared ?? 0) < MIN_BYTES) return null
    const sharing = arrival.share()
    if (!sharing) return null
    this.busy = true
    const worker = (this.worker ??= this.start())
    return new Promise<Scan.Plain | Scan.Suspect | undefined>((resolve) => {
      const done = (answer: ScanAnswer) => {
        worker.off('message', done)
        worker.off('error', failed)
        worker.off('exit', failed)
        this.busy = false
        answer.marks?.forEach((m, i) => { if (marks?.[i]) marks[i].at = m.at })
        if (cuts && answer.cuts) Object.assign(cuts, answer.cuts)
        resolve(answer.scan)
      }
      const failed = () => {
        this.worker = undefined
        done({})
      }
      worker.on('message', done)
      worker.once('error', failed)
      worker.once('exit', failed)
      worker.postMessage({ ...sharing, max, ...(marks ? { marks } : {}), ...(cuts ? { cuts } : {}) } satisfies ScanJob)
    })
  }

  async close(): Promise<void> {
    await this.worker?.terminate()
    this.worker = undefined
  }

  private start(): Worker {
    // It holds offsets and marks only: a small heap, which a bug that grows it runs out of first.
    const worker = new Worker(THREAD_URL, { resourceLimits: { maxOldGenerationSizeMb: 32, maxYoungGenerationSizeMb: 8 } })
    // An idle scan thread does not keep the process alive.
    worker.unref()
    return worker
  }
}
