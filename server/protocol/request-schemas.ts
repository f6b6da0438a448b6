import { Ajv } from 'ajv'

// Request shapes as Metacontroller sends them (hook version v2). Only the envelope is checked;
// objects inside are data and are handled defensively by the hooks.
const objectMap = { type: 'object', additionalProperties: { type: 'object' } }
const parent = {
  type: 'object',
  required: ['metadata'],
  properties: {
    metadata: {
      type: 'object',
      required: ['name'],
      properties: { name: { type: 'string', minLength: 1 }, namespace: { type: 'string' }, generation: { type: 'integer' }, uid: { type: 'string' } },
    },
    spec: { type: 'object' },
  },
}

export const syncSchema = {
  type: 'object',
  required: ['parent'],
  properties: {
    controller: { type: 'object' },
    parent,
    children: { type: 'object', additionalProperties: objectMap },
    related: { type: 'object', additionalProperties: objectMap },
    finalizing: { type: 'boolean' },
  },
}

export const customizeSchema = { type: 'object', required: ['parent'], properties: { controller: { type: 'object' }, parent } }

/** The same check Fastify applies to routes, for bodies parsed off the main thread. */
export function syncValidator(): (body: unknown) => string | null {
  const validate = new Ajv({ coerceTypes: false, allErrors: false }).compile(syncSchema)
  return (body) => {
    if (validate(body)) return null
    const e = validate.errors?.[0]
    return e ? `body${e.instancePath} ${e.message}` : 'body is invalid'
  }
}
