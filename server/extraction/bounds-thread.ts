// The bounds scan of an arriving body (json-depth.ts) on a thread of its own. On the main thread
// it was CPU-bound where the bytes were not: 40–45 ms for a 25 MiB body that arrives in 15–20,
// serialised with the copy of each chunk and the route's own reading. Here it reads the body's
// shared buffer as the main thread fills it (arrival.ts), and answers once the body has ended.
// It runs no user expression and holds nothing but offsets: a scan it cannot finish is the
// child's to do, as before.
import { parentPort } from 'node:worker_threads'
import { jsonScanStart, type ManagedFieldsCuts, type Scan, SCAN_LOOKAHEAD, scanJsonFrom, scanToEnd, type ScanMark } from '../protocol/json-depth.js'
import { ArrivalControl, ArrivalPhase } from './arrival.js'

/** A scan to run: the body's bytes and its control words (Arrival.share()), the nesting bound, the marks and cuts to note. */
export interface ScanJob {
  buffer: SharedArrayBuffer
  control: SharedArrayBuffer
  max: number
  marks?: ScanMark[]
  cuts?: ManagedFieldsCuts
}

/** What the scan gave: undefined when the body failed or went past the bound; the marks and cuts as noted. */
export interface ScanAnswer {
  scan?: Scan.Plain | Scan.Suspect
  marks?: ScanMark[]
  cuts?: ManagedFieldsCuts
}

/** How long a wait for more bytes lasts before it looks again (a notify ends it sooner). */
const WAIT_MS = 1000

function run(job: ScanJob): ScanAnswer {
  const bytes = new Uint8Array(job.buffer)
  const control = new Int32Array(job.control)
  const state = { ...jsonScanStart(), ...(job.marks ? { marks: job.marks } : {}), ...(job.cuts ? { cuts: job.cuts } : {}) }
  for (;;) {
    // The sequence first: an event after this read makes the wait below return at once.
    const seq = Atomics.load(control, ArrivalControl.Seq)
    const phase = Atomics.load(control, ArrivalControl.Phase)
    const filled = Atomics.load(control, ArrivalControl.Filled)
    if (phase === ArrivalPhase.Failed) return {}
    if (phase === ArrivalPhase.Complete) {
      const scan = scanToEnd(bytes, job.max, state, filled)
      return scan === undefined ? {} : { scan, ...(state.marks ? { marks: state.marks } : {}), ...(state.cuts ? { cuts: state.cuts } : {}) }
    }
    if (filled - SCAN_LOOKAHEAD > state.at) {
      if (!scanJsonFrom(bytes, job.max, state, filled - SCAN_LOOKAHEAD)) return {}
    } else Atomics.wait(control, ArrivalControl.Seq, seq, WAIT_MS)
  }
}

parentPort?.on('message', (job: ScanJob) => {
  parentPort?.postMessage(run(job) satisfies ScanAnswer)
})
