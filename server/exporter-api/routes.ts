// The exporter sidecar's API: the hooks container is its only client, over loopback, with the
// same authentication. Paths mirror the ExporterClient methods one to one.
export const EXPORTER_ROUTES = {
  reportTarget: '/v1/targets/report',
  holdsReport: '/v1/targets/held',
  removeTarget: '/v1/targets/remove',
  applyInventory: '/v1/inventories/apply',
  finalizeInventory: '/v1/inventories/finalize',
  checkSink: '/v1/sinks/check',
} as const

/** The exporter's role on every API answer: `active` (it writes to sinks) or `standby`. */
export const EXPORTER_ROLE_HEADER = 'kollect-exporter-role'

export type ExporterRole = 'active' | 'standby' | 'unknown'
