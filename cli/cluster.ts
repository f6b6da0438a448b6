import * as k8s from '@kubernetes/client-node'
import type { KubeObject, LabelSelector, ResourceSpec } from '../api/types.js'
import type { PluralResolution } from '../hooks/plural.js'
import { apiVersionOf } from '../hooks/request.js'
import { createPluralResolver } from '../server/cluster/discovery.js'
import { RunError, UsageError } from './io.js'

// Reading the objects a preview runs over live from a cluster, as Metacontroller's informers
// see them. Imported only when a preview names --kubeconfig or --context.

// KubernetesObjectApi deserializes known kinds into typed models, which drops fields the
// client does not know and turns timestamps into Dates. Metacontroller sends the API server's
// JSON as it is, so the preview reads that too.
class RawObjectApi extends k8s.KubernetesObjectApi {
  protected override async processResponse<T extends k8s.KubernetesObject>(response: k8s.ResponseContext, type?: string): Promise<T> {
    if (response.httpStatusCode >= 200 && response.httpStatusCode <= 299) return JSON.parse(await response.body.text()) as T
    return super.processResponse<T>(response, type)
  }
}

export interface ClusterOptions {
  kubeconfig?: string
  context?: string
}

export interface ClusterReader {
  /** The cluster's name for the kind (discovery), as the hooks server resolves it. */
  plural(resource: ResourceSpec): Promise<PluralResolution>
  /** The namespaces whose labels match a selector. */
  namespaces(selector: LabelSelector): Promise<string[]>
  /** Every object of a kind in a namespace ('' for all namespaces or a cluster-scoped kind), paged. */
  list(resource: ResourceSpec, namespace: string, labelSelector: LabelSelector | undefined, onPage?: (count: number) => void): Promise<KubeObject[]>
}

const PAGE = 500

export function connect(options: ClusterOptions): ClusterReader {
  const kc = new k8s.KubeConfig()
  try {
    if (options.kubeconfig) kc.loadFromFile(options.kubeconfig)
    else kc.loadFromDefault()
  } catch (err) {
    throw new UsageError(`cannot load kubeconfig ${options.kubeconfig ?? '(default)'}: ${(err as Error).message.split('\n')[0]}`)
  }
  if (options.context) {
    if (!kc.getContextObject(options.context)) {
      const known = kc.getContexts().map((c) => c.name).sort()
      throw new UsageError(`no context ${JSON.stringify(options.context)} in the kubeconfig${known.length > 0 ? ` (contexts: ${known.join(', ')})` : ''}`)
    }
    kc.setCurrentContext(options.context)
  }
  if (!kc.getCurrentCluster()) throw new UsageError('the kubeconfig has no current cluster; pass --context')
  const api = kc.makeApiClient(RawObjectApi)

  const listAll = async (
    apiVersion: string, kind: string, namespace: string, selector: string | undefined, onPage?: (count: number) => void,
  ): Promise<KubeObject[]> => {
    const out: KubeObject[] = []
    let token: string | undefined
    do {
      let page: { items?: KubeObject[]; metadata?: { continue?: string } }
      try {
        page = (await api.list(apiVersion, kind, namespace || undefined, undefined, undefined, undefined, undefined, selector, PAGE, token)) as typeof page
      } catch (err) {
        throw new RunError(`cannot list ${kind}.${apiVersion}${namespace ? ` in namespace ${namespace}` : ''}: ${apiErrorMessage(err)}`)
      }
      for (const item of page.items ?? []) out.push({ ...item, apiVersion: item.apiVersion ?? apiVersion, kind: item.kind ?? kind })
      onPage?.(out.length)
      token = page.metadata?.continue || undefined
    } while (token)
    return out
  }

  const resolvePlural = createPluralResolver(kc)
  return {
    plural: (resource) => resolvePlural(resource),
    namespaces: async (selector) => {
      const list = await listAll('v1', 'Namespace', '', selectorString(selector))
      return list.map((n) => n.metadata?.name ?? '').filter((n) => n !== '').sort()
    },
    list: (resource, namespace, labelSelector, onPage) =>
      listAll(apiVersionOf(resource.group, resource.version), resource.kind, namespace, selectorString(labelSelector), onPage),
  }
}

/** A label selector as the API server's query syntax: `tier=frontend,env in (a,b),!legacy`. */
function selectorString(selector: LabelSelector | undefined): string | undefined {
  if (!selector) return undefined
  const parts: string[] = []
  for (const [k, v] of Object.entries(selector.matchLabels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) parts.push(`${k}=${v}`)
  for (const r of selector.matchExpressions ?? []) {
    const values = [...(r.values ?? [])].sort().join(',')
    if (r.operator === 'In') parts.push(`${r.key} in (${values})`)
    else if (r.operator === 'NotIn') parts.push(`${r.key} notin (${values})`)
    else if (r.operator === 'Exists') parts.push(r.key)
    else if (r.operator === 'DoesNotExist') parts.push(`!${r.key}`)
  }
  return parts.length > 0 ? parts.join(',') : undefined
}

function apiErrorMessage(err: unknown): string {
  const e = err as { code?: number; body?: unknown; message?: string }
  if (typeof e.code === 'number') {
    let detail = ''
    try {
      const body = typeof e.body === 'string' ? (JSON.parse(e.body) as { message?: string }) : (e.body as { message?: string } | undefined)
      detail = body?.message ?? ''
    } catch {
      detail = typeof e.body === 'string' ? e.body.slice(0, 200) : ''
    }
    return `HTTP ${e.code}${detail ? `: ${detail}` : ''}`
  }
  return (e.message ?? String(err)).split('\n')[0] as string
}
