// The chart as a platform team runs it (issue 27, "Chart"), rendered by a real helm (./helm.ts):
// the image (none by default in the source chart, registry, digest, the release's default), the
// extension points cert-manager's and kube-state-metrics' users expect, a private CA for TLS
// sinks, NOTES.txt in both layouts, what `helm uninstall` keeps, the Lease Role only where
// something elects, a liveness probe that starts no second Node process, and the hook token
// under GitOps.
import { before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { all, k8sObjects, parseDocs, readRepoFile, type Deployment } from './k8s.js'
import { CHART, HELM_SETUP_TIMEOUT_MS, KUBE_VERSION, NAMESPACE, RELEASE, findHelm, render, renderFails } from './helm.js'

before(findHelm, { timeout: HELM_SETUP_TIMEOUT_MS })

/** The least hub values the chart renders a hub with. */
const HUB = ['hub.enabled=true', 'hub.nats.url=nats://hub-nats:4222', 'hub.clusters={east}', 'hub.sinks[0].name=fleet-db', 'hub.sinks[0].spec.type=postgres']
const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`

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
