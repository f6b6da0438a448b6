import type { FastifyPluginAsync } from 'fastify'
import type { InventoryComposition } from '../../../api/types.js'
import { composeInventory, customizeInventory, finalizeInventoryResponse, syncInventoryResponse } from '../../../hooks/inventory.js'
import { parentRef, syncRequest, type CustomizeRequest } from '../../../hooks/request.js'
import { customizeSchema, syncSchema } from '../../protocol/request-schemas.js'
import { callExporter, hookRoute, type HookRouteDeps } from './hook-route.js'

/** /hooks/inventories/{customize,sync,finalize}. */
export const inventoryRoutes: FastifyPluginAsync<HookRouteDeps> = async (app, deps) => {
  const { exporter } = deps
  hookRoute(app, deps, 'inventories', 'customize', customizeSchema, async (body) => customizeInventory(body as CustomizeRequest))
  hookRoute(app, deps, 'inventories', 'sync', syncSchema, async (body) => {
    const req = syncRequest(body)
    const composed = composeInventory(req)
    const state = composed.ok ? await callExporter(() => exporter.applyInventory(composed.composition)) : null
    return syncInventoryResponse(req, composed, state)
  })
  hookRoute(app, deps, 'inventories', 'finalize', syncSchema, async (body) => {
    const req = syncRequest(body)
    const composed = composeInventory(req)
    // An invalid spec still gets finalized: the exporter falls back to what it last applied.
    const composition: InventoryComposition = composed.ok
      ? composed.composition
      : { inventory: parentRef(req.parent), generation: 0, targets: [], sinks: [], debounceMs: 0, maxWaitMs: 0, suspend: true }
    const result = await callExporter(() => exporter.finalizeInventory(composition))
    return finalizeInventoryResponse(req, composed, result)
  })
}
