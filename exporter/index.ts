// The exporter's public surface: server/, bench/ and tests import from here, never from its parts.
export {
  DEFAULT_SINK, Exporter, SINK_CHECK_TIMEOUT_MS, SINK_CHECK_TTL_MS, realClock,
  type Clock, type DriftEvent, type ExportEvent, type ExporterObserver, type ExporterOptions,
} from './exporter.js'
