// Which metrics and labels a PromQL expression (or a Grafana label_values query) names, checked
// against the families the product registers. A light lexer, not a PromQL parser: enough for
// the chart's rules and dashboard, and strict about anything it does not recognise.
import { createHubMetrics } from '../../hub/metrics.js'
import { createMetrics } from '../../server/process/metrics.js'

/** Labels Prometheus adds to every series scraped through the chart's ServiceMonitor. */
const TARGET_LABELS = ['namespace', 'job', 'pod', 'service', 'instance', 'container', 'endpoint']

const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right'])

/** Every series name the hooks, exporter and hub processes serve, with its labels. */
export function registeredSeries(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>()
  // The exporter's own process metrics carry the kollect_exporter_ prefix.
  for (const registry of [createMetrics('all').registry, createMetrics('exporter').registry, createHubMetrics().registry]) {
    for (const m of registry.getMetricsAsArray() as unknown as { name: string; type: string; labelNames?: string[] }[]) {
      const labels = m.labelNames ?? []
      if (String(m.type) === 'histogram') {
        out.set(`${m.name}_bucket`, new Set([...labels, 'le']))
        out.set(`${m.name}_count`, new Set(labels))
        out.set(`${m.name}_sum`, new Set(labels))
      } else {
        out.set(m.name, new Set(labels))
      }
    }
  }
  return out
}

/**
 * The problems of one expression: a name that is no registered series, a matcher or grouping
 * label the series do not have. A scraped label that clashes with a target label arrives as
 * exported_<label> (the ServiceMonitor does not honour labels).
 */
export function problems(expr: string, series: Map<string, Set<string>>): string[] {
  const out: string[] = []
  let text = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\[[^\]]*\]/g, '')
  const groupings: string[] = []
  const lv = /^label_values\((.*),\s*([a-zA-Z_]\w*)\)$/.exec(text.trim())
  if (lv) {
    text = lv[1] as string
    groupings.push(lv[2] as string)
  }
  text = text.replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, (_, labels: string) => {
    groupings.push(...labels.split(',').map((l) => l.trim()).filter(Boolean))
    return ' '
  })
  const used: string[] = []
  text = text.replace(/([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}/g, (_, name: string | undefined, matchers: string) => {
    if (!name) {
      out.push(`a selector without a metric name: {${matchers}}`)
      return ' '
    }
    used.push(name)
    for (const m of matchers.split(',').filter((s) => s.trim())) {
      const label = /^\s*([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)/.exec(m)?.[1]
      if (!label) out.push(`${name}: unreadable matcher ${m}`)
      else if (!TARGET_LABELS.includes(label) && !series.get(name)?.has(label)) out.push(`${name} has no label ${label}`)
    }
    return ' '
  })
  text = text.replace(/\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b/g, ' ')
  for (const m of text.matchAll(/[a-zA-Z_:][\w:]*/g)) {
    const word = m[0]
    const after = text.slice((m.index ?? 0) + word.length).trimStart()
    if (after.startsWith('(') || KEYWORDS.has(word)) continue
    used.push(word)
  }
  const labels = new Set(TARGET_LABELS)
  for (const name of used) {
    const known = series.get(name)
    if (!known) out.push(`${name} is not a series the product serves`)
    for (const l of known ?? []) labels.add(TARGET_LABELS.includes(l) ? `exported_${l}` : l)
  }
  for (const g of groupings) if (!labels.has(g)) out.push(`grouping label ${g} is on none of ${used.join(', ')}`)
  if (used.length === 0) out.push('names no series')
  return out
}
