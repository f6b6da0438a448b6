// The checks of a Git sink's review settings that need no I/O, shared by the sink hook (status
// InvalidConfig before anything is contacted) and the exporter (a permanent configuration error).
// Each answers with the problem alone; the caller names the field.

import type { GitReviewSettings } from './sink-spec.js'

/** Why `apiUrl` cannot be a forge's API base, or undefined. The SSRF guard checks its host apart. */
export function reviewApiUrlProblem(apiUrl: string): string | undefined {
  let parsed: URL
  try {
    parsed = new URL(apiUrl)
  } catch {
    return 'is not a URL'
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return `scheme "${parsed.protocol}" is not http or https`
  if (parsed.username || parsed.password) return 'must not carry credentials; put the token in the sink secret'
  if (parsed.search || parsed.hash) return 'must not carry a query or a fragment'
  return undefined
}

// Forge names are plain: letters, digits, "_", "." and "-". No "%" (an encoded "/" or ".."), no
// "\" (read as "/" by URL parsers), and no segment of dots alone: a URL parser resolves "." and
// "..", moving the forge call to another API path.
const SEGMENT_CHARS = /^[A-Za-z0-9_.-]+$/
const DOTS = /^\.+$/

/**
 * Why `project` cannot name a repository on `provider`, or undefined: owner/repo on Gitea and
 * GitHub; a numeric id or group/…/project on GitLab. Checked segment by segment.
 */
export function reviewProjectProblem(provider: GitReviewSettings['provider'], project: string): string | undefined {
  const shape = provider === 'gitlab' ? "the project's numeric id or its full path (group/project)" : 'owner/repo'
  const problem = (why: string) => `"${project.slice(0, 200)}" must be ${shape}: ${why}`
  if (provider === 'gitlab' && /^[0-9]+$/.test(project)) return undefined
  const segments = project.split('/')
  if (segments.length < 2 || (provider !== 'gitlab' && segments.length !== 2)) return problem(`${segments.length} segment(s)`)
  for (const segment of segments) {
    if (segment === '') return problem('a segment is empty')
    if (DOTS.test(segment)) return problem(`a segment is "${segment.slice(0, 8)}"`)
    if (!SEGMENT_CHARS.test(segment)) return problem('a segment has characters other than letters, digits, "_", "." and "-"')
  }
  return undefined
}
