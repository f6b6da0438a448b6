// The exporter's public surface: server/, bench/ and tests import from here, never from its parts.
export { Exporter } from './exporter.js'
export {
  DEFAULT_SINK, realClock, type Clock, type DriftEvent, type ExportEvent, type ExporterObserver, type ExporterOptions, type Log,
} from './options.js'
export { PendingJournal } from './pending-journal.js'
export { SharedStrings } from './shared-strings.js'
export { DEFAULT_BACKOFF, retryUntilDone, type BackoffPolicy } from './retry.js'
export { SinkDriver } from './sink-driver.js'
/** @public The options of SinkDriver's constructor, which hub/ calls. */
export type { DriverOptions } from './sink-driver.js'
export type { DriverContext } from './strategy.js'
