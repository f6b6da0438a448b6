import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { parse } from 'yaml'
import { crdReferencePath, renderCrdReference, statusTypesPath } from '../../cli/crd-docs.js'
import { renderStatusTypes } from '../../cli/crd-types.js'
import { ERRORS } from '../../server/protocol/errors.js'
import { createHubMetrics } from '../../hub/metrics.js'
import { createMetrics } from '../../server/process/metrics.js'
import { ROOT } from '../support/metacontroller.js'

// The docs that are generated or that name things the code defines stay in step with it.

const operations = readFileSync(path.join(ROOT, 'docs', 'operations.md'), 'utf8')
const operationLines = operations.split('\n')

test('docs/crd-reference.md is what cli/gen-crd-docs.ts renders from the CRDs (run npm run docs)', () => {
  const checkedIn = readFileSync(crdReferencePath(), 'utf8')
  assert.equal(checkedIn, renderCrdReference(), 'docs/crd-reference.md is out of date: run `npm run docs` and commit the result')
})

test('api/status.generated.ts is what cli/crd-types.ts renders from the CRDs (run npm run docs)', () => {
  const checkedIn = readFileSync(statusTypesPath(), 'utf8')
  assert.equal(checkedIn, renderStatusTypes(), 'api/status.generated.ts is out of date: run `npm run docs` and commit the result')
})

test('every HTTP error code has a row in docs/operations.md, with its status', () => {
  for (const [code, { status }] of Object.entries(ERRORS)) {
    const line = operationLines.find((l) => l.startsWith(`| \`${code}\` |`))
    assert.ok(line, `${code} has no row in the HTTP error table of docs/operations.md`)
    assert.ok(line.includes(`| ${status} |`), `docs/operations.md gives ${code} without its status ${status}: ${line}`)
  }
})

test('every kollect_* metric has a row in docs/operations.md, with its labels', async () => {
  const { registry } = createMetrics()
  const hubRegistry = createHubMetrics().registry
  const metrics = [...registry.getMetricsAsArray(), ...hubRegistry.getMetricsAsArray()] as unknown as { name: string; labelNames?: string[] }[]
  const processFamily = /^kollect_(exporter_|hub_)?(process|nodejs)_/
  const own = metrics.filter((m) => m.name.startsWith('kollect_') && !processFamily.test(m.name))
  assert.ok(own.length > 0)
  for (const m of own) {
    const line = operationLines.find((l) => l.startsWith(`| \`${m.name}\` |`))
    assert.ok(line, `metric ${m.name} has no row in the metrics table of docs/operations.md`)
    for (const label of m.labelNames ?? []) assert.ok(line.includes(`\`${label}\``), `docs/operations.md gives ${m.name} without its label ${label}`)
  }
  // The Node.js process metrics are documented as a family.
  assert.ok(metrics.some((m) => m.name.startsWith('kollect_process_')))
  assert.ok(operations.includes('`kollect_process_'), 'the kollect_process_* family is not documented')
})

test('every condition reason the hooks set is in docs/operations.md', () => {
  // Reasons are the CamelCase literals on the lines that build conditions or problems.
  const types = new Set(['Ready', 'Synced', 'Degraded', 'True', 'False', 'Unknown'])
  const reasons = new Set<string>()
  const dir = path.join(ROOT, 'hooks')
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    for (const line of readFileSync(path.join(dir, file), 'utf8').split('\n')) {
      if (!/condition\(|fail\(|reason:/.test(line)) continue
      for (const m of line.matchAll(/'([A-Z][A-Za-z]+)'/g)) if (!types.has(m[1] as string)) reasons.add(m[1] as string)
    }
  }
  assert.ok(reasons.has('Extracted') && reasons.has('SinkFailing'), `the reason scan found too little: ${[...reasons].join(', ')}`)
  for (const reason of reasons) assert.ok(operations.includes(`\`${reason}\``), `condition reason ${reason} is not documented in docs/operations.md`)
})

test('every setting server/process/config.ts reads has a row in docs/operations.md', () => {
  const source = readFileSync(path.join(ROOT, 'server', 'process', 'config.ts'), 'utf8')
  const names = new Set([...source.matchAll(/'([A-Z][A-Z0-9_]{2,})'/g)].map((m) => m[1] as string))
  assert.ok(names.has('PORT') && names.has('KOLLECT_HOOK_BODY_LIMIT'), `the settings scan found too little: ${[...names].join(', ')}`)
  for (const name of names) {
    assert.ok(operationLines.some((l) => l.startsWith(`| \`${name}\` |`)), `setting ${name} has no row in the settings table of docs/operations.md`)
  }
})

test('every Markdown file a docs page names is in the repository, so no page sends readers elsewhere', () => {
  const docs = path.join(ROOT, 'docs')
  const adrs = readdirSync(path.join(docs, 'adr')).map((f) => `adr/${f}`)
  const pages = [...readdirSync(docs), ...adrs].filter((f) => f.endsWith('.md'))
  for (const page of pages) {
    const dir = path.dirname(path.join(docs, page))
    for (const [name = ''] of readFileSync(path.join(docs, page), 'utf8').matchAll(/[\w./-]+\.md\b/g)) {
      const found = [dir, docs, ROOT].some((base) => existsSync(path.join(base, name)))
      assert.ok(found, `docs/${page} names ${name}, which is not in the repository`)
    }
  }
})

test('docs/upgrading.md applies the CompositeControllers as the kustomization does: with the Deployment', () => {
  const file = path.join(ROOT, 'manifests', 'kustomization.yaml')
  const { resources } = parse(readFileSync(file, 'utf8')) as { resources: string[] }
  const both = resources.includes('../compositecontrollers') && resources.includes('deployment.yaml')
  assert.ok(both, `manifests/kustomization.yaml: ${resources.join(', ')}`)
  const upgrading = readFileSync(path.join(ROOT, 'docs', 'upgrading.md'), 'utf8').replace(/\s+/g, ' ')
  const together = /`kubectl apply -k manifests` applies them \(`compositecontrollers\/`\) together with the Deployment/
  assert.match(upgrading, together)
})

/** A layout's entry for a folder: its line and the indented lines continuing it. */
function layoutEntry(layout: string, folder: string): string {
  const lines = layout.split('\n')
  const start = lines.findIndex((l) => l.startsWith(`${folder}/`))
  if (start < 0) return ''
  const end = lines.findIndex((l, i) => i > start && !l.startsWith(' '))
  return lines.slice(start, end < 0 ? undefined : end).join(' ')
}

test("the README's and CONTRIBUTING.md's layouts list every top-level folder, every sink and every server room", () => {
  const dirs = (dir: string): string[] =>
    readdirSync(path.join(ROOT, dir), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name)
  const topLevel = dirs('.').filter((d) => !d.startsWith('.') && d !== 'node_modules' && d !== 'dist')
  for (const file of ['README.md', 'CONTRIBUTING.md']) {
    const layout = /^## Layout\n\n```\n([\s\S]*?)```/m.exec(readFileSync(path.join(ROOT, file), 'utf8'))?.[1] ?? ''
    for (const d of topLevel) assert.match(layout, new RegExp(`(^|, )${d}/`, 'm'), `${file}'s layout lacks ${d}/`)
    const sinks = layoutEntry(layout, 'sinks')
    for (const sink of dirs('sinks')) {
      assert.match(sinks, new RegExp(`\\b${sink}\\b`), `${file}'s layout lacks the ${sink} sink`)
    }
    const server = layoutEntry(layout, 'server')
    for (const room of dirs('server')) assert.ok(server.includes(` ${room}/`), `${file}'s layout lacks server/${room}/`)
  }
})
