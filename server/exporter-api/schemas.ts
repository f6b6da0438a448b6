import { specSchema } from '../../api/crd-schemas.js'

// The bodies of the exporter sidecar's API (server/exporter-api/server.ts), after the ExporterClient
// argument types in api/types.ts. Fields are checked for type, not closed: a newer hooks
// container may send more. The sink spec is the CRD's own schema.

const string = { type: 'string' }
const objectRef = { type: 'object', required: ['namespace', 'name'], properties: { namespace: string, name: string } }

const item = {
  type: 'object',
  required: ['group', 'version', 'kind', 'namespace', 'name', 'uid', 'target', 'attributes'],
  properties: { group: string, version: string, kind: string, namespace: string, name: string, uid: string, target: objectRef, attributes: { type: 'object' } },
}

export const targetReportSchema = {
  type: 'object',
  required: ['target', 'generation', 'checksum', 'items', 'failedKeys'],
  properties: {
    target: objectRef,
    generation: { type: 'integer' },
    checksum: string,
    items: { type: 'array', items: item },
    failedKeys: { type: 'array', items: string },
    itemHashes: { type: 'array', items: string },
    uid: string,
    sequence: { type: 'number' },
    itemGenerations: { type: 'array', items: { type: ['integer', 'null'] } },
    base: string,
    removedKeys: { type: 'array', items: string },
  },
}

export const heldReportSchema = {
  type: 'object',
  required: ['target', 'generation', 'checksum'],
  properties: { target: objectRef, uid: string, generation: { type: 'integer' }, checksum: string },
}

export const removedTargetSchema = { ...objectRef, properties: { ...objectRef.properties, uid: string } }

/** Built on first use: the sink spec comes from the CRD file. */
export function resolvedSinkSchema(): object {
  return { ...objectRef, required: [...objectRef.required, 'spec'], properties: { ...objectRef.properties, spec: specSchema('KollectSink') } }
}

export function inventoryCompositionSchema(): object {
  return {
    type: 'object',
    required: ['inventory', 'generation', 'targets', 'sinks', 'debounceMs', 'maxWaitMs', 'suspend'],
    properties: {
      inventory: objectRef,
      generation: { type: 'integer' },
      targets: { type: 'array', items: objectRef },
      sinks: { type: 'array', items: resolvedSinkSchema() },
      useDefaultSink: { type: 'boolean' },
      debounceMs: { type: 'number' },
      maxWaitMs: { type: 'number' },
      suspend: { type: 'boolean' },
    },
  }
}
