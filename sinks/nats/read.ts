import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream'

// Reading a range of the stream back, in order: the spoke's sink (what it published after its
// recorded marker) and the hub (an inventory re-read from its last good marker) both need it.

/** Thrown when a KV read ends before the server said it was complete. */
export class StateReadInterrupted extends Error {
  constructor() {
    super('reading the published state was interrupted')
    this.name = 'StateReadInterrupted'
  }
}

export interface RangeMessage {
  subject: string
  seq: number
  /** When the stream stored it, RFC 3339. */
  time: string
  data: Uint8Array
}

export interface StreamReader {
  js: JetStreamClient
  jsm: JetStreamManager
  stream: string
  /** Messages per fetch. */
  window: number
  timeoutMs: number
}

/**
 * Every message on `filter` after stream sequence `after` (up to `upTo`, or the last on `filter`),
 * in order, or an error: never a silently partial list. One lookup when there is none (the usual
 * case), an ordered consumer up to the last wanted message when there are: not the server's
 * pending count, which 2.9 overcounts for a wildcard filter starting inside a block whose subject
 * index was reloaded (a restart, or evicted under load). Messages stored after that lookup wait
 * for the next read.
 */
export async function readStreamRange(r: StreamReader, filter: string, after: number, upTo?: number): Promise<RangeMessage[]> {
  const { js, jsm, stream } = r
  // next_by_subj is STREAM.MSG.GET's "first message on this subject from seq"; the client's type lacks it.
  const first = await jsm.streams.getMessage(stream, { seq: after + 1, next_by_subj: filter } as { seq: number })
  if (first === null || (upTo !== undefined && first.seq > upTo)) return []
  const last = upTo ?? (await jsm.streams.getMessage(stream, { last_by_subj: filter }))?.seq
  if (last === undefined) throw new StateReadInterrupted() // purged between the two lookups
  const consumer = await js.consumers.get(stream, {
    filter_subjects: filter,
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: first.seq,
  })
  const out: RangeMessage[] = []
  let reached = 0
  // Batches that expire, not an endless consume(): a consumer that stops delivering (a reset
  // under load, a server going away) ends the read as interrupted, and the caller tries again.
  while (reached < last) {
    const batch = await consumer.fetch({ max_messages: r.window, expires: r.timeoutMs })
    let received = 0
    for await (const m of batch) {
      received++
      reached = m.seq
      if (m.seq > last) break
      out.push({ subject: m.subject, seq: m.seq, time: m.time.toISOString(), data: m.data })
      if (m.seq >= last) break
    }
    // A batch also ends when the connection closes: that is not the end of the stream.
    if (received === 0) throw new StateReadInterrupted()
  }
  // The consumer skipped it, or retention removed it meanwhile: read again.
  if (out[0]?.seq !== first.seq) throw new StateReadInterrupted()
  return out
}
