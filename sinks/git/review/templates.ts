// Review branch, title and description templates: `{name}` placeholders replaced by values given as
// data. Nothing in a template is evaluated, and a placeholder the template's field does not offer
// is a configuration error, found when the settings are read rather than at the first export.

const PLACEHOLDER = /\{([^{}]*)\}/g

/** Why template cannot be rendered with the placeholders `allowed`, or undefined. */
export function templateProblem(template: string, allowed: readonly string[]): string | undefined {
  for (const [, name] of template.matchAll(PLACEHOLDER)) {
    if (!allowed.includes(name as string)) {
      return `unknown placeholder {${name as string}} (known: ${allowed.map((a) => `{${a}}`).join(', ')})`
    }
  }
  // Braces left once the placeholders are gone: an unclosed "{" or a stray "}".
  if (/[{}]/.test(template.replace(PLACEHOLDER, ''))) return 'unbalanced "{" or "}"'
  return undefined
}

/** template with every placeholder replaced; the caller has checked it with templateProblem. */
export function renderTemplate(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(PLACEHOLDER, (whole, name: string) => (Object.hasOwn(values, name) ? (values[name] as string) : whole))
}
