import { refKey } from '../api/canonical.js'
import type { Log } from './options.js'
import type { PendingJournal } from './pending-journal.js'
import type { InventoryRuntime } from './runtime.js'

/** Keeps the journal in step with what sinks owe: an entry while some sink owes an export, none after. */
export class JournalKeeper {
  constructor(readonly journal: PendingJournal | undefined, private readonly log: Log) {}

  /** Resolves with why the entry could not be written (a full disk), else undefined: the caller says what is lost. */
  async save(inv: InventoryRuntime): Promise<Error | undefined> {
    const journal = this.journal
    const owing = [...inv.sinks.entries()].filter(([, rt]) => rt.pending)
    // The newest snapshot is what every owing sink writes next: a writer always takes the latest.
    const snapshot = inv.desired
    if (!journal || !snapshot || owing.length === 0) return undefined
    // Set before the write: a confirmation or a finalize meanwhile queues its update behind it.
    inv.journaled = true
    try {
      await journal.save({ composition: inv.composition, snapshot, sinks: owing.map(([key]) => key) })
      return undefined
    } catch (err) {
      this.log('error', 'could not save a pending export to the journal', { inventory: refKey(inv.composition.inventory), error: (err as Error).message })
      return err as Error
    }
  }

  /** A sink confirmed: the journal entry goes once no sink owes the export, else it lists fewer sinks. */
  settle(inv: InventoryRuntime): void {
    if ([...inv.sinks.values()].some((s) => s.pending)) {
      void this.save(inv)
      return
    }
    inv.journaled = false
    void this.journal?.remove(inv.composition.inventory).catch((err: Error) => this.log('warn', 'could not remove a pending export from the journal', { error: err.message }))
  }

  /** The inventory was finalized: its entry goes (a failure is the caller's). */
  async forget(inv: InventoryRuntime): Promise<void> {
    if (!inv.journaled) return
    inv.journaled = false
    await this.journal?.remove(inv.composition.inventory)
  }
}
