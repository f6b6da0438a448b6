// The chart's crds.install option (docs/upgrading.md): templates/crds.yaml renders the files of
// crds/ as release objects kept by `helm uninstall`, equal to them apart from the release's
// labels and that annotation, and only when asked.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse as parseYaml } from 'yaml'
import { k8sObjects, parseDocs, type K8sObject } from './k8s.js'
import { CHART, helmTemplate, templatedCrds } from '../support/helm.js'

interface Crd extends K8sObject {
  spec: unknown
}

const CRD_DIR = join(CHART, 'crds')
const files = readdirSync(CRD_DIR).filter((f) => f.endsWith('.yaml')).sort()
const sources = new Map(files.map((f) => {
  const crd = parseYaml(readFileSync(join(CRD_DIR, f), 'utf8')) as Crd
  return [crd.metadata.name, crd] as const
}))

const crdNames = (yaml: string, where: string) => k8sObjects(parseDocs(yaml, where)).filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name).sort()

test('crds.install=true: the templated CRDs are the crds/ files, kept on uninstall, labelled for the release', () => {
  const rendered = k8sObjects(parseDocs(templatedCrds(), 'templates/crds.yaml')) as Crd[]
  assert.deepEqual(rendered.map((c) => c.metadata.name).sort(), [...sources.keys()].sort(), 'one template per file in crds/')
  for (const crd of rendered) {
    const source = sources.get(crd.metadata.name)
    assert.ok(source, crd.metadata.name)
    assert.equal(crd.metadata.annotations?.['helm.sh/resource-policy'], 'keep', `${crd.metadata.name}: helm uninstall would delete every Kollect CR with it`)
    assert.equal(crd.metadata.labels?.['app.kubernetes.io/managed-by'], 'Helm')
    assert.equal(crd.metadata.labels?.['app.kubernetes.io/instance'], 'kollect')
    const { labels = {}, annotations = {}, ...meta } = crd.metadata
    const { labels: sourceLabels = {}, annotations: sourceAnnotations = {}, ...sourceMeta } = source.metadata
    assert.deepEqual(meta, sourceMeta, crd.metadata.name)
    assert.deepEqual({ ...labels, ...sourceLabels }, labels, `${crd.metadata.name} keeps the labels of its file`)
    assert.deepEqual(annotations, { ...sourceAnnotations, 'helm.sh/resource-policy': 'keep' }, crd.metadata.name)
    assert.deepEqual({ ...crd, metadata: source.metadata }, source, `${crd.metadata.name}: the schema and everything else as in crds/`)
  }
})

test('by default the CRDs come from crds/ only; with crds.install=true the templates add each once more', () => {
  const all = [...sources.keys()].sort()
  assert.deepEqual(crdNames(helmTemplate([]), 'default'), [], 'no CRD among the templates by default')
  assert.deepEqual(crdNames(helmTemplate(['--include-crds']), 'default --include-crds'), all, 'what helm install creates from crds/')
  // Both at once: why an install with crds.install=true takes --skip-crds (docs/upgrading.md).
  // Without it, crds/ creates the CRDs first and Helm refuses to adopt them for the templates.
  assert.deepEqual(crdNames(helmTemplate(['--set', 'crds.install=true']), 'crds.install'), all)
  assert.deepEqual(crdNames(helmTemplate(['--set', 'crds.install=true', '--include-crds']), 'crds.install --include-crds'), [...all, ...all].sort())
})

test('the values schema types crds', () => {
  for (const bad of ['crds.install=yes', 'crds.keep=true']) {
    assert.throws(() => helmTemplate(['--set', bad]), /values don't meet the specifications of the schema|additional properties/, bad)
  }
})
