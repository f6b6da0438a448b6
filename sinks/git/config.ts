import type { KollectSinkSpec } from '../../api/types.js'
import { configError, secretsFromCredentials, type Secrets, type SinkLabel } from '../errors.js'
import type { Credentials } from '../sink.js'

export type GitLayout = 'document' | 'perResource'

export interface GitAuth {
  /** Config key and value that send the credentials, scoped to the remote's origin. */
  configKey: string
  configValue: string
}

export interface GitSettings {
  /** Undefined: a local repository in the data directory, the embedded default. */
  url: string | undefined
  branch: string
  pathTemplate: string
  layout: GitLayout
  author: { name: string; email: string }
  auth: GitAuth | undefined
  /** Every form in which the credentials could show up in git's output. */
  secrets: Secrets
}

export const DEFAULT_GIT_PATH = 'inventory/{cluster}/{namespace}/{name}.json'

export function resolveGitSettings(spec: KollectSinkSpec, credentials: Credentials, sink: SinkLabel): GitSettings {
  const invalid = (problem: string): never => {
    throw configError(sink, problem)
  }
  const git = spec.git ?? {}
  const url = git.url?.trim() || undefined
  const urlProblem = url === undefined ? undefined : checkUrl(url)
  if (urlProblem) invalid(urlProblem)
  const branch = git.branch || 'main'
  if (!isValidBranch(branch)) invalid(`branch "${branch}" is not a valid branch name`)
  const layout = git.layout ?? 'document'
  if (layout !== 'document' && layout !== 'perResource') {
    invalid(`layout must be "document" or "perResource", not "${String(layout)}"`)
  }
  const auth = url === undefined ? undefined : resolveAuth(url, credentials)
  return {
    url,
    branch,
    pathTemplate: git.path || DEFAULT_GIT_PATH,
    layout,
    author: {
      name: identityPart(git.author?.name) || 'kollect',
      email: identityPart(git.author?.email) || 'kollect@kollect.dev',
    },
    auth: auth?.auth,
    secrets: secretsFromCredentials(credentials, { values: auth?.encoded ?? [] }),
  }
}

/**
 * HTTP basic credentials as an extra header for the remote's origin only, so a redirect to
 * another host never receives them. A token alone uses the user name GitHub and GitLab accept.
 */
function resolveAuth(url: string, credentials: Credentials): { auth: GitAuth; encoded: string[] } | undefined {
  const secret = credentials.token || credentials.password
  if (!secret) return undefined
  const user = credentials.username || (credentials.token ? 'x-access-token' : '')
  let origin: string
  try {
    const parsed = new URL(url)
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return undefined
    origin = `${parsed.protocol}//${parsed.host}/`
  } catch {
    return undefined
  }
  const basic = Buffer.from(`${user}:${secret}`, 'utf8').toString('base64')
  return {
    auth: { configKey: `http.${origin}.extraHeader`, configValue: `Authorization: Basic ${basic}` },
    encoded: [basic, Buffer.from(secret, 'utf8').toString('base64')],
  }
}

const URL_SCHEMES = new Set(['http:', 'https:', 'ssh:', 'git:', 'file:'])

/** Why url is not acceptable, or undefined. */
function checkUrl(url: string): string | undefined {
  const notARemote = 'url is not a Git remote URL'
  // A leading "-" would be read as an option, and "<helper>::" runs a remote helper program.
  if (url.startsWith('-') || /^[A-Za-z][A-Za-z0-9+.-]*::/.test(url) || /[\0\r\n]/.test(url)) return notARemote
  if (url.startsWith('/')) return undefined
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(url)) {
    let parsed: URL
    try {
      parsed = new URL(url)
    } catch {
      return notARemote
    }
    if (!URL_SCHEMES.has(parsed.protocol)) return `url scheme "${parsed.protocol}" is not supported`
    if ((parsed.protocol === 'http:' || parsed.protocol === 'https:') && (parsed.username || parsed.password)) {
      // They would be stored in .git/config and echoed in git's messages: use the secretRef.
      return 'url must not carry credentials; put them in the sink secret'
    }
    return undefined
  }
  // scp-like: [user@]host:path
  return /^([^@/:\s]+@)?[^/:\s]+:\S*$/.test(url) ? undefined : notARemote
}

function isValidBranch(branch: string): boolean {
  return (
    /^[A-Za-z0-9._/-]+$/.test(branch) &&
    !branch.startsWith('-') &&
    !branch.endsWith('.lock') &&
    !branch.includes('..') &&
    !branch.includes('//') &&
    branch.split('/').every((part) => part !== '' && !part.startsWith('.') && !part.endsWith('.'))
  )
}

function identityPart(value: string | undefined): string {
  return (value ?? '').replace(/[<>\0\r\n]/g, '').trim()
}
