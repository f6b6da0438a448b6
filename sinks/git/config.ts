import { formatDuration, parseDuration } from '../../api/duration.js'
import { reviewApiUrlProblem, reviewProjectProblem } from '../../api/review-checks.js'
import type { KollectSinkSpec } from '../../api/types.js'
import type { Endpoint } from '../descriptor.js'
import { configError, secretsFromCredentials, type Secrets, type SinkLabel } from '../errors.js'
import type { Credentials } from '../sink.js'
import type { ReviewText } from './review/provider.js'
import { renderTemplate, templateProblem } from './review/templates.js'
import { DEFAULT_SHARDS, MAX_SHARDS } from './shards.js'

export type GitLayout = 'document' | 'perResource' | 'sharded'

interface GitAuth {
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
  /** sharded: how many files share an inventory's items. */
  shards: number
  author: { name: string; email: string }
  auth: GitAuth | undefined
  /** Every form in which the credentials could show up in git's output. */
  secrets: Secrets
  /** Review mode: exports are proposed to `branch` (the target) as merge or pull requests. */
  review: ReviewSettings | undefined
}

export const DEFAULT_GIT_PATH = 'inventory/{cluster}/{namespace}/{name}.json'

/** The remote, and the forge API, which receives the token: both guarded before the sink is built. */
export function gitEndpoints(spec: KollectSinkSpec): Endpoint[] {
  const git = spec.git
  const review = git?.review?.apiUrl ? [{ url: git.review.apiUrl.trim(), what: 'review.apiUrl' }] : []
  return [...(git?.url ? [{ url: git.url }] : []), ...review]
}

export function resolveGitSettings(spec: KollectSinkSpec, credentials: Credentials, sink: SinkLabel): GitSettings {
  const invalid = (problem: string): never => {
    throw configError(sink, problem)
  }
  const git = spec.git ?? {}
  const review = resolveReviewSettings(spec, credentials, sink)
  const url = git.url?.trim() || undefined
  const urlProblem = url === undefined ? undefined : checkUrl(url)
  if (urlProblem) invalid(urlProblem)
  // In review mode the branch the sink reads and bases its proposals on is the review's target.
  const branch = review?.targetBranch ?? (git.branch || 'main')
  if (!isValidBranch(branch)) invalid(`branch "${branch}" is not a valid branch name`)
  const layout = git.layout ?? 'document'
  if (layout !== 'document' && layout !== 'perResource' && layout !== 'sharded') {
    invalid(`layout must be "document", "perResource" or "sharded", not "${String(layout)}"`)
  }
  const shards = git.shards ?? DEFAULT_SHARDS
  if (!Number.isSafeInteger(shards) || shards < 1 || shards > MAX_SHARDS) {
    invalid(`shards must be a whole number from 1 to ${MAX_SHARDS}, not ${String(shards)}`)
  }
  const auth = url === undefined ? undefined : resolveAuth(url, credentials)
  return {
    url,
    branch,
    pathTemplate: git.path || DEFAULT_GIT_PATH,
    layout,
    shards,
    author: {
      name: identityPart(git.author?.name) || 'kollect',
      email: identityPart(git.author?.email) || 'kollect@kollect.dev',
    },
    auth: auth?.auth,
    secrets: secretsFromCredentials(credentials, { values: auth?.encoded ?? [] }),
    review,
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

export interface ReviewSettings {
  provider: 'gitlab' | 'gitea' | 'github'
  apiUrl: string
  project: string
  /** The sink secret's `token`, as for the git remote. */
  token: string
  targetBranch: string
  branchTemplate: string
  titleTemplate: string
  descriptionTemplate: string
  autoMerge: 'never' | 'whenChecksPass'
  /** How long an open request waits before the sink asks the forge again. */
  pollMs: number
}

/** What names the review branch and title; the description adds the export's counts and checksum. */
export interface ReviewSubject {
  cluster: string
  namespace: string
  name: string
}

export interface ReviewExport extends ReviewSubject {
  added: number
  changed: number
  removed: number
  checksum: string
}

const NAME_PLACEHOLDERS = ['cluster', 'namespace', 'name'] as const
const DESCRIPTION_PLACEHOLDERS = [...NAME_PLACEHOLDERS, 'added', 'changed', 'removed', 'checksum'] as const

const DEFAULT_REVIEW_POLL_MS = 60_000
const MIN_REVIEW_POLL_MS = 5_000
const DEFAULT_REVIEW_BRANCH = 'kollect/{namespace}/{name}'
const DEFAULT_REVIEW_TITLE = 'kollect: {namespace}/{name} on {cluster}'
export const DEFAULT_REVIEW_DESCRIPTION = 'Inventory {namespace}/{name} on cluster {cluster}: +{added} ~{changed} -{removed}\n\nSnapshot checksum: {checksum}'

/** The sink's `git.review`, checked and with defaults; undefined when review mode is off. */
export function resolveReviewSettings(spec: KollectSinkSpec, credentials: Credentials, sink: SinkLabel): ReviewSettings | undefined {
  const review = spec.git?.review
  if (review === undefined) return undefined
  const invalid = (problem: string): never => {
    throw configError(sink, `review: ${problem}`)
  }
  if (!spec.git?.url?.trim()) invalid('review mode needs git.url, the remote the review branch is pushed to')
  const provider = review.provider
  if (provider !== 'gitlab' && provider !== 'gitea' && provider !== 'github') invalid(`provider must be gitlab, gitea or github, not "${String(provider)}"`)
  const apiUrl = (review.apiUrl ?? '').trim()
  const apiProblem = reviewApiUrlProblem(apiUrl)
  if (apiProblem) invalid(`apiUrl ${apiProblem}`)
  const project = (review.project ?? '').trim()
  const projectProblem = reviewProjectProblem(provider, project)
  if (projectProblem) invalid(`project ${projectProblem}`)
  const targetBranch = review.targetBranch || spec.git?.branch || 'main'
  if (!isValidBranch(targetBranch)) invalid(`targetBranch "${targetBranch}" is not a valid branch name`)
  const settings: ReviewSettings = {
    provider,
    apiUrl,
    project,
    token: credentials.token ?? '',
    targetBranch,
    branchTemplate: review.branchTemplate || DEFAULT_REVIEW_BRANCH,
    titleTemplate: review.titleTemplate || DEFAULT_REVIEW_TITLE,
    descriptionTemplate: review.descriptionTemplate || DEFAULT_REVIEW_DESCRIPTION,
    autoMerge: review.autoMerge ?? 'never',
    pollMs: DEFAULT_REVIEW_POLL_MS,
  }
  if (review.pollInterval !== undefined) {
    const poll = parseDuration(review.pollInterval)
    if (poll === null || poll < MIN_REVIEW_POLL_MS) {
      invalid(`pollInterval "${review.pollInterval.slice(0, 64)}" must be a duration of at least ${formatDuration(MIN_REVIEW_POLL_MS)}`)
    }
    settings.pollMs = poll as number
  }
  if (settings.autoMerge !== 'never' && settings.autoMerge !== 'whenChecksPass') {
    invalid(`autoMerge must be never or whenChecksPass, not "${String(settings.autoMerge)}"`)
  }
  for (const [field, template, allowed] of [
    ['branchTemplate', settings.branchTemplate, NAME_PLACEHOLDERS],
    ['titleTemplate', settings.titleTemplate, NAME_PLACEHOLDERS],
    ['descriptionTemplate', settings.descriptionTemplate, DESCRIPTION_PLACEHOLDERS],
  ] as const) {
    const problem = templateProblem(template, allowed)
    if (problem) invalid(`${field}: ${problem}`)
  }
  // Names that are DNS labels cannot repair a template that is broken on its own ("a..b", "x.lock").
  reviewBranch(settings, { cluster: 'cluster', namespace: 'namespace', name: 'name' }, sink)
  if (!settings.token) invalid('the sink secret has no token key, which the forge API needs')
  return settings
}

/** The review branch of one inventory: a valid branch name, never the target branch itself. */
export function reviewBranch(settings: ReviewSettings, subject: ReviewSubject, sink: SinkLabel): string {
  const branch = renderTemplate(settings.branchTemplate, { ...subject })
  if (!isValidBranch(branch)) throw configError(sink, `review: branchTemplate gives "${branch}", which is not a valid branch name`)
  if (branch === settings.targetBranch) throw configError(sink, `review: branchTemplate gives the target branch "${branch}" itself`)
  return branch
}

export function reviewText(settings: ReviewSettings, exp: ReviewExport): ReviewText {
  const names = { cluster: exp.cluster, namespace: exp.namespace, name: exp.name }
  return {
    title: renderTemplate(settings.titleTemplate, names),
    description: renderTemplate(settings.descriptionTemplate, {
      ...names, added: String(exp.added), changed: String(exp.changed), removed: String(exp.removed), checksum: exp.checksum,
    }),
  }
}
