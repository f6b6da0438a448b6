import type { KollectSinkSpec } from '../../api/types.js'
import type { DocumentFormat } from '../document.js'
import { configError, type SinkLabel } from '../errors.js'

export interface FileSettings {
  /** Path template relative to the data directory. */
  pathTemplate: string
  format: DocumentFormat
}

export function resolveFileSettings(spec: KollectSinkSpec, sink: SinkLabel): FileSettings {
  const format = spec.file?.format ?? 'json'
  if (format !== 'json' && format !== 'yaml') {
    throw configError(sink, `format must be "json" or "yaml", not "${String(format)}"`)
  }
  const pathTemplate = spec.file?.path || `{cluster}/{namespace}/{name}.${format}`
  return { pathTemplate, format }
}
