import * as k8s from '@kubernetes/client-node'
import { LRUCache } from 'lru-cache'
import type { ResourceSpec } from '../api/types.js'
import { wellKnownPlural, type PluralResolution } from '../hooks/plural.js'

// resource() does discovery (and caches it) but is protected in the client.
class DiscoveryApi extends k8s.KubernetesObjectApi {
  lookup(apiVersion: string, kind: string): Promise<k8s.V1APIResource | undefined> {
    return this.resource(apiVersion, kind)
  }
}

export type PluralResolver = (resource: ResourceSpec | undefined) => Promise<PluralResolution>

/** Spec first, then discovery (cached), then the table of well-known kinds. */
export function createPluralResolver(kc: k8s.KubeConfig | null): PluralResolver {
  const api = kc ? kc.makeApiClient(DiscoveryApi) : null
  const cache = new LRUCache<string, PluralResolution>({ max: 1000, ttl: 10 * 60_000 })
  return async (resource) => {
    if (!resource || typeof resource.kind !== 'string' || typeof resource.version !== 'string') {
      return { plural: null, source: 'unresolved', message: 'spec.resource needs version and kind' }
    }
    if (resource.plural) return { plural: resource.plural, source: 'spec' }
    const apiVersion = resource.group ? `${resource.group}/${resource.version}` : resource.version
    const key = `${apiVersion}/${resource.kind}`
    const hit = cache.get(key)
    if (hit) return hit
    let discoveryError = ''
    if (api) {
      try {
        const found = await api.lookup(apiVersion, resource.kind)
        if (found?.name) {
          const r: PluralResolution = { plural: found.name, source: 'discovery' }
          cache.set(key, r)
          return r
        }
        discoveryError = `discovery has no kind ${resource.kind} in ${apiVersion}`
      } catch (err) {
        discoveryError = `discovery failed: ${(err as Error).message.split('\n')[0]}`
      }
    }
    const known = wellKnownPlural(resource)
    if (known) return { plural: known, source: 'well-known' }
    return { plural: null, source: 'unresolved', message: `cannot resolve the plural of ${resource.kind} in ${apiVersion}${discoveryError ? ` (${discoveryError})` : ''}; set spec.resource.plural` }
  }
}
