// Whether a resource or an object is a core Secret, whose data and stringData never reach an
// expression. The strings come from a request, so they are data: they are compared after every
// normalisation a reader could apply (surrounding or invisible space, case, "core" for the core
// group's ""), and whatever could be read as a core Secret is taken for one.

function fold(text: string): string {
  return text.replace(/[\s\p{Cf}]/gu, '').toLowerCase()
}

/** "" and "core" both name the core group; a group that is not a string is no proof of another. */
function isCoreGroup(group: unknown): boolean {
  if (typeof group !== 'string') return true
  const g = fold(group)
  return g === '' || g === 'core'
}

function isSecretKind(kind: unknown): boolean {
  return typeof kind === 'string' && fold(kind) === 'secret'
}

/** A target's resource (or a scope's question about one): group and kind as the spec spells them. */
export function isCoreSecretResource(group: unknown, kind: unknown): boolean {
  return isSecretKind(kind) && isCoreGroup(group)
}

/** An object by its own apiVersion and kind; an apiVersion that is missing or not a string is the core group's. */
export function isCoreSecretObject(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false
  const { apiVersion, kind } = value as { apiVersion?: unknown; kind?: unknown }
  if (!isSecretKind(kind)) return false
  if (typeof apiVersion !== 'string') return true
  const slash = apiVersion.indexOf('/')
  return isCoreGroup(slash < 0 ? '' : apiVersion.slice(0, slash))
}
