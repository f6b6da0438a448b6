import * as k8s from '@kubernetes/client-node'
import { LRUCache } from 'lru-cache'
import type { ResourceSpec } from '../../api/types.js'
import { wellKnownNamespaced, wellKnownPlural, type PluralResolution } from '../../hooks/plural.js'

// resource() does discovery (and caches it) but is protected in the client.
class DiscoveryApi extends k8s.KubernetesObjectApi {
  lookup(apiVersion: string, kind: string): Promise<k8s.V1APIResource | undefined> {
    return this.resource(apiVersion, kind)
  }
}

export type PluralResolver = (resource: ResourceSpec | undefined) => Promise<PluralResolution>

/**
 * Spec first, then discovery (cached), then the table of well-known kinds. The scope comes from
 * discovery even when the spec names the plural: a cluster-scoped custom kind read as
 * namespaced would select nothing.
 */
export function createPluralResolver(kc: k8s.KubeConfig | null): PluralResolver {
  const api = kc ? kc.makeApiClient(DiscoveryApi) : null
  const cache = new LRUCache<string, { plural: string; namespaced: boolean }>({ max: 1000, ttl: 10 * 60_000 })
  const discover = async (apiVersion: string, kind: string): Promise<{ plural: string; namespaced: boolean } | string> => {
    const key = `${apiVersion}/${kind}`
    const hit = cache.get(key)
    if (hit) return hit
    if (!api) return ''
    try {
      const found = await api.lookup(apiVersion, kind)
      if (!found?.name) return `discovery has no kind ${kind} in ${apiVersion}`
      const r = { plural: found.name, namespaced: found.namespaced }
      cache.set(key, r)
      return r
    } catch (err) {
      return `discovery failed: ${(err as Error).message.split('\n')[0]}`
    }
  }
  return async (resource) => {
    if (!resource || typeof resource.kind !== 'string' || typeof resource.version !== 'string') {
      return { plural: null, source: 'unresolved', message: 'spec.resource needs version and kind' }
    }
    const apiVersion = resource.group ? `${resource.group}/${resource.version}` : resource.version
    const found = await discover(apiVersion, resource.kind)
    const discovered = typeof found === 'string' ? undefined : found
    if (resource.plural) return { plural: resource.plural, source: 'spec', namespaced: discovered?.namespaced ?? wellKnownNamespaced(resource) }
    if (discovered) return { plural: discovered.plural, source: 'discovery', namespaced: discovered.namespaced }
    const known = wellKnownPlural(resource)
    if (known) return { plural: known, source: 'well-known', namespaced: wellKnownNamespaced(resource) }
    const discoveryError = typeof found === 'string' ? found : ''
    const message = `cannot resolve the plural of ${resource.kind} in ${apiVersion}${discoveryError ? ` (${discoveryError})` : ''}; set spec.resource.plural`
    return { plural: null, source: 'unresolved', message }
  }
}
