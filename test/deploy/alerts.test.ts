// The chart's PrometheusRule through a real promtool: the rendered groups pass
// `promtool check rules`, and `promtool test rules` with test/golden/alerts.promtool.yaml proves
// each alert fires on the series that should fire it and stays silent on healthy ones.
//
// promtool: $PROMTOOL, else the pinned build in the tools cache, which scripts/install-promtool.sh
// builds from the Go module proxy when it is missing (long the first time). No promtool is a
// failure, not a skip.
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { only, repoRoot, type K8sObject } from './k8s.js'
import { HELM_SETUP_TIMEOUT_MS, findHelm, render } from './helm.js'
import { TOOL_BUILD_TIMEOUT_MS, ensureTool } from '../support/tools.js'

let promtool = ''
const dir = mkdtempSync(join(tmpdir(), 'kollect-alerts-'))

before(() => {
  findHelm()
  promtool = ensureTool('install-promtool.sh', 'PROMTOOL')
}, { timeout: HELM_SETUP_TIMEOUT_MS + TOOL_BUILD_TIMEOUT_MS })
after(() => rmSync(dir, { recursive: true, force: true }))

function runPromtool(args: string[]): string {
  const r = spawnSync(promtool, args, { cwd: dir, encoding: 'utf8', timeout: 120_000 })
  if (r.error) throw r.error
  assert.equal(r.status, 0, `promtool ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`)
  return r.stdout + r.stderr
}

const RUNBOOKS = 'https://runbooks.example/operations.md'

/** The groups of the PrometheusRule rendered with these --set arguments, as a rules file. */
function writeRules(set: string[]): string {
  // A fixed runbook base, so the golden file's expected annotations do not name the repository.
  const pr = only<K8sObject & { spec: { groups: unknown[] } }>(render(['prometheusRule.enabled=true', `prometheusRule.runbookBaseUrl=${RUNBOOKS}`, ...set]), 'PrometheusRule')
  const file = join(dir, 'rules.yaml')
  writeFileSync(file, stringify({ groups: pr.spec.groups }))
  return file
}

/** The least hub values the chart renders a hub with: its alerts come with it. */
const HUB = ['hub.enabled=true', 'hub.nats.url=nats://hub-nats:4222', 'hub.clusters={east,west}', 'hub.sinks[0].name=fleet-git', 'hub.sinks[0].spec.type=git', 'hub.sinks[0].spec.git.url=https://git.example.com/fleet.git']

test('promtool check rules accepts the rendered rules', () => {
  const out = runPromtool(['check', 'rules', writeRules([])])
  assert.match(out, /SUCCESS: 6 rules found/)
  assert.match(runPromtool(['check', 'rules', writeRules(HUB)]), /SUCCESS: 9 rules found/, 'with the hub, its three alerts')
})

test('promtool test rules: each alert fires on failing series and stays silent on healthy ones', () => {
  writeRules(HUB)
  copyFileSync(join(repoRoot, 'test', 'golden', 'alerts.promtool.yaml'), join(dir, 'alerts.promtool.yaml'))
  assert.match(runPromtool(['test', 'rules', 'alerts.promtool.yaml']), /SUCCESS/)
})

test('the unit tests would catch a rule that never fires', () => {
  // The same tests against rules whose thresholds nothing reaches: promtool must fail them,
  // or the passing run above proves nothing.
  writeRules(['prometheusRule.alerts.exportsFailing.window=1m', 'prometheusRule.alerts.sinkStale.debounceSeconds=100000',
    ...HUB, 'prometheusRule.alerts.hubExportsFailing.window=1m', 'prometheusRule.alerts.hubClusterStale.seconds=1000000'])
  copyFileSync(join(repoRoot, 'test', 'golden', 'alerts.promtool.yaml'), join(dir, 'alerts.promtool.yaml'))
  const r = spawnSync(promtool, ['test', 'rules', 'alerts.promtool.yaml'], { cwd: dir, encoding: 'utf8', timeout: 120_000 })
  assert.equal(r.status, 1, r.stdout + r.stderr)
  const out = r.stdout + r.stderr
  assert.match(out, /KollectSinkStale/)
  assert.match(out, /KollectExportsFailing/)
  assert.match(out, /KollectHubExportsFailing/)
  assert.match(out, /KollectHubClusterStale/)
})

test('the unit tests would catch a stale-sink alert that reads every sink\'s pending exports', () => {
  // The rule before issue 27 joined each sink's age with one global gauge: a sink with nothing
  // to write fired while another sink's export was pending.
  const file = writeRules(HUB)
  const text = readFileSync(file, 'utf8')
  const global = text.replace(/and on \(sink\) \(max by \(sink\) \(kollect_exports_pending_by_sink(\{[^}]*\})\) > 0\)/, 'and on () (max(kollect_exports_pending$1) > 0)')
  assert.notEqual(global, text)
  writeFileSync(file, global)
  copyFileSync(join(repoRoot, 'test', 'golden', 'alerts.promtool.yaml'), join(dir, 'alerts.promtool.yaml'))
  const r = spawnSync(promtool, ['test', 'rules', 'alerts.promtool.yaml'], { cwd: dir, encoding: 'utf8', timeout: 120_000 })
  assert.equal(r.status, 1, r.stdout + r.stderr)
  assert.match(r.stdout + r.stderr, /sink="team-a\/idle"/)
})
