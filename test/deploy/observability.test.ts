// The chart's monitoring objects, rendered by a real helm (./helm.ts): the PrometheusRule's
// alerts and their runbooks, the Grafana dashboard ConfigMap, the NetworkPolicy rule that lets
// Prometheus scrape, and that every PromQL expression in them names only series the product
// serves. test/deploy/alerts.test.ts runs the rules through promtool.
import { before, test } from 'node:test'
import assert from 'node:assert/strict'
import { all, only, readRepoFile, type K8sObject, type NetworkPolicy, type Service } from './k8s.js'
import { HELM_SETUP_TIMEOUT_MS, NAMESPACE, assertLints, findHelm, render, renderFails } from './helm.js'
import { problems, registeredSeries } from './promql.js'
import { repositoryUrl } from '../support/repository.js'

before(findHelm, { timeout: HELM_SETUP_TIMEOUT_MS })

interface AlertRule {
  alert: string
  expr: string
  for: string
  labels: Record<string, string>
  annotations: Record<string, string>
}
type PrometheusRule = K8sObject & { spec: { groups: { name: string; rules: AlertRule[] }[] } }
type ConfigMap = K8sObject & { data: Record<string, string> }
interface Target { expr: string; datasource?: { uid?: string } }
interface Dashboard {
  uid: string
  templating: { list: { name: string; type: string; query: string | { query: string } }[] }
  panels: { type: string; title: string; datasource?: { uid?: string }; targets?: Target[] }[]
}

const ALERTS = ['KollectSinkStale', 'KollectExportsFailing', 'KollectHookErrors', 'KollectHookShedding', 'KollectTargetSyncsStopped', 'KollectExtractionErrors']
const rulesOf = (objects: K8sObject[]) => only<PrometheusRule>(objects, 'PrometheusRule').spec.groups.flatMap((g) => g.rules)
const ruleNamed = (rules: AlertRule[], name: string) => {
  const r = rules.find((x) => x.alert === name)
  assert.ok(r, `no alert ${name}`)
  return r
}

/** GitHub's (and VitePress's) anchor of each heading of docs/operations.md. */
function operationsAnchors(): Set<string> {
  const anchors = new Set<string>()
  for (const m of readRepoFile('docs/operations.md').matchAll(/^#{1,6} (.+)$/gm)) {
    anchors.add((m[1] as string).trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-'))
  }
  return anchors
}

test('the monitoring objects are opt-in, and helm lint --strict passes with them on and off', () => {
  const objects = render()
  assert.equal(all(objects, 'PrometheusRule').length, 0)
  assert.equal(all(objects, 'ConfigMap').filter((c) => c.metadata.labels?.grafana_dashboard).length, 0)
  assertLints([])
  assertLints(['serviceMonitor.enabled=true', 'prometheusRule.enabled=true', 'grafanaDashboard.enabled=true'])
  assertLints(['hooks.replicas=3', 'exporter.replicas=2', 'serviceMonitor.enabled=true', 'prometheusRule.enabled=true', 'grafanaDashboard.enabled=true'])
})

test('the PrometheusRule: six alerts with severity, summary, description and a runbook in docs/operations.md', () => {
  const objects = render(['prometheusRule.enabled=true', 'prometheusRule.labels.release=prom', 'prometheusRule.additionalLabels.team=platform', 'prometheusRule.runbookBaseUrl=https://docs.example/operations/'])
  const pr = only<PrometheusRule>(objects, 'PrometheusRule')
  assert.equal(pr.apiVersion, 'monitoring.coreos.com/v1')
  assert.equal(pr.metadata.namespace, NAMESPACE)
  assert.equal(pr.metadata.labels?.release, 'prom')
  const rules = rulesOf(objects)
  assert.deepEqual(rules.map((r) => r.alert), ALERTS)
  const anchors = operationsAnchors()
  assert.ok(anchors.has('alerts'), 'docs/operations.md has an Alerts section')
  for (const r of rules) {
    assert.ok(['critical', 'warning', 'info'].includes(r.labels.severity ?? ''), `${r.alert} severity`)
    assert.equal(r.labels.team, 'platform', `${r.alert} carries additionalLabels`)
    assert.ok((r.annotations.summary ?? '').length > 10 && (r.annotations.description ?? '').length > 20, `${r.alert} summary and description`)
    const url = r.annotations.runbook_url ?? ''
    assert.ok(url.startsWith('https://docs.example/operations#'), `${r.alert} runbook_url ${url}`)
    const anchor = url.slice(url.indexOf('#') + 1)
    assert.equal(anchor, r.alert.toLowerCase())
    assert.ok(anchors.has(anchor), `docs/operations.md has no heading for #${anchor}`)
    assert.match(r.for, /^\d+[smh]$/)
  }
  // The defaults of values.yaml: exports failing pages, extraction errors are a ticket.
  assert.equal(ruleNamed(rules, 'KollectExportsFailing').labels.severity, 'critical')
  assert.equal(ruleNamed(rules, 'KollectExtractionErrors').labels.severity, 'info')
})

test('the rules select the series the chart\'s ServiceMonitor produces, or the selector given', () => {
  const objects = render(['prometheusRule.enabled=true', 'serviceMonitor.enabled=true'])
  // The Prometheus Operator names the job after the Service it scraped.
  const svc = only<Service>(objects, 'Service')
  for (const r of rulesOf(objects)) {
    const selectors = [...r.expr.matchAll(/\{([^}]*)\}/g)].map((m) => m[1] as string)
    assert.ok(selectors.length > 0)
    for (const s of selectors) assert.ok(s.startsWith(`job="${svc.metadata.name}",namespace="${NAMESPACE}"`), `${r.alert}: {${s}}`)
  }
  for (const r of rulesOf(render(['prometheusRule.enabled=true', 'prometheusRule.selector=cluster="a"']))) {
    for (const m of r.expr.matchAll(/\{([^}]*)\}/g)) assert.ok((m[1] as string).startsWith('cluster="a"'), `${r.alert}: ${m[0]}`)
  }
  assert.match(renderFails(['prometheusRule.enabled=true', 'prometheusRule.selector={job="x"}']), /selector/)
})

test('per-alert values: thresholds, for, severity, and turning one off', () => {
  const rules = rulesOf(render(
    ['prometheusRule.enabled=true', 'prometheusRule.alerts.sinkStale.debounceSeconds=30', 'prometheusRule.alerts.sinkStale.for=20m', 'prometheusRule.alerts.exportsFailing.window=1h',
      'prometheusRule.alerts.hookShedding.severity=critical', 'prometheusRule.alerts.extractionErrors.enabled=false'],
    ['--set-json', 'prometheusRule.alerts.hookErrors.ratio=0.05', '--set-json', 'prometheusRule.alerts.sinkStale.factor=1.5'],
  ))
  assert.equal(rules.length, ALERTS.length - 1)
  assert.ok(!rules.some((r) => r.alert === 'KollectExtractionErrors'))
  const stale = ruleNamed(rules, 'KollectSinkStale')
  assert.match(stale.expr, /\) > 45\)/, 'factor × debounceSeconds')
  assert.equal(stale.for, '20m')
  assert.equal((ruleNamed(rules, 'KollectExportsFailing').expr.match(/\[1h\]/g) ?? []).length, 2)
  assert.match(ruleNamed(rules, 'KollectHookErrors').expr, / > 0\.05$/)
  assert.equal(ruleNamed(rules, 'KollectHookShedding').labels.severity, 'critical')
  assert.match(renderFails(['prometheusRule.enabled=true', 'prometheusRule.alerts.sinkStale.for=10 minutes']), /for/)
  assert.match(renderFails(['prometheusRule.enabled=true', 'prometheusRule.alerts.hookErrors.ratio=2']), /ratio/)
  assert.match(renderFails(['prometheusRule.alerts.nope.enabled=true']), /nope/)
})

test('the Grafana dashboard ConfigMap carries dashboards/kollect.json, labelled for the sidecar', () => {
  const objects = render(['grafanaDashboard.enabled=true', 'grafanaDashboard.annotations.grafana_folder=Kollect'])
  const cm = only<ConfigMap>(objects, 'ConfigMap', 'kollect-dashboard')
  assert.equal(cm.metadata.labels?.grafana_dashboard, '1')
  assert.equal(cm.metadata.annotations?.grafana_folder, 'Kollect')
  const file = readRepoFile('charts/kollect/dashboards/kollect.json')
  assert.equal(cm.data['kollect.json'], file.trimEnd())
  const dash = JSON.parse(file) as Dashboard
  const ds = dash.templating.list.find((v) => v.type === 'datasource')
  assert.deepEqual([ds?.name, ds?.query], ['datasource', 'prometheus'], 'a Prometheus datasource variable')
  const graphs = dash.panels.filter((p) => p.type !== 'row')
  assert.ok(graphs.length >= 10)
  for (const p of graphs) {
    assert.equal(p.datasource?.uid, '${datasource}', `panel ${p.title} uses the datasource variable`)
    assert.ok((p.targets ?? []).length > 0, `panel ${p.title} has queries`)
    for (const t of p.targets ?? []) assert.equal(t.datasource?.uid, '${datasource}', `panel ${p.title}`)
  }
  // What the issue asks the dashboard to show, by the series it reads.
  const exprs = graphs.flatMap((p) => (p.targets ?? []).map((t) => t.expr)).join('\n')
  for (const name of [
    'kollect_hook_duration_seconds_count', 'kollect_hook_duration_seconds_bucket', 'kollect_hook_shed_total', 'kollect_extraction_errors_total',
    'kollect_exports_total', 'kollect_sink_last_success_age_seconds', 'kollect_exports_pending', 'kollect_exporter_held_bytes',
    'kollect_exporter_process_resident_memory_bytes',
  ]) {
    assert.ok(exprs.includes(name), `the dashboard shows ${name}`)
  }
})

test('every PromQL expression of the rules and the dashboard names only series and labels the product serves', () => {
  const series = registeredSeries()
  // The checker itself: it must catch a wrong name, a wrong label and a wrong grouping.
  assert.deepEqual(problems('sum by (sink) (rate(kollect_exports_total{result="failure"}[5m]))', series), [])
  assert.equal(problems('rate(kollect_export_total[5m])', series).length, 1)
  assert.equal(problems('kollect_exports_pending{sink="a"}', series).length, 1)
  assert.equal(problems('max by (target) (kollect_sink_last_success_age_seconds)', series).length, 1)
  assert.deepEqual(problems('max by (exported_namespace) (kollect_namespace_held_bytes)', series), [])

  const exprs: [string, string][] = rulesOf(render(['prometheusRule.enabled=true'])).map((r) => [r.alert, r.expr])
  const dash = JSON.parse(readRepoFile('charts/kollect/dashboards/kollect.json')) as Dashboard
  for (const p of dash.panels) for (const t of p.targets ?? []) exprs.push([`panel ${p.title}`, t.expr])
  for (const v of dash.templating.list) if (v.type === 'query') exprs.push([`variable ${v.name}`, typeof v.query === 'string' ? v.query : v.query.query])
  assert.ok(exprs.length > 20)
  for (const [where, expr] of exprs) assert.deepEqual(problems(expr.replaceAll('$__rate_interval', '5m'), series), [], `${where}: ${expr}`)
})

test('with serviceMonitor.enabled the NetworkPolicy admits Prometheus to the metrics port', () => {
  const metacontroller = { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'metacontroller' } } }], ports: [{ protocol: 'TCP', port: 8080 }] }
  assert.deepEqual(only<NetworkPolicy>(render(), 'NetworkPolicy').spec.ingress, [metacontroller], 'nothing more without the ServiceMonitor')
  const np = only<NetworkPolicy>(render(['serviceMonitor.enabled=true']), 'NetworkPolicy')
  assert.deepEqual(np.spec.ingress, [metacontroller, {
    from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } }],
    ports: [{ protocol: 'TCP', port: 8080 }],
  }])
  const custom = only<NetworkPolicy>(render(['serviceMonitor.enabled=true', 'networkPolicy.metrics.from[0].namespaceSelector.matchLabels.team=observability']), 'NetworkPolicy')
  assert.deepEqual(custom.spec.ingress?.[1]?.from, [{ namespaceSelector: { matchLabels: { team: 'observability' } } }])
  const none = only<NetworkPolicy>(render(['serviceMonitor.enabled=true'], ['--set-json', 'networkPolicy.metrics.from=[]']), 'NetworkPolicy')
  assert.deepEqual(none.spec.ingress, [metacontroller])
  // Split layout: the rule is on the hooks pods' policy, the pods the ServiceMonitor scrapes.
  const split = render(['hooks.replicas=3', 'serviceMonitor.enabled=true'])
  const hooksPolicy = all<NetworkPolicy>(split, 'NetworkPolicy').find((n) => n.metadata.name === 'kollect-hooks')
  assert.equal(hooksPolicy?.spec.podSelector.matchLabels?.['app.kubernetes.io/component'], 'hooks')
  assert.equal(hooksPolicy?.spec.ingress?.length, 2)
})

test('runbook_url is an absolute link by default (Alertmanager and Slack do not resolve relative ones), and a relative base is refused', () => {
  for (const r of rulesOf(render(['prometheusRule.enabled=true']))) {
    assert.equal(r.annotations.runbook_url, `${repositoryUrl()}/blob/main/docs/operations.md#${r.alert.toLowerCase()}`, r.alert)
  }
  assert.match(renderFails(['prometheusRule.enabled=true', 'prometheusRule.runbookBaseUrl=docs/operations.md']), /runbookBaseUrl/)
})

test('hub.enabled adds the hub\'s alerts, on the hub\'s series, each with a runbook in docs/operations.md', () => {
  const HUB = ['hub.enabled=true', 'hub.nats.url=nats://hub-nats:4222', 'hub.clusters={east}', 'hub.sinks[0].name=fleet-db', 'hub.sinks[0].spec.type=postgres']
  const HUB_ALERTS = ['KollectHubClusterStale', 'KollectHubIncompleteSnapshots', 'KollectHubExportsFailing']
  const objects = render(['prometheusRule.enabled=true', 'serviceMonitor.enabled=true', ...HUB])
  const groups = only<PrometheusRule>(objects, 'PrometheusRule').spec.groups
  assert.deepEqual(groups.map((g) => g.name), ['kollect', 'kollect-hub'])
  const hubRules = groups[1]?.rules ?? []
  assert.deepEqual(hubRules.map((r) => r.alert), HUB_ALERTS)
  // The job the Prometheus Operator gives the series of the hub's Service.
  const hubSvc = only<Service>(objects, 'Service', 'kollect-hub')
  const anchors = operationsAnchors()
  const series = registeredSeries()
  for (const r of hubRules) {
    for (const m of r.expr.matchAll(/\{([^}]*)\}/g)) assert.ok((m[1] as string).startsWith(`job="${hubSvc.metadata.name}",namespace="${NAMESPACE}"`), `${r.alert}: ${m[0]}`)
    assert.ok(anchors.has(r.alert.toLowerCase()), `docs/operations.md has no heading for #${r.alert.toLowerCase()}`)
    assert.deepEqual(problems(r.expr, series), [], `${r.alert}: ${r.expr}`)
    assert.ok(['critical', 'warning', 'info'].includes(r.labels.severity ?? ''), `${r.alert} severity`)
  }
  assert.match(ruleNamed(hubRules, 'KollectHubClusterStale').expr, / > 86400$/)
  assert.equal(ruleNamed(hubRules, 'KollectHubExportsFailing').labels.severity, 'critical', 'a failing hub sink holds every cluster')
  // Without the hub, none; a custom selector; one alert off; all off renders no empty group.
  assert.deepEqual(only<PrometheusRule>(render(['prometheusRule.enabled=true']), 'PrometheusRule').spec.groups.map((g) => g.name), ['kollect'])
  for (const r of rulesOf(render(['prometheusRule.enabled=true', 'prometheusRule.hubSelector=cluster="hub"', ...HUB])).filter((x) => HUB_ALERTS.includes(x.alert))) {
    for (const m of r.expr.matchAll(/\{([^}]*)\}/g)) assert.ok((m[1] as string).startsWith('cluster="hub"'), `${r.alert}: ${m[0]}`)
  }
  const one = rulesOf(render(['prometheusRule.enabled=true', 'prometheusRule.alerts.hubClusterStale.enabled=false', ...HUB]))
  assert.deepEqual(one.filter((r) => HUB_ALERTS.includes(r.alert)).map((r) => r.alert), HUB_ALERTS.slice(1))
  const off = ['hubClusterStale', 'hubIncompleteSnapshots', 'hubExportsFailing'].map((a) => `prometheusRule.alerts.${a}.enabled=false`)
  assert.deepEqual(only<PrometheusRule>(render(['prometheusRule.enabled=true', ...off, ...HUB]), 'PrometheusRule').spec.groups.map((g) => g.name), ['kollect'])
  assertLints(['prometheusRule.enabled=true', 'serviceMonitor.enabled=true', ...HUB])
})
