// A request body as it arrives, so that an incremental target sync reads the body's structure in
// the time its bytes take to come (server/extraction/incremental.ts) instead of after them.

/** What the buffer of a body of undeclared length starts at; it doubles as the body comes. */
const FIRST_CAPACITY = 1024 * 1024

/** The words of a shared arrival's control buffer (Int32): another thread reads the body as it comes. */
export const enum ArrivalControl {
  /** Bumped at every push, end or failure; a reader waits on it. */
  Seq = 0,
  /** The bytes that have come. */
  Filled = 1,
  Phase = 2,
}

export const enum ArrivalPhase {
  Arriving = 0,
  Complete = 1,
  Failed = 2,
}

/** A body's bytes so far in one buffer (offsets never move), and a way to wait for more. */
export class Arrival {
  private buffer: Buffer
  private filled = 0
  private wake: { at: number; resolve: () => void }[] = []
  private control: Int32Array | undefined
  state: 'arriving' | 'complete' | 'failed' = 'arriving'

  /**
   * declared: the length the sender declared (Content-Length), within the route's body limit. Its buffer is
   * taken at once: unwritten pages are not resident, so a sender that declares a large body and
   * stops costs what it sent, and a body that comes is copied once (doubling copied it twice).
   */
  constructor(readonly declared?: number, buffer?: Buffer) {
    this.buffer = buffer ?? Buffer.allocUnsafe(declared ?? FIRST_CAPACITY)
  }

  /**
   * The body, from now on, in a SharedArrayBuffer, with control words (ArrivalControl) that tell
   * another thread how much has come: the bounds scan runs there (bounds-thread.ts). Only a body
   * of declared length that is still arriving can be shared (else undefined). What came so far is
   * copied once; offsets do not move. Not every body is shared from its first byte: the buffer
   * is zeroed when it is made (up to 16 ms for 25 MiB), which a resync that needs no scan
   * would pay for nothing.
   */
  share(): { buffer: SharedArrayBuffer; control: SharedArrayBuffer } | undefined {
    if (this.declared === undefined || this.state !== 'arriving') return undefined
    if (!this.control) {
      const shared = Buffer.from(new SharedArrayBuffer(this.declared))
      this.buffer.copy(shared, 0, 0, this.filled)
      this.buffer = shared
      this.control = new Int32Array(new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT))
      Atomics.store(this.control, ArrivalControl.Filled, this.filled)
    }
    return { buffer: this.buffer.buffer as SharedArrayBuffer, control: this.control.buffer as SharedArrayBuffer }
  }

  /** A body that has all come. */
  static of(body: Buffer): Arrival {
    const arrival = new Arrival(body.length, body)
    arrival.filled = body.length
    arrival.state = 'complete'
    return arrival
  }

  /** The bytes that have come: a view, valid until the next push (the buffer may grow). */
  get bytes(): Buffer {
    return this.buffer.subarray(0, this.filled)
  }

  get length(): number {
    return this.filled
  }

  push(chunk: Buffer): void {
    const needed = this.filled + chunk.length
    if (needed > this.buffer.length) {
      // Past a shared body's declared length (the parser refuses it anyway): its reader stops.
      if (this.control) this.signal(ArrivalControl.Phase, ArrivalPhase.Failed)
      this.control = undefined
      // Past the declared length the parser refuses the body; undeclared, the buffer doubles.
      const grown = Buffer.allocUnsafe(Math.max(needed, this.buffer.length * 2, FIRST_CAPACITY))
      this.buffer.copy(grown, 0, 0, this.filled)
      this.buffer = grown
    }
    chunk.copy(this.buffer, this.filled)
    this.filled = needed
    this.signal(ArrivalControl.Filled, needed)
    this.wakeUp()
  }

  end(): void {
    this.settle('complete')
  }

  fail(): void {
    this.settle('failed')
  }

  /** Resolves when at least bytes more have come (any, by default), or the body ended or failed. */
  more(bytes = 1): Promise<void> {
    if (this.state !== 'arriving') return Promise.resolve()
    return new Promise((resolve) => this.wake.push({ at: this.filled + bytes, resolve }))
  }

  /** Whether the body came whole, once it has ended or failed. */
  async ended(): Promise<boolean> {
    while (this.state === 'arriving') await this.more()
    return this.state === 'complete'
  }

  private settle(state: 'complete' | 'failed'): void {
    if (this.state !== 'arriving') return
    this.state = state
    this.signal(ArrivalControl.Phase, state === 'complete' ? ArrivalPhase.Complete : ArrivalPhase.Failed)
    this.wakeUp()
  }

  /** Tells a thread reading a shared arrival: the word is stored before the sequence moves (Atomics order them). */
  private signal(word: ArrivalControl, value: number): void {
    const control = this.control
    if (!control) return
    Atomics.store(control, word, value)
    Atomics.add(control, ArrivalControl.Seq, 1)
    Atomics.notify(control, ArrivalControl.Seq)
  }

  private wakeUp(): void {
    const ended = this.state !== 'arriving'
    const wake = this.wake
    this.wake = []
    for (const w of wake) {
      if (ended || this.filled >= w.at) w.resolve()
      else this.wake.push(w)
    }
  }
}
