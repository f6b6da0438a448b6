import { stringify as toYaml } from 'yaml'
import type { Item, JsonValue } from '../api/types.js'

export const OUTPUTS = ['table', 'json', 'yaml'] as const
export type Output = (typeof OUTPUTS)[number]

const CELL_WIDTH = 40
/** Shown for an optional attribute the item leaves out. */
const ABSENT = '<none>'

/** A value as compact JSON, cut to `width` characters (the last one an ellipsis). */
function cell(value: JsonValue | undefined, width = CELL_WIDTH): string {
  if (value === undefined) return ABSENT
  const text = JSON.stringify(value)
  return text.length <= width ? text : text.slice(0, width - 1) + '…'
}

/** Left-aligned columns separated by three spaces, as kubectl prints them. */
function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] as number))).join('   ').trimEnd()
  return [line(headers), ...rows.map(line)].join('\n') + '\n'
}

/** Items in the chosen format: a table of attributes, or the items themselves as JSON or YAML. */
export function formatItems(items: Item[], attributeNames: string[], output: Output): string {
  switch (output) {
    case 'json':
      return JSON.stringify(items, null, 2) + '\n'
    case 'yaml':
      return items.length === 0 ? '[]\n' : toYaml(items, { lineWidth: 0 })
    case 'table': {
      // Attribute names stay as written: they are the keys of the exported items.
      const headers = ['NAMESPACE', 'NAME', ...attributeNames]
      const rows = items.map((item) => [
        item.namespace || ABSENT, item.name, ...attributeNames.map((n) => cell(Object.hasOwn(item.attributes, n) ? item.attributes[n] : undefined)),
      ])
      return table(headers, rows)
    }
  }
}
