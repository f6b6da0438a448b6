import { refKey } from '../api/canonical.js'
import type { Snapshot } from '../api/types.js'
import type { ExporterObserver, Log } from './options.js'
import type { ConfirmedExport, PendingExport, PendingJournal } from './pending-journal.js'
import type { Inventory } from './inventory.js'

/** The journal's view of one inventory. */
interface Mark {
  /** The journal holds an entry for it: a finalize removes that. */
  journaled: boolean
  /**
   * A journaled export restored at start, never written as it is: it waits for the completeness
   * gate, and the snapshot the fresh reports build is what is written (see docs/design.md).
   */
  resumed: { checksum: string; itemCount: number; sinks: string[] } | null
}

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
  private readonly marks = new WeakMap<Inventory, Mark>()

  constructor(readonly journal: PendingJournal | undefined, private readonly log: Log, private readonly observer?: ExporterObserver) {}

  /** Entries the journal could not read are skipped, each logged and counted. */
  unreadable(problems: string[]): void {
    for (const problem of problems) {
      this.log('warn', 'skipped an unreadable pending export', { problem })
      this.observer?.onJournalDropped?.('unreadable')
    }
  }

  /** A journaled export at start: how many sinks owe it. It waits for the gate, unless a fresh snapshot already decided it. */
  seed(inv: Inventory, entry: PendingExport & { snapshot: Snapshot }): number {
    const mark = this.mark(inv)
    mark.journaled = true
    const sinks = entry.sinks.filter((key) => inv.driver(key) !== undefined)
    mark.resumed = { checksum: entry.snapshot.checksum, itemCount: entry.snapshot.itemCount, sinks }
    if (inv.desired) {
      // Reports reached this exporter before the journal was read (a takeover): they decide.
      this.resolve(inv, inv.desired)
      this.settle(inv)
      return 0
    }
    this.log('info', 'a pending export from the journal waits for its targets to report', {
      inventory: refKey(inv.ref), checksum: entry.snapshot.checksum, sinks,
    })
    return sinks.length
  }

  /** The sinks (by key) that owe a journaled export still waiting for the gate: status says so. */
  resumedSinks(inv: Inventory): readonly string[] {
    return this.marks.get(inv)?.resumed?.sinks ?? []
  }

  /** The completeness gate passed and built `snapshot` from fresh reports: it is written, the journaled one only if it is the same. */
  resolve(inv: Inventory, snapshot: Snapshot): void {
    const mark = this.marks.get(inv)
    const resumed = mark?.resumed
    if (!mark || !resumed) return
    mark.resumed = null
    const fields = { inventory: refKey(inv.ref), journaled: resumed.checksum, checksum: snapshot.checksum }
    if (resumed.checksum === snapshot.checksum) {
      this.log('info', 'resuming a pending export from the journal', fields)
      return
    }
    this.log('warn', 'dropped a pending export from the journal: the targets\' fresh reports supersede it', fields)
    this.observer?.onJournalDropped?.('superseded')
  }

  /** Resolves with why the entry could not be written (a full disk), else undefined: the caller says what is lost. */
  async save(inv: Inventory): Promise<Error | undefined> {
    const journal = this.journal
    if (!journal) return undefined
    // The newest snapshot is what every owing sink writes next: a writer always takes the latest.
    const snapshot = inv.desired
    const drivers = inv.drivers.map((d) => [refKey(d.ref), d] as const)
    const owing = snapshot ? drivers.filter(([, d]) => d.owes).map(([key]) => key) : []
    const confirmed = Object.fromEntries(drivers.flatMap(([key, d]) =>
      d.confirmed ? [[key, { checksum: d.confirmed.checksum, itemCount: d.confirmed.itemCount, at: d.confirmed.at }]] : []))
    if (owing.length === 0 && Object.keys(confirmed).length === 0) return undefined
    // Set before the write: a confirmation or a finalize meanwhile queues its update behind it.
    this.mark(inv).journaled = true
    try {
      await journal.save({ composition: inv.composition, sinks: owing, ...(owing.length > 0 && snapshot ? { snapshot } : {}), confirmed })
      return undefined
    } catch (err) {
      this.log('error', 'could not save a pending export to the journal', { inventory: refKey(inv.ref), error: (err as Error).message })
      return err as Error
    }
  }

  /**
   * A sink confirmed: the entry lists fewer owing sinks, and the confirmation, which status
   * shows after a restart (the sinks still hold it) until the sink is written again.
   */
  settle(inv: Inventory): void {
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
  restoreConfirmed(inv: Inventory): void {
    const key = refKey(inv.ref)
    const confirmed = this.confirmed.get(key)
    if (!confirmed) return
    this.confirmed.delete(key)
    this.mark(inv).journaled = true
    for (const [sinkKey, c] of Object.entries(confirmed)) inv.driver(sinkKey)?.restore({ checksum: c.checksum, itemCount: c.itemCount, at: c.at })
  }

  /** The inventory was finalized: its entry goes (a failure is the caller's). */
  async forget(inv: Inventory): Promise<void> {
    const mark = this.marks.get(inv)
    if (!mark?.journaled) return
    mark.journaled = false
    await this.journal?.remove(inv.ref)
  }

  private mark(inv: Inventory): Mark {
    let mark = this.marks.get(inv)
    if (!mark) this.marks.set(inv, (mark = { journaled: false, resumed: null }))
    return mark
  }
}
