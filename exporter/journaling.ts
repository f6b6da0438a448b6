import { refKey } from '../api/canonical.js'
import type { Snapshot } from '../api/types.js'
import type { ExporterObserver, Log } from './options.js'
import type { ConfirmedExport, PendingExport, PendingJournal } from './pending-journal.js'
import type { InventoryRuntime } from './runtime.js'

/**
 * Keeps the journal in step with the sinks: per inventory, the export some sinks still owe and
 * what each confirmed last (status after a restart), until the inventory is finalized.
 * A restored entry is never written as it is: another exporter may have written a newer snapshot
 * since (a takeover while this one was down), and nothing in the entry orders it against that.
 * It waits for the completeness gate, and the snapshot the targets' fresh reports build wins.
 */
export class JournalKeeper {
  /** By inventory refKey: confirmations read at start, for inventories not known yet. */
  private readonly confirmed = new Map<string, Record<string, ConfirmedExport>>()

  constructor(readonly journal: PendingJournal | undefined, private readonly log: Log, private readonly observer?: ExporterObserver) {}

  /** Entries the journal could not read are skipped, each logged and counted. */
  unreadable(problems: string[]): void {
    for (const problem of problems) {
      this.log('warn', 'skipped an unreadable pending export', { problem })
      this.observer?.onJournalDropped?.('unreadable')
    }
  }

  /** A journaled export at start: how many sinks owe it. It waits for the gate, unless a fresh snapshot already decided it. */
  seed(inv: InventoryRuntime, entry: PendingExport & { snapshot: Snapshot }): number {
    inv.journaled = true
    const sinks = entry.sinks.filter((key) => inv.sinks.has(key))
    inv.resumed = { checksum: entry.snapshot.checksum, itemCount: entry.snapshot.itemCount, sinks }
    if (inv.desired) {
      // Reports reached this exporter before the journal was read (a takeover): they decide.
      this.resolve(inv, inv.desired)
      this.settle(inv)
      return 0
    }
    this.log('info', 'a pending export from the journal waits for its targets to report', { inventory: refKey(inv.composition.inventory), checksum: entry.snapshot.checksum, sinks })
    return sinks.length
  }

  /** The completeness gate passed and built `snapshot` from fresh reports: it is written, the journaled one only if it is the same. */
  resolve(inv: InventoryRuntime, snapshot: Snapshot): void {
    const resumed = inv.resumed
    if (!resumed) return
    inv.resumed = null
    const fields = { inventory: refKey(inv.composition.inventory), journaled: resumed.checksum, checksum: snapshot.checksum }
    if (resumed.checksum === snapshot.checksum) {
      this.log('info', 'resuming a pending export from the journal', fields)
      return
    }
    this.log('warn', 'dropped a pending export from the journal: the targets\' fresh reports supersede it', fields)
    this.observer?.onJournalDropped?.('superseded')
  }

  /** Resolves with why the entry could not be written (a full disk), else undefined: the caller says what is lost. */
  async save(inv: InventoryRuntime): Promise<Error | undefined> {
    const journal = this.journal
    if (!journal) return undefined
    // The newest snapshot is what every owing sink writes next: a writer always takes the latest.
    const snapshot = inv.desired
    const owing = snapshot ? [...inv.sinks.entries()].filter(([, rt]) => rt.pending).map(([key]) => key) : []
    const confirmed = Object.fromEntries([...inv.sinks.entries()].flatMap(([key, rt]) =>
      rt.confirmed ? [[key, { checksum: rt.confirmed.checksum, itemCount: rt.confirmed.itemCount, at: rt.confirmed.at }]] : []))
    if (owing.length === 0 && Object.keys(confirmed).length === 0) return undefined
    // Set before the write: a confirmation or a finalize meanwhile queues its update behind it.
    inv.journaled = true
    try {
      await journal.save({ composition: inv.composition, sinks: owing, ...(owing.length > 0 && snapshot ? { snapshot } : {}), confirmed })
      return undefined
    } catch (err) {
      this.log('error', 'could not save a pending export to the journal', { inventory: refKey(inv.composition.inventory), error: (err as Error).message })
      return err as Error
    }
  }

  /**
   * A sink confirmed: the entry lists fewer owing sinks, and the confirmation, which status
   * shows after a restart (the sinks still hold it) until the sink is written again.
   */
  settle(inv: InventoryRuntime): void {
    void this.save(inv)
  }

  /**
   * Status after a restart: each sink's last confirmed export, as the journal recorded it. Kept
   * until the inventory's composition arrives (addInventory), never turned into an inventory of
   * its own: one deleted while this exporter was down must not come back.
   */
  keepConfirmed(entry: PendingExport): void {
    if (entry.confirmed) this.confirmed.set(refKey(entry.composition.inventory), entry.confirmed)
  }

  /** A new inventory runtime takes what the journal says its sinks confirmed; flagged restored, it never spares a write. */
  restoreConfirmed(inv: InventoryRuntime): void {
    const key = refKey(inv.composition.inventory)
    const confirmed = this.confirmed.get(key)
    if (!confirmed) return
    this.confirmed.delete(key)
    inv.journaled = true
    for (const [sinkKey, c] of Object.entries(confirmed)) {
      const rt = inv.sinks.get(sinkKey)
      if (rt && !rt.confirmed) rt.confirmed = { checksum: c.checksum, itemCount: c.itemCount, at: c.at, restored: true }
    }
  }

  /** The inventory was finalized: its entry goes (a failure is the caller's). */
  async forget(inv: InventoryRuntime): Promise<void> {
    if (!inv.journaled) return
    inv.journaled = false
    await this.journal?.remove(inv.composition.inventory)
  }
}
