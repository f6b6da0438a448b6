// Length-prefixed frames between the server and its extraction child processes, over a plain
// pipe: [u32 header length][u32 payload length][header JSON][payload bytes]. The payload (a
// request body, a result) goes to the socket as it is and lands in a buffer of its final size on
// the other side: copied there by push(), or read there directly with readTarget()/pushRead();
// Node's IPC channel would serialise and copy it twice more (measured in bench/README.md, hook-sync).

export interface Frame<H> {
  header: H
  payload: Buffer
}

const EMPTY = Buffer.alloc(0)
const PREFIX = 8

/**
 * The bytes of one frame: its head, then the payload's buffers as they are, so that the payload
 * is written without a copy (a payload in parts lands in one buffer on the other side).
 */
export function encodeFrame(header: object, payload: Uint8Array | readonly Uint8Array[] = EMPTY): Uint8Array[] {
  const parts = Array.isArray(payload) ? payload as readonly Uint8Array[] : [payload as Uint8Array]
  const json = Buffer.from(JSON.stringify(header))
  const head = Buffer.allocUnsafe(PREFIX + json.length)
  head.writeUInt32LE(json.length, 0)
  head.writeUInt32LE(parts.reduce((n, p) => n + p.length, 0), 4)
  json.copy(head, PREFIX)
  return [head, ...parts]
}

/** Reassembles frames from the chunks a socket delivers, in order. */
export class FrameDecoder<H> {
  private pending: Buffer = EMPTY
  private header: H | null = null
  private payload: Buffer | null = null
  private filled = 0
  private target: Buffer = EMPTY

  push(chunk: Buffer): Frame<H>[] {
    const frames: Frame<H>[] = []
    let rest = chunk
    while (rest.length > 0) {
      if (this.payload) {
        const n = Math.min(rest.length, this.payload.length - this.filled)
        rest.copy(this.payload, this.filled, 0, n)
        this.filled += n
        rest = rest.subarray(n)
        if (this.filled === this.payload.length) this.emit(frames, this.payload)
        continue
      }
      // Prefix and header are small: gather them, then start the payload buffer.
      const head = this.pending.length > 0 ? Buffer.concat([this.pending, rest]) : rest
      if (head.length < PREFIX) {
        this.pending = Buffer.from(head)
        break
      }
      const headerLength = head.readUInt32LE(0)
      const payloadLength = head.readUInt32LE(4)
      if (head.length < PREFIX + headerLength) {
        this.pending = Buffer.from(head)
        break
      }
      this.pending = EMPTY
      this.header = JSON.parse(head.toString('utf8', PREFIX, PREFIX + headerLength)) as H
      rest = head.subarray(PREFIX + headerLength)
      if (payloadLength === 0) this.emit(frames, EMPTY)
      else {
        this.payload = Buffer.allocUnsafe(payloadLength)
        this.filled = 0
      }
    }
    return frames
  }

  /**
   * Where a socket with onread should put its next read: the unfilled rest of the payload being
   * assembled, so a body lands in place without the copy push() makes, else the scratch buffer
   * (whose bytes push() copies out before the next read reuses it).
   */
  readTarget(scratch: Buffer): Buffer {
    return (this.target = this.payload ? this.payload.subarray(this.filled) : scratch)
  }

  /** The frames completed by the n bytes a socket read into the last readTarget(). */
  pushRead(n: number): Frame<H>[] {
    if (!this.payload) return this.push(this.target.subarray(0, n))
    const frames: Frame<H>[] = []
    this.filled += n
    if (this.filled === this.payload.length) this.emit(frames, this.payload)
    return frames
  }

  private emit(frames: Frame<H>[], payload: Buffer): void {
    frames.push({ header: this.header as H, payload })
    this.header = null
    this.payload = null
    this.filled = 0
  }
}
