import { SinkError } from './sink.js'

// Leader election's fencing as a sink sees it. The exporter checks its Lease before it starts a
// write; a sink checks again at its own commit point (a push, a COMMIT, a pointer PUT, a KV record,
// a Kafka commit), and where the store can keep it, records the writer's token and refuses to
// write over a later one. A process paused past its lease then writes nothing that lands.

/**
 * Who may write: the Lease (by uid, so a deleted and re-created Lease starts a new count) and its
 * transition count when this exporter acquired it. A later holder of the same Lease has a higher epoch.
 */
export interface FencingToken {
  lease: string
  epoch: number
}

export interface WriteFence {
  /** undefined without leader election: nothing to record or compare. */
  readonly token: FencingToken | undefined
  /** Throws FencedError unless the Lease was renewed within the renew deadline. `point` names the commit point. */
  check(point: string): void
}

/** The write did not happen because this exporter may no longer be the leader; it is owed, not failed. */
export class FencedError extends SinkError {
  constructor(message: string) {
    super(message, { retriable: true })
    this.name = 'FencedError'
  }
}

export const NO_FENCE: WriteFence = { token: undefined, check: () => undefined }

/**
 * The store holds `held`, recorded by the last writer: refuse if that was a later holder of our
 * Lease. Tokens of another Lease (another cluster's exporter, a re-created Lease) are not ordered.
 */
export function refuseOlder(fence: WriteFence, held: FencingToken | undefined, store: string): void {
  const ours = fence.token
  if (!ours || !held || held.lease !== ours.lease || held.epoch <= ours.epoch) return
  throw new FencedError(`${store} was written by a later leader (lease epoch ${held.epoch}, this exporter's is ${ours.epoch}); ` +
    'this exporter writes nothing more')
}

/** A token read back from a store, or undefined when absent or malformed. */
export function parseToken(value: unknown): FencingToken | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const { lease, epoch } = value as Record<string, unknown>
  return typeof lease === 'string' && lease !== '' && Number.isSafeInteger(epoch) && (epoch as number) >= 0 ? { lease, epoch: epoch as number } : undefined
}
