import * as k8s from '@kubernetes/client-node'

/** In a pod, the service account; elsewhere only an explicit KUBECONFIG. No cluster: null. */
export function loadKubeConfig(env: Record<string, string | undefined> = process.env): k8s.KubeConfig | null {
  const kc = new k8s.KubeConfig()
  if (env['KUBERNETES_SERVICE_HOST']) {
    kc.loadFromCluster()
    return kc
  }
  if (env['KUBECONFIG']) {
    kc.loadFromDefault()
    return kc
  }
  return null
}
