import type { ResourceSpec } from '../api/types.js'

// Used when neither the spec nor discovery gives a plural (no cluster, or discovery down).
const WELL_KNOWN: Record<string, string> = {
  '/Pod': 'pods', '/Service': 'services', '/ConfigMap': 'configmaps', '/Secret': 'secrets',
  '/Namespace': 'namespaces', '/Node': 'nodes', '/PersistentVolume': 'persistentvolumes',
  '/PersistentVolumeClaim': 'persistentvolumeclaims', '/ServiceAccount': 'serviceaccounts',
  '/Endpoints': 'endpoints', '/Event': 'events', '/LimitRange': 'limitranges', '/ResourceQuota': 'resourcequotas',
  'apps/Deployment': 'deployments', 'apps/StatefulSet': 'statefulsets', 'apps/DaemonSet': 'daemonsets', 'apps/ReplicaSet': 'replicasets',
  'batch/Job': 'jobs', 'batch/CronJob': 'cronjobs',
  'networking.k8s.io/Ingress': 'ingresses', 'networking.k8s.io/NetworkPolicy': 'networkpolicies', 'networking.k8s.io/IngressClass': 'ingressclasses',
  'policy/PodDisruptionBudget': 'poddisruptionbudgets', 'autoscaling/HorizontalPodAutoscaler': 'horizontalpodautoscalers',
  'rbac.authorization.k8s.io/Role': 'roles', 'rbac.authorization.k8s.io/RoleBinding': 'rolebindings',
  'rbac.authorization.k8s.io/ClusterRole': 'clusterroles', 'rbac.authorization.k8s.io/ClusterRoleBinding': 'clusterrolebindings',
  'storage.k8s.io/StorageClass': 'storageclasses', 'scheduling.k8s.io/PriorityClass': 'priorityclasses',
  'apiextensions.k8s.io/CustomResourceDefinition': 'customresourcedefinitions',
  'gateway.networking.k8s.io/Gateway': 'gateways', 'gateway.networking.k8s.io/HTTPRoute': 'httproutes',
  'cert-manager.io/Certificate': 'certificates', 'cert-manager.io/Issuer': 'issuers', 'cert-manager.io/ClusterIssuer': 'clusterissuers',
  'argoproj.io/Application': 'applications', 'kollect.dev/KollectTarget': 'kollecttargets', 'kollect.dev/KollectInventory': 'kollectinventories',
}

// Kinds known to be cluster-scoped: their v2 related keys are bare names.
const CLUSTER_SCOPED = new Set(['/Namespace', '/Node', '/PersistentVolume', 'rbac.authorization.k8s.io/ClusterRole',
  'rbac.authorization.k8s.io/ClusterRoleBinding', 'storage.k8s.io/StorageClass', 'apiextensions.k8s.io/CustomResourceDefinition',
  'networking.k8s.io/IngressClass', 'cert-manager.io/ClusterIssuer', 'scheduling.k8s.io/PriorityClass'])

export function wellKnownPlural(resource: Pick<ResourceSpec, 'group' | 'kind'>): string | null {
  return WELL_KNOWN[`${resource.group ?? ''}/${resource.kind}`] ?? null
}

/** The table's answer: true or false for a well-known kind, undefined for any other. */
export function wellKnownNamespaced(resource: Pick<ResourceSpec, 'group' | 'kind'>): boolean | undefined {
  const key = `${resource.group ?? ''}/${resource.kind}`
  if (CLUSTER_SCOPED.has(key)) return false
  return Object.hasOwn(WELL_KNOWN, key) ? true : undefined
}

/** What the server learned about the plural of a resource (spec, discovery or the table). */
export interface PluralResolution {
  plural: string | null
  source: 'spec' | 'discovery' | 'well-known' | 'unresolved'
  /** Discovery's answer, else the table's; undefined when neither knows (taken as namespaced). */
  namespaced?: boolean | undefined
  message?: string
}

/**
 * Whether the target's kind is cluster-scoped: what discovery (or the table) said. A kind
 * nobody knows is taken as namespaced, the common case; sync still takes any object without a
 * namespace as cluster-scoped.
 */
export function isClusterScoped(resource: Pick<ResourceSpec, 'group' | 'kind'>, plural: Pick<PluralResolution, 'namespaced'>): boolean {
  return (plural.namespaced ?? wellKnownNamespaced(resource)) === false
}
