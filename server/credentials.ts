import * as k8s from '@kubernetes/client-node'
import { LRUCache } from 'lru-cache'
import type { ResolvedSink } from '../api/types.js'
import { SinkError, type Credentials } from '../sinks/sink.js'

/** Environment variable holding one key of a secret in local mode: KOLLECT_SECRET_<NAME>_<KEY>. */
export function secretEnvName(secretName: string, key: string): string {
  const norm = (s: string) => s.toUpperCase().replace(/[^A-Z0-9]/g, '_')
  return `KOLLECT_SECRET_${norm(secretName)}_${norm(key)}`
}

export type CredentialReader = (sink: ResolvedSink) => Promise<Credentials>

/** Local mode: every KOLLECT_SECRET_<NAME>_* variable is one key of the secret <name>. */
export function envCredentials(env: Record<string, string | undefined> = process.env): CredentialReader {
  return async (sink) => {
    const name = sink.spec.secretRef?.name ?? ''
    const prefix = secretEnvName(name, '')
    const out: Record<string, string> = {}
    for (const [k, v] of Object.entries(env)) {
      if (k.startsWith(prefix) && v !== undefined) out[k.slice(prefix.length).toLowerCase()] = v
    }
    // Keys are case-sensitive in Secrets; offer the common spellings.
    if (out['database_url'] !== undefined) out['DATABASE_URL'] = out['database_url']
    if (Object.keys(out).length === 0) throw new SinkError(`secret ${name}: no ${prefix}* environment variables are set`, { retriable: true })
    return out
  }
}

/** In a cluster: read the Secret (default: the sink's namespace), cached briefly so rotation is picked up. */
export function kubeCredentials(kc: k8s.KubeConfig, cacheMs: number): CredentialReader {
  const api = kc.makeApiClient(k8s.CoreV1Api)
  const cache = new LRUCache<string, Credentials>({ max: 500, ttl: Math.max(1, cacheMs) })
  return async (sink) => {
    const ref = sink.spec.secretRef
    if (!ref) return {}
    const namespace = ref.namespace || sink.namespace
    const key = `${namespace}/${ref.name}`
    const hit = cache.get(key)
    if (hit) return hit
    let secret: k8s.V1Secret
    try {
      secret = await api.readNamespacedSecret({ name: ref.name, namespace })
    } catch (err) {
      const code = (err as { code?: number }).code
      throw new SinkError(`secret ${key}: cannot be read${code ? ` (HTTP ${code})` : ''}`, { retriable: true })
    }
    const out: Record<string, string> = {}
    for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8')
    cache.set(key, out)
    return out
  }
}
