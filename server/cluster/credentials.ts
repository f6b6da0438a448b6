import * as k8s from '@kubernetes/client-node'
import { LRUCache } from 'lru-cache'
import { GROUP, VERSION, type KollectScopeSpec, type KubeObject, type ResolvedSink } from '../../api/types.js'
import { effectiveScope, secretDenial, secretNamespace } from '../../hooks/scope.js'
import { SinkError, type Credentials } from '../../sinks/sink.js'

// Sink credentials, confined: a sink reads Secrets of its own namespace, and another namespace's
// only when every KollectScope of the sink's namespace lists it in allowedSecrets. The hooks
// check that too, but the exporter decides again before any read and any use of a built sink: a
// composition or a sink check is a report, not a permission, and a grant can be revoked.

export type CredentialReader = (sink: ResolvedSink) => Promise<Credentials>

/** Resolves when the sink may still use its Secret; throws the refusal (a SinkError) when not. */
type GrantCheck = (sink: ResolvedSink) => Promise<void>

/**
 * A sink's Secret, read once when the sink is built, and its grant, looked up again before every
 * use of the built sink (each write, drift check, removal and sink check): a pooled sink holds its
 * credentials, so a check at the read alone would let a revoked grant keep working.
 */
export interface SecretAccess {
  credentials: CredentialReader
  checkGrant: GrantCheck
}

export type ScopeList = { name: string; spec: KollectScopeSpec }[]

/** Where a sink's Secret is; foreign: in another namespace than the sink's. */
export interface SecretLocation {
  namespace: string
  name: string
  foreign: boolean
}

/** Null when the sink names no Secret. Namespaces are read as the hooks read them. */
export function secretLocation(sink: ResolvedSink): SecretLocation | null {
  const ref = sink.spec.secretRef
  if (!ref) return null
  const namespace = secretNamespace(sink.namespace, ref)
  return { namespace, name: String(ref.name), foreign: namespace !== sink.namespace }
}

/** The permanent refusal for a sink whose Secret the scopes of its namespace do not allow, or null. */
export function secretRefusal(sink: ResolvedSink, scopes: ScopeList): SinkError | null {
  const denial = secretDenial(sink, sink.spec.secretRef, effectiveScope(sink.namespace, scopes))
  return denial === null ? null : new SinkError(`ScopeSecretDenied: ${denial}`, { retriable: false })
}

// ---- local mode: environment variables ----

const DNS_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/

/**
 * One part of a variable name: upper-cased, "-" and "." as "_". Parts are joined by "__", so a
 * part may not contain "__" itself (from "--", "-." or ".."): only then could two Secrets share
 * a variable. Non-DNS names are refused for the same reason.
 */
function envPart(what: string, value: string): string {
  const part = value.toUpperCase().replace(/[-.]/g, '_')
  if (!DNS_NAME.test(value) || part.includes('__')) {
    throw new SinkError(`Secret ${what} ${JSON.stringify(value)} has no unambiguous environment variable: ` +
      'it must be a lower-case DNS name without "--", "-.", ".-" or ".."', { retriable: false })
  }
  return part
}

/**
 * Environment variable holding one key of a Secret in local mode:
 * KOLLECT_SECRET_<NAMESPACE>__<NAME>__<KEY>. With key "" it is the prefix of all of them.
 */
export function secretEnvName(namespace: string, secretName: string, key: string): string {
  return `KOLLECT_SECRET_${envPart('namespace', namespace)}__${envPart('name', secretName)}__${key.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`
}

/** Local mode refuses another namespace's Secret: there is no KollectScope here to grant it. */
function localRefusal(sink: ResolvedSink): SinkError | null {
  const at = secretLocation(sink)
  if (!at?.foreign) return null
  return new SinkError(`ScopeSecretDenied: Secret ${at.namespace}/${at.name} of KollectSink ${sink.namespace}/${sink.name} is in another namespace; ` +
    'without a cluster (credentials from environment variables) a sink may use only Secrets of its own namespace', { retriable: false })
}

/** Local mode: every KOLLECT_SECRET_<NAMESPACE>__<NAME>__* variable is one key of that Secret. */
export function envCredentials(env: Record<string, string | undefined> = process.env): CredentialReader {
  return async (sink) => {
    const at = secretLocation(sink)
    if (!at) return {}
    const refusal = localRefusal(sink)
    if (refusal) throw refusal
    const prefix = secretEnvName(at.namespace, at.name, '')
    const out: Record<string, string> = {}
    for (const [k, v] of Object.entries(env)) {
      if (k.startsWith(prefix) && k.length > prefix.length && v !== undefined) out[k.slice(prefix.length).toLowerCase()] = v
    }
    // Keys are case-sensitive in Secrets; offer the common spellings.
    if (out['database_url'] !== undefined) out['DATABASE_URL'] = out['database_url']
    if (Object.keys(out).length === 0) {
      throw new SinkError(`Secret ${at.namespace}/${at.name}: no ${prefix}* environment variables are set`, { retriable: true })
    }
    return out
  }
}

export function envSecrets(env: Record<string, string | undefined> = process.env): SecretAccess {
  return {
    credentials: envCredentials(env),
    checkGrant: async (sink) => {
      const refusal = localRefusal(sink)
      if (refusal) throw refusal
    },
  }
}

// ---- cluster mode ----

/** The exporter's only calls to the API server. */
export interface ClusterReads {
  /** The KollectScopes of one namespace. */
  scopes(namespace: string): Promise<ScopeList>
  /** One Secret's data, decoded. */
  secret(namespace: string, name: string): Promise<Record<string, string>>
}

function kubeReads(kc: k8s.KubeConfig): ClusterReads {
  const core = kc.makeApiClient(k8s.CoreV1Api)
  const custom = kc.makeApiClient(k8s.CustomObjectsApi)
  return {
    scopes: async (namespace) => {
      const list = (await custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: 'kollectscopes' })) as { items?: KubeObject[] }
      return (list.items ?? [])
        .filter((o) => o.metadata?.namespace === namespace)
        .map((o) => ({ name: o.metadata?.name ?? '', spec: (o['spec'] ?? {}) as KollectScopeSpec }))
    },
    secret: async (namespace, name) => {
      const secret = await core.readNamespacedSecret({ name, namespace })
      const out: Record<string, string> = {}
      for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8')
      return out
    },
  }
}

/**
 * Cluster mode: a foreign Secret is used only while the scopes of the sink's namespace, listed
 * fresh at every check, allow it; a failed list refuses (retriably). Secret data is cached briefly
 * by location, so rotation is picked up; the scope decision is never cached, and a refusal evicts
 * the Secret's data, so a revoked grant stops the next use of the sink.
 */
export function clusterSecrets(reads: ClusterReads, cacheMs: number): SecretAccess {
  const cache = new LRUCache<string, Credentials>({ max: 500, ttl: Math.max(1, cacheMs) })
  const checkGrant: GrantCheck = async (sink) => {
    const at = secretLocation(sink)
    if (!at?.foreign) return
    const refusal = secretRefusal(sink, await apiCall(() => reads.scopes(sink.namespace), `KollectScopes of namespace ${sink.namespace}: cannot be listed`))
    if (refusal) {
      cache.delete(`${at.namespace}/${at.name}`)
      throw refusal
    }
  }
  const credentials: CredentialReader = async (sink) => {
    const at = secretLocation(sink)
    if (!at) return {}
    await checkGrant(sink)
    const key = `${at.namespace}/${at.name}`
    const hit = cache.get(key)
    if (hit) return hit
    const data = await apiCall(() => reads.secret(at.namespace, at.name), `Secret ${key}: cannot be read`)
    cache.set(key, data)
    return data
  }
  return { credentials, checkGrant }
}

export function kubeSecrets(kc: k8s.KubeConfig, cacheMs: number): SecretAccess {
  return clusterSecrets(kubeReads(kc), cacheMs)
}

export function kubeCredentials(kc: k8s.KubeConfig, cacheMs: number): CredentialReader {
  return kubeSecrets(kc, cacheMs).credentials
}

/** An API failure as a retriable SinkError with the HTTP code only (the body may echo data). */
async function apiCall<T>(fn: () => Promise<T>, message: string): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    const code = (err as { code?: number }).code
    throw new SinkError(`${message}${code ? ` (HTTP ${code})` : ''}`, { retriable: true })
  }
}
