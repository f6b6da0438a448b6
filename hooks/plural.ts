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
  'storage.k8s.io/StorageClass': 'storageclasses', 'apiextensions.k8s.io/CustomResourceDefinition': 'customresourcedefinitions',
  'gateway.networking.k8s.io/Gateway': 'gateways', 'gateway.networking.k8s.io/HTTPRoute': 'httproutes',
  'cert-manager.io/Certificate': 'certificates', 'cert-manager.io/Issuer': 'issuers', 'cert-manager.io/ClusterIssuer': 'clusterissuers',
  'argoproj.io/Application': 'applications', 'kollect.dev/KollectTarget': 'kollecttargets', 'kollect.dev/KollectInventory': 'kollectinventories',
}

// Kinds known to be cluster-scoped: their v2 related keys are bare names.
const CLUSTER_SCOPED = new Set(['/Namespace', '/Node', '/PersistentVolume', 'rbac.authorization.k8s.io/ClusterRole',
  'rbac.authorization.k8s.io/ClusterRoleBinding', 'storage.k8s.io/StorageClass', 'apiextensions.k8s.io/CustomResourceDefinition',
  'networking.k8s.io/IngressClass', 'cert-manager.io/ClusterIssuer'])

export function wellKnownPlural(resource: Pick<ResourceSpec, 'group' | 'kind'>): string | null {
  return WELL_KNOWN[`${resource.group ?? ''}/${resource.kind}`] ?? null
}

export function isClusterScoped(resource: Pick<ResourceSpec, 'group' | 'kind'>): boolean {
  return CLUSTER_SCOPED.has(`${resource.group ?? ''}/${resource.kind}`)
}

/** What the server learned about the plural of a resource (spec, discovery or the table). */
export interface PluralResolution {
  plural: string | null
  source: 'spec' | 'discovery' | 'well-known' | 'unresolved'
  message?: string
}
