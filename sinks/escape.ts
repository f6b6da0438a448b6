import path from 'node:path'

// Names come from users' CRs and from cluster objects: they are data, never syntax.

const SAFE_SEGMENT = /^[A-Za-z0-9_.-]$/

function percentEncode(ch: string): string {
  return [...Buffer.from(ch, 'utf8')].map((b) => '%' + b.toString(16).toUpperCase().padStart(2, '0')).join('')
}

/**
 * One path segment from a name: anything outside [A-Za-z0-9_.-] is percent-encoded, and the
 * segments "." and ".." (or an empty name) can never be produced. Injective, so two names
 * never share a file.
 */
export function escapePathSegment(name: string): string {
  // A lone "%" is never the escape of a non-empty name (a literal "%" becomes "%25").
  if (name === '') return '%'
  let out = ''
  for (const ch of name) out += SAFE_SEGMENT.test(ch) ? ch : percentEncode(ch)
  if (out === '.' || out === '..') return out.replace(/\./g, '%2E')
  return out
}

/** NATS subject token: no '.', '*', '>', whitespace or '%' survive unencoded. */
export function escapeSubjectToken(name: string): string {
  if (name === '') return '%'
  let out = ''
  for (const ch of name) out += /^[A-Za-z0-9_-]$/.test(ch) ? ch : percentEncode(ch)
  return out
}

/** A SQL identifier, always quoted, with embedded quotes doubled; NUL is refused. */
export function quoteIdent(name: string): string {
  if (name === '' || name.includes('\0')) throw new Error('invalid SQL identifier')
  return '"' + name.replace(/"/g, '""') + '"'
}

export interface TemplateValues {
  cluster: string
  namespace: string
  name: string
}

/**
 * Render a path template such as "inventory/{cluster}/{namespace}/{name}.json". Placeholder
 * values are escaped as single segments; the result must stay inside `root`.
 */
export function renderPath(root: string, template: string, values: TemplateValues): string {
  if (template.includes('\0')) throw new Error('path template contains NUL')
  // A line break in a path ends it early wherever paths travel as lines (git's --stdin-paths).
  if ([...template].some((ch) => ch < ' ' || ch === '\u007f')) throw new Error('path template contains a control character')
  const rendered = template.replace(/\{(cluster|namespace|name)\}/g, (_m, key: keyof TemplateValues) =>
    escapePathSegment(values[key]),
  )
  if (/\{[^}]*\}/.test(rendered)) throw new Error(`unknown placeholder in path template "${template}"`)
  if (path.isAbsolute(rendered)) throw new Error(`path template "${template}" must be relative`)
  const parts = rendered.split(/[\\/]/)
  if (parts.some((p) => p === '..')) throw new Error(`path template "${template}" must not contain ".."`)
  return resolveInside(root, rendered)
}

/** Join and verify that the result does not escape root. */
export function resolveInside(root: string, relative: string): string {
  const base = path.resolve(root)
  const full = path.resolve(base, relative)
  if (full !== base && !full.startsWith(base + path.sep)) throw new Error('path escapes its root')
  return full
}
