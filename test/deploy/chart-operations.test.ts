// The chart as a platform team runs it (issue 27, "Chart"), rendered by a real helm (./helm.ts):
// the image (none by default in the source chart, registry, digest, the release's default), the
// extension points cert-manager's and kube-state-metrics' users expect, a private CA for TLS
// sinks, NOTES.txt in both layouts, what `helm uninstall` keeps, the Lease Role only where
// something elects, a liveness probe that starts no second Node process, and the hook token
// under GitOps.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Exporter } from '../../exporter/index.js'
import { buildExporterApp } from '../../server/exporter-api/server.js'
import { createLogger } from '../../server/process/logger.js'
import { createMetrics } from '../../server/process/metrics.js'
import { all, container, k8sObjects, only, parseDocs, readRepoFile, type Deployment, type K8sObject, type Service } from './k8s.js'
import { CHART, HELM_SETUP_TIMEOUT_MS, KUBE_VERSION, NAMESPACE, RELEASE, findHelm, render, renderFails, runHelm } from './helm.js'

before(findHelm, { timeout: HELM_SETUP_TIMEOUT_MS })

/** The least hub values the chart renders a hub with. */
const HUB = ['hub.enabled=true', 'hub.nats.url=nats://hub-nats:4222', 'hub.clusters={east}', 'hub.sinks[0].name=fleet-db', 'hub.sinks[0].spec.type=postgres']
const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`

const dir = mkdtempSync(join(tmpdir(), 'kollect-chart-ops-'))
after(() => rmSync(dir, { recursive: true, force: true }))

/** A values file in the test's directory, for values --set spells badly (lists of objects). */
function valuesFile(name: string, yaml: string): string {
  const file = join(dir, name)
  writeFileSync(file, yaml)
  return file
}

type PodDeployment = Deployment & {
  spec: {
    revisionHistoryLimit?: number
    strategy: { type: string; rollingUpdate?: Record<string, unknown> }
    template: { metadata: { annotations?: Record<string, string> } }
  }
}

/** Every container of every Deployment, as [deployment/container, image]. */
const images = (set: string[]) => all<Deployment>(render(set), 'Deployment')
  .flatMap((d) => d.spec.template.spec.containers.map((c) => [`${d.metadata.name}/${c.name}`, c.image]))

describe('image', () => {
  test('the source chart names no image: rendering fails and says what to set', () => {
    // The tests' helm sets a local image first (test/support/helm.ts); an empty one is the chart's default.
    const err = renderFails(['image.repository='])
    assert.match(err, /image\.repository is not set: no Kollect image is published for this chart yet/)
    assert.match(err, /--set image\.repository=<registry>\/kollect/)
    assert.equal(/^ {2}repository: ""$/m.test(readRepoFile('charts/kollect/values.yaml')), true)
  })

  test('registry, repository and tag; a digest wins over the tag; for every container, the hub\'s included', () => {
    const base = ['image.registry=registry.example:5000', 'image.repository=platform/kollect', 'image.tag=1.2.3', ...HUB]
    for (const layout of [[], ['hooks.replicas=3']]) {
      const tagged = images([...base, ...layout])
      assert.ok(tagged.length >= 3)
      for (const [where, image] of tagged) assert.equal(image, 'registry.example:5000/platform/kollect:1.2.3', where)
      for (const [where, image] of images([...base, ...layout, `image.digest=${DIGEST}`])) assert.equal(image, `registry.example:5000/platform/kollect@${DIGEST}`, where)
    }
    assert.deepEqual(new Set(images(['image.repository=ghcr.io/acme/kollect']).map(([, i]) => i)), new Set(['ghcr.io/acme/kollect:0.1.0']), 'no registry: the repository as it is')
    assert.match(renderFails(['image.digest=latest']), /digest/)
    assert.match(renderFails(['image.repository=kollect:1.2.3']), /repository/)
  })

  test('the release workflow\'s substitution makes the published chart default to the published image', () => {
    const release = parseDocs(readRepoFile('.github/workflows/release.yml'), 'release.yml')[0] as { jobs: { chart: { steps: { run?: string }[] } } }
    const sed = release.jobs.chart.steps.flatMap((s) => (s.run ?? '').split('\n')).map((l) => l.trim()).filter((l) => l.startsWith('sed -i ') || l.startsWith('grep -qx '))
    assert.equal(sed.length, 2, 'the substitution and its check')
    const dir = mkdtempSync(join(tmpdir(), 'kollect-release-chart-'))
    try {
      mkdirSync(join(dir, 'charts'))
      cpSync(CHART, join(dir, 'charts', 'kollect'), { recursive: true })
      const r = spawnSync('bash', ['-euo', 'pipefail', '-c', ['image=ghcr.io/acme/kollect', ...sed].join('\n')], { cwd: dir, encoding: 'utf8' })
      assert.equal(r.status, 0, r.stderr)
      // Straight to helm: the tests' runner would set its local image.
      const t = spawnSync(findHelm(), ['template', RELEASE, join(dir, 'charts', 'kollect'), '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION], { encoding: 'utf8' })
      assert.equal(t.status, 0, t.stderr)
      for (const d of all<Deployment>(k8sObjects(parseDocs(t.stdout, 'release chart')), 'Deployment')) {
        for (const c of d.spec.template.spec.containers) assert.equal(c.image, 'ghcr.io/acme/kollect:0.1.0', `${d.metadata.name}/${c.name}`)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('extension points', () => {
  const EXTRAS = `extraVolumes:
  - name: corp-proxy-ca
    secret: {secretName: corp-proxy-ca}
  - name: scratch
    emptyDir: {}
extraVolumeMounts:
  - name: corp-proxy-ca
    mountPath: /etc/corp
    readOnly: true
podAnnotations: {example.com/team: platform}
service:
  annotations: {example.com/owner: platform}
revisionHistoryLimit: 3
hooks:
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 2, maxUnavailable: 1}}
serviceMonitor:
  enabled: true
  honorLabels: true
  relabelings:
    - {action: replace, targetLabel: cluster, replacement: lab-west}
  metricRelabelings:
    - {action: drop, sourceLabels: [__name__], regex: "kollect_nodejs_.*"}
`
  type Endpoint = { port: string; honorLabels?: boolean; relabelings?: unknown[]; metricRelabelings?: unknown[] }

  test('defaults: ten old ReplicaSets, no extras, the hooks roll one pod at a time', () => {
    for (const layout of [[], ['hooks.replicas=3']]) {
      const objects = render([...layout, ...HUB])
      for (const d of all<PodDeployment>(objects, 'Deployment')) {
        assert.equal(d.spec.revisionHistoryLimit, 10, d.metadata.name)
        for (const c of d.spec.template.spec.containers) assert.ok(!(c.volumeMounts ?? []).some((m) => m.name === 'corp-proxy-ca'))
      }
      for (const svc of all<Service>(objects, 'Service')) assert.equal(svc.metadata.annotations, undefined, svc.metadata.name)
    }
    const hooks = only<PodDeployment>(render(['hooks.replicas=3']), 'Deployment', 'kollect-hooks')
    assert.deepEqual(hooks.spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } })
  })

  test('volumes, mounts, pod and Service annotations, revisionHistoryLimit: on every pod and Service of both layouts and the hub', () => {
    const file = valuesFile('extras.yaml', EXTRAS)
    for (const layout of [[], ['hooks.replicas=3'], ['hooks.replicas=3', 'exporter.replicas=2']]) {
      const objects = render([...layout, ...HUB], ['-f', file])
      const deployments = all<PodDeployment>(objects, 'Deployment')
      assert.ok(deployments.some((d) => d.metadata.name === 'kollect-hub'))
      for (const d of deployments) {
        const where = `${layout.join(',') || 'single pod'}: ${d.metadata.name}`
        assert.equal(d.spec.revisionHistoryLimit, 3, where)
        assert.equal(d.spec.template.metadata.annotations?.['example.com/team'], 'platform', where)
        const volumes = d.spec.template.spec.volumes
        assert.deepEqual(volumes.find((v) => v.name === 'corp-proxy-ca')?.secret, { secretName: 'corp-proxy-ca' }, where)
        assert.ok(volumes.some((v) => v.name === 'scratch'), where)
        for (const c of d.spec.template.spec.containers) {
          assert.deepEqual(c.volumeMounts?.find((m) => m.name === 'corp-proxy-ca'), { name: 'corp-proxy-ca', mountPath: '/etc/corp', readOnly: true }, `${where}/${c.name}`)
        }
      }
      // The hub keeps its config checksum beside podAnnotations.
      assert.ok(only<PodDeployment>(objects, 'Deployment', 'kollect-hub').spec.template.metadata.annotations?.['checksum/config'])
      const services = all<Service>(objects, 'Service')
      assert.ok(services.length >= 2)
      for (const svc of services) assert.deepEqual(svc.metadata.annotations, { 'example.com/owner': 'platform' }, svc.metadata.name)
    }
    for (const layout of [[], ['hooks.replicas=3']]) {
      const r = runHelm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, '-f', file, ...[...layout, ...HUB].flatMap((v) => ['--set', v])])
      assert.equal(r.status, 0, r.stdout + r.stderr)
    }
  })

  test('strategy applies to the hooks Deployment only; the single pod, the exporter and the hub keep one writer at a time', () => {
    const file = valuesFile('extras.yaml', EXTRAS)
    const split = render(['hooks.replicas=3', ...HUB], ['-f', file])
    assert.deepEqual(only<PodDeployment>(split, 'Deployment', 'kollect-hooks').spec.strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 2, maxUnavailable: 1 } })
    assert.equal(only<PodDeployment>(split, 'Deployment', 'kollect-exporter').spec.strategy.type, 'Recreate')
    assert.equal(only<PodDeployment>(split, 'Deployment', 'kollect-hub').spec.strategy.type, 'Recreate')
    assert.equal(only<PodDeployment>(render([...HUB], ['-f', file]), 'Deployment', 'kollect').spec.strategy.type, 'Recreate')
    assert.match(renderFails(['hooks.strategy.type=Sometimes']), /strategy/)
  })

  test('ServiceMonitor relabelings, metricRelabelings and honorLabels, on the hooks\' and the hub\'s', () => {
    const file = valuesFile('extras.yaml', EXTRAS)
    const monitors = all<K8sObject & { spec: { endpoints: Endpoint[] } }>(render([...HUB], ['-f', file]), 'ServiceMonitor')
    assert.deepEqual(monitors.map((m) => m.metadata.name).sort(), ['kollect', 'kollect-hub'])
    for (const m of monitors) {
      const [e] = m.spec.endpoints
      assert.equal(e?.honorLabels, true, m.metadata.name)
      assert.deepEqual(e?.relabelings, [{ action: 'replace', targetLabel: 'cluster', replacement: 'lab-west' }], m.metadata.name)
      assert.deepEqual(e?.metricRelabelings, [{ action: 'drop', sourceLabels: ['__name__'], regex: 'kollect_nodejs_.*' }], m.metadata.name)
    }
    for (const m of all<K8sObject & { spec: { endpoints: Endpoint[] } }>(render(['serviceMonitor.enabled=true', ...HUB]), 'ServiceMonitor')) {
      const [e] = m.spec.endpoints
      assert.deepEqual([e?.honorLabels, e?.relabelings, e?.metricRelabelings], [undefined, undefined, undefined], `${m.metadata.name}: nothing by default`)
    }
  })

  test('values.schema.json: a mount needs a path, a volume a name', () => {
    assert.match(renderFails(['extraVolumeMounts[0].name=x']), /mountPath/)
    assert.match(renderFails(['extraVolumes[0].emptyDir.medium=Memory']), /name/)
    assert.match(renderFails(['revisionHistoryLimit=-1']), /revisionHistoryLimit/)
  })
})

describe('extraCACerts: a private CA for TLS sinks', () => {
  // test/integration/private-ca.test.ts shows what these settings do against a real PostgreSQL and git over https.
  const CA = ['extraCACerts.secretName=corp-ca', 'extraCACerts.key=bundle.pem']

  test('off by default: no CA volume, no CA settings', () => {
    for (const d of all<Deployment>(render(['hooks.replicas=3', ...HUB]), 'Deployment').concat(all<Deployment>(render(), 'Deployment'))) {
      assert.ok(!d.spec.template.spec.volumes.some((v) => v.name === 'extra-ca'), d.metadata.name)
      for (const c of d.spec.template.spec.containers) {
        assert.deepEqual((c.env ?? []).filter((e) => ['NODE_EXTRA_CA_CERTS', 'GIT_SSL_CAINFO'].includes(e.name)), [], `${d.metadata.name}/${c.name}`)
      }
    }
  })

  test('the exporter and the hub read the Secret\'s bundle, mounted read-only, through NODE_EXTRA_CA_CERTS and GIT_SSL_CAINFO; the hooks open no sink', () => {
    for (const layout of [[], ['hooks.replicas=3'], ['hooks.replicas=3', 'exporter.replicas=2']]) {
      const objects = render([...layout, ...HUB, ...CA])
      const opened: string[] = []
      for (const d of all<Deployment>(objects, 'Deployment')) {
        for (const c of d.spec.template.spec.containers) {
          const where = `${layout.join(',') || 'single pod'}: ${d.metadata.name}/${c.name}`
          const file = c.env?.find((e) => e.name === 'NODE_EXTRA_CA_CERTS')?.value
          if (c.name === 'hooks') {
            assert.equal(file, undefined, where)
            assert.ok(!(c.volumeMounts ?? []).some((m) => m.name === 'extra-ca'), where)
            continue
          }
          opened.push(c.name)
          assert.ok(file, where)
          assert.equal(c.env?.find((e) => e.name === 'GIT_SSL_CAINFO')?.value, file, `${where}: git reads the same file`)
          const mount = (c.volumeMounts ?? []).find((m) => file.startsWith(`${m.mountPath}/`))
          assert.equal(mount?.readOnly, true, where)
          const volume = d.spec.template.spec.volumes.find((v) => v.name === mount?.name)
          assert.equal(volume?.secret?.secretName, 'corp-ca', where)
          assert.deepEqual(volume?.secret?.items, [{ key: 'bundle.pem', path: file.slice((mount?.mountPath.length ?? 0) + 1) }], where)
        }
      }
      assert.deepEqual(opened.sort(), ['exporter', 'hub'], layout.join(','))
    }
    const r = runHelm(['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, ...CA.flatMap((v) => ['--set', v])])
    assert.equal(r.status, 0, r.stdout + r.stderr)
  })
})

describe('NOTES.txt in both layouts', () => {
  // helm template does not print NOTES.txt, and helm install --dry-run needs a cluster. NOTES.txt
  // is a template of the chart like the others, so a copy of the chart with one more template
  // that includes it renders it with the same engine and values.
  let chart = ''
  before(() => {
    chart = join(dir, 'notes-chart')
    cpSync(CHART, chart, { recursive: true })
    writeFileSync(join(chart, 'templates', 'zz-rendered-notes.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rendered-notes}\ndata:\n  notes: {{ include "kollect/templates/NOTES.txt" . | quote }}\n')
  })
  const notes = (set: string[]): string => {
    const r = runHelm(['template', RELEASE, chart, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, '--show-only', 'templates/zz-rendered-notes.yaml', ...set.flatMap((v) => ['--set', v])])
    assert.equal(r.status, 0, r.stderr)
    return (parseDocs(r.stdout, 'notes')[0] as { data: { notes: string } }).data.notes
  }
  /** The Deployments `kubectl exec deploy/<name> -c <container>` lines name, each with its container. */
  const execTargets = (text: string) => [...text.matchAll(/kubectl exec -n \S+ deploy\/(\S+) -c (\S+)/g)].map((m) => [m[1], m[2]])

  test('the one-pod layout: exec into deploy/<fullname> -c exporter, and persistence is a way to keep /data', () => {
    const text = notes([])
    assert.deepEqual(execTargets(text), [['kollect', 'exporter']])
    assert.match(text, /set persistence\.enabled=true to keep it/)
    const d = only<Deployment>(render(), 'Deployment', 'kollect')
    assert.ok(d.spec.template.spec.containers.some((c) => c.name === 'exporter'))
  })

  test('the split layout: exec into the exporter Deployment; with standbys, into the Lease holder, and no persistence hint', () => {
    for (const layout of [['hooks.replicas=3'], ['hooks.replicas=3', 'exporter.replicas=2']]) {
      const text = notes(layout)
      const objects = render(layout)
      for (const [name, c] of execTargets(text)) {
        const d = only<Deployment>(objects, 'Deployment', name)
        assert.ok(d.spec.template.spec.containers.some((x) => x.name === c), `${layout.join(',')}: deploy/${name} has a container ${c}`)
      }
      assert.ok(!/deploy\/kollect -c/.test(text), `${layout.join(',')}: there is no Deployment kollect`)
    }
    assert.deepEqual(execTargets(notes(['hooks.replicas=3'])), [['kollect-exporter', 'exporter']])
    const standby = notes(['hooks.replicas=3', 'exporter.replicas=2'])
    assert.deepEqual(execTargets(standby), [], 'deploy/ picks any pod, a standby too')
    assert.match(standby, /kubectl exec -n kollect-system "\$\(kubectl get lease -n kollect-system kollect-exporter -o jsonpath='\{\.spec\.holderIdentity\}'\)" -c exporter/)
    assert.ok(!/persistence\.enabled=true/.test(standby), 'the chart refuses persistence with two exporters')
    assert.match(renderFails(['hooks.replicas=3', 'exporter.replicas=2', 'persistence.enabled=true']), /persistence\.enabled=false/)
  })

  test('Prometheus is admitted through networkPolicy.metrics.from, the value the chart reads', () => {
    for (const layout of [[], ['hooks.replicas=3']]) {
      const text = notes([...layout, 'serviceMonitor.enabled=true'])
      assert.ok(!text.includes('extraFrom'), text)
      assert.match(text, /networkPolicy\.metrics\.from/)
    }
    assert.match(notes(['serviceMonitor.enabled=true']), /admits Prometheus to it as networkPolicy\.metrics\.from says/)
    assert.match(notes(['serviceMonitor.enabled=true', 'networkPolicy.metrics.from=null']), /networkPolicy\.metrics\.from is empty/)
    assert.ok(!notes(['serviceMonitor.enabled=true', 'networkPolicy.enabled=false']).includes('networkPolicy.metrics'))
  })

  test('the hub, when enabled, is named with its metrics Service', () => {
    assert.match(notes(HUB), /Hub: +Deployment kollect-hub, fanning in east from stream KOLLECT; metrics on Service kollect-hub port 8080/)
    assert.ok(!notes([]).includes('Hub:'))
  })
})

test('helm uninstall keeps the hub\'s PersistentVolumeClaim, as it keeps the exporter\'s', () => {
  type Pvc = K8sObject & { spec: { resources: { requests: { storage: string } } } }
  const objects = render(['persistence.enabled=true', ...HUB])
  const pvcs = all<Pvc>(objects, 'PersistentVolumeClaim')
  assert.deepEqual(pvcs.map((p) => p.metadata.name).sort(), ['kollect-data', 'kollect-hub-data'])
  for (const p of pvcs) assert.equal(p.metadata.annotations?.['helm.sh/resource-policy'], 'keep', p.metadata.name)
  assert.deepEqual(all(render([...HUB, 'hub.persistence.enabled=false']), 'PersistentVolumeClaim'), [])
})

test('the Lease Role and its binding are rendered only where exporters elect (exporter.replicas > 1)', () => {
  const leaseObjects = (set: string[]) => render(set).filter((o) => ['Role', 'RoleBinding'].includes(o.kind) && o.metadata.name === 'kollect-leader').map((o) => o.kind)
  assert.deepEqual(leaseObjects([]), [], 'the single pod does not elect')
  assert.deepEqual(leaseObjects(['hooks.replicas=3']), [], 'one exporter does not elect')
  assert.deepEqual(leaseObjects(['hooks.replicas=3', 'tenantMode=true', 'watchNamespaces={team-a}']), [])
  assert.deepEqual(leaseObjects(['hooks.replicas=3', 'exporter.replicas=2']).sort(), ['Role', 'RoleBinding'])
  // What elects is what the Role is rendered for.
  for (const layout of [[], ['hooks.replicas=3'], ['hooks.replicas=3', 'exporter.replicas=2']]) {
    const elects = all<Deployment>(render(layout), 'Deployment')
      .some((d) => d.spec.template.spec.containers.some((c) => c.env?.some((e) => e.name === 'KOLLECT_LEADER_ELECTION' && e.value === 'true')))
    assert.equal(leaseObjects(layout).length > 0, elects, layout.join(','))
  }
})

describe('the exporter\'s liveness probe starts no second Node.js process', () => {
  /** The rendered probe, run as the kubelet would, against 127.0.0.1:<port> instead of 8081. */
  const runProbe = (command: string[], port: number): Promise<{ code: number | null; ms: number }> => new Promise((resolve) => {
    const started = performance.now()
    const argv = command.map((a) => a.replace('/127.0.0.1/8081', `/127.0.0.1/${port}`))
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: 'ignore' })
    child.on('close', (code) => resolve({ code, ms: performance.now() - started }))
  })
  const listen = async (server: { listen(port: number, host: string, cb: () => void): unknown; address(): unknown }) => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return (server.address() as AddressInfo).port
  }

  test('one pod: the exporter on loopback, so an exec probe, and it is bash over /dev/tcp', () => {
    for (const d of [only<Deployment>(render(), 'Deployment', 'kollect'), only<Deployment>(k8sObjects(parseDocs(readRepoFile('manifests/deployment.yaml'), 'manifests')), 'Deployment')]) {
      const probe = container(d, 'exporter').livenessProbe
      assert.equal(probe?.httpGet, undefined, 'the kubelet\'s httpGet goes to the pod IP, where the exporter does not listen')
      const command = probe?.exec?.command ?? []
      assert.equal(command[0], '/bin/bash', 'bash is essential in the image\'s Debian base (node:24-bookworm-slim)')
      assert.ok(!command.some((a) => /\bnode\b/.test(a)), command.join(' '))
      assert.match(command.join(' '), /\/dev\/tcp\/127\.0\.0\.1\/8081 .*GET \/healthz/)
    }
    assert.match(readRepoFile('Dockerfile'), /^FROM node:\d+-bookworm-slim$/m, 'the runtime image is Debian (bash, /dev/tcp)')
  })

  test('the probe passes on a live exporter API and fails when it is gone or answers an error, in milliseconds', async () => {
    const command = container(only<Deployment>(render(), 'Deployment', 'kollect'), 'exporter').livenessProbe?.exec?.command ?? []
    const exporter = new Exporter({ cluster: 'lab-west', createSink: async () => { throw new Error('no sinks in this test') } })
    const app = await buildExporterApp({
      exporter, auth: { mode: 'token', token: 'probe-test-token' }, bodyLimit: 1 << 20, reportBodyLimit: 1 << 20, maxJsonDepth: 64,
      logger: createLogger('silent', 'probe-test'), metrics: createMetrics('exporter'),
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = (app.server.address() as AddressInfo).port
    try {
      const live = await runProbe(command, port)
      assert.equal(live.code, 0, 'the token is not needed for /healthz')
      assert.ok(live.ms < 1000, `${live.ms} ms`)
    } finally {
      await app.close()
      await exporter.close()
    }
    assert.notEqual((await runProbe(command, port)).code, 0, 'nothing listens')
    const failing = createServer((_req, res) => { res.writeHead(503); res.end() })
    const failingPort = await listen(failing)
    try {
      assert.notEqual((await runProbe(command, failingPort)).code, 0, 'a 503')
    } finally {
      failing.close()
    }
  })

  test('split layout: the exporter listens on its pod IP, so the kubelet\'s own httpGet', () => {
    const e = container(only<Deployment>(render(['hooks.replicas=3']), 'Deployment', 'kollect-exporter'), 'exporter')
    assert.deepEqual(e.livenessProbe?.httpGet, { path: '/healthz', port: 'exporter' })
    assert.equal(e.livenessProbe?.exec, undefined)
  })
})

describe('GitOps: the hook token', () => {
  /** helm template's whole output, as Argo CD would compare it between syncs. */
  const template = (set: string[]) => {
    const r = runHelm(['template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, ...set.flatMap((v) => ['--set', v])])
    assert.equal(r.status, 0, r.stderr)
    return r.stdout
  }

  test('the generated token changes with every helm template render (what Argo CD would apply at each sync)', () => {
    const token = () => (only<K8sObject & { data: { token: string } }>(k8sObjects(parseDocs(template([]), 'render')), 'Secret', 'kollect-hook-token')).data.token
    assert.notEqual(token(), token())
  })

  test('with hookToken.existingSecret every render is the same, and values.yaml and the docs say so', () => {
    for (const layout of [[], ['hooks.replicas=3']]) {
      const set = [...layout, 'hookToken.existingSecret=kollect-hook-token']
      const first = template(set)
      assert.equal(template(set), first, layout.join(','))
      assert.deepEqual(all(k8sObjects(parseDocs(first, 'render')), 'Secret'), [], 'no Secret rendered')
    }
    const values = readRepoFile('charts/kollect/values.yaml')
    assert.match(values, /helm template[\s\S]{0,80}generates a new token on every render[\s\S]{0,200}use existingSecret there/)
    assert.match(values, /docs\/operations\.md#gitops-and-the-hook-token/)
    assert.match(readRepoFile('docs/operations.md'), /^### GitOps and the hook token$/m)
  })
})
