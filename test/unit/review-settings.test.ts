import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { specSchema, validateSpec } from '../../api/crd-schemas.js'
import type { GitReviewSettings, KollectSinkSpec } from '../../api/types.js'
import { ruleFindings } from '../../cli/crd-rules.js'
import { checkEndpoint } from '../../server/guards/ssrf.js'
import {
  DEFAULT_REVIEW_DESCRIPTION, resolveGitSettings, resolveReviewSettings, reviewBranch, reviewText, type ReviewSettings,
} from '../../sinks/git/config.js'
import { renderTemplate, templateProblem } from '../../sinks/git/review/templates.js'
import { createSinkFactory } from '../../sinks/registry.js'
import { SinkError } from '../../sinks/sink.js'
import { loadExampleCr } from '../support/metacontroller.js'

// git.review settings: defaults, every refusal as a permanent configuration error, templates
// rendered from data only, and the SSRF guard on review.apiUrl before the sink is built.

const SINK = { kind: 'git', id: 'team-a/reviewed' }
const TOKEN = { token: 'glpat-secret-value' }
const REVIEW: GitReviewSettings = { provider: 'gitlab', apiUrl: 'https://gitlab.example/api/v4', project: 'platform/inventory' }

function specWith(review: Partial<GitReviewSettings> | undefined, git: KollectSinkSpec['git'] = { url: 'https://gitlab.example/platform/inventory.git', branch: 'records' }): KollectSinkSpec {
  return { type: 'git', git: { ...git, ...(review === undefined ? {} : { review: { ...REVIEW, ...review } as GitReviewSettings }) } }
}

function refusal(review: Partial<GitReviewSettings>, git?: KollectSinkSpec['git'], credentials: Record<string, string> = TOKEN): string {
  try {
    resolveReviewSettings(specWith(review, git), credentials, SINK)
  } catch (err) {
    assert.ok(err instanceof SinkError, String(err))
    assert.equal(err.retriable, false, 'a configuration error waits for the spec to change')
    assert.ok(!err.message.includes(TOKEN.token))
    return err.message
  }
  assert.fail('resolveReviewSettings accepted it')
}

describe('resolveReviewSettings', () => {
  test('review mode is off without git.review', () => {
    assert.equal(resolveReviewSettings(specWith(undefined), TOKEN, SINK), undefined)
  })

  test('the example in examples/crs is accepted by the exporter, with the defaults the docs give', () => {
    const spec = loadExampleCr('sink-git-review.yaml', 'sinks').spec as KollectSinkSpec
    const settings = resolveGitSettings(spec, TOKEN, SINK)
    assert.equal(settings.branch, 'main', 'the sink reads and bases its proposals on the target branch')
    assert.deepEqual({ ...settings.review, token: '' }, {
      provider: 'gitea', apiUrl: 'https://gitea.example.com/api/v1', project: 'platform/inventory', token: '', targetBranch: 'main',
      branchTemplate: 'kollect/{namespace}/{name}', titleTemplate: 'kollect: {namespace}/{name} on {cluster}',
      descriptionTemplate: DEFAULT_REVIEW_DESCRIPTION, autoMerge: 'never', pollMs: 60_000,
    })
  })

  test('defaults: target is the sink branch, the documented templates, never auto-merge, the secret token', () => {
    assert.deepEqual(resolveReviewSettings(specWith({}), TOKEN, SINK), {
      provider: 'gitlab', apiUrl: 'https://gitlab.example/api/v4', project: 'platform/inventory', token: TOKEN.token,
      targetBranch: 'records', branchTemplate: 'kollect/{namespace}/{name}', titleTemplate: 'kollect: {namespace}/{name} on {cluster}',
      descriptionTemplate: DEFAULT_REVIEW_DESCRIPTION, autoMerge: 'never', pollMs: 60_000,
    } satisfies ReviewSettings)
    assert.equal(resolveReviewSettings(specWith({}, { url: 'https://g.example/r.git' }), TOKEN, SINK)?.targetBranch, 'main', 'git.branch defaults to main')
  })

  const ACCEPTED: [string, Partial<GitReviewSettings>][] = [
    ['a GitLab numeric project id', { project: '42' }],
    ['a GitLab path in a subgroup', { project: 'org/platform/inventory' }],
    ['a Gitea owner/repo', { provider: 'gitea', apiUrl: 'https://gitea.example/api/v1', project: 'platform/inventory' }],
    ['a GitHub owner/repo with auto-merge', { provider: 'github', apiUrl: 'https://api.github.com', project: 'org/repo.name', autoMerge: 'whenChecksPass' }],
    ['templates using every placeholder they offer', {
      branchTemplate: 'review/{cluster}/{namespace}-{name}', titleTemplate: '{cluster}', descriptionTemplate: '{added}{changed}{removed}{checksum}{cluster}{namespace}{name}',
    }],
  ]
  for (const [reason, review] of ACCEPTED) {
    test(`accepts ${reason}`, () => {
      assert.ok(resolveReviewSettings(specWith(review), TOKEN, SINK))
    })
  }

  const REFUSED: [string, Partial<GitReviewSettings>, RegExp, KollectSinkSpec['git']?, Record<string, string>?][] = [
    ['review without git.url', {}, /review mode needs git\.url/, { branch: 'main' }],
    ['an unknown provider', { provider: 'bitbucket' as 'gitea' }, /provider must be gitlab, gitea or github, not "bitbucket"/],
    ['an apiUrl that is not a URL', { apiUrl: 'gitlab.example/api/v4' }, /apiUrl is not a URL/],
    ['an apiUrl with another scheme', { apiUrl: 'ftp://gitlab.example/' }, /apiUrl scheme "ftp:" is not http or https/],
    ['an apiUrl carrying credentials', { apiUrl: 'https://root:hunter2@gitlab.example/api/v4' }, /apiUrl must not carry credentials/],
    ['a Gitea project that is not owner/repo', { provider: 'gitea', project: 'org/sub/repo' }, /project "org\/sub\/repo" must be owner\/repo/],
    ['a GitLab project with a bad segment', { project: 'platform/' }, /numeric id or its full path/],
    ['an invalid targetBranch', { targetBranch: 'a..b' }, /targetBranch "a\.\.b" is not a valid branch name/],
    ['an unknown placeholder in the branch', { branchTemplate: 'kollect/{inventory}' }, /branchTemplate: unknown placeholder \{inventory\} \(known: \{cluster\}, \{namespace\}, \{name\}\)/],
    ['a count placeholder in the title', { titleTemplate: '{added} changes' }, /titleTemplate: unknown placeholder \{added\}/],
    ['code-like text in a placeholder', { descriptionTemplate: '{process.env.TOKEN}' }, /descriptionTemplate: unknown placeholder \{process\.env\.TOKEN\}/],
    ['an unclosed brace', { titleTemplate: 'kollect {name' }, /titleTemplate: unbalanced/],
    ['a branch template that is never a valid branch', { branchTemplate: 'kollect/{name}.lock' }, /branchTemplate gives "kollect\/name\.lock", which is not a valid branch name/],
    ['a branch template that is the target branch', { branchTemplate: 'records' }, /branchTemplate gives the target branch "records" itself/],
    ['an autoMerge outside the enum', { autoMerge: 'always' as 'never' }, /autoMerge must be never or whenChecksPass/],
    ['no token in the sink secret', {}, /the sink secret has no token key/, undefined, { password: 'x' }],
  ]
  for (const [reason, review, message, git, credentials] of REFUSED) {
    test(`refuses ${reason}`, () => {
      const text = refusal(review, git, credentials)
      assert.match(text, /^git sink team-a\/reviewed: invalid configuration: review: /)
      assert.match(text, message)
      assert.ok(!text.includes('hunter2'), 'credentials in the apiUrl are not echoed')
    })
  }
})

describe('review branch and text', () => {
  const settings = resolveReviewSettings(specWith({ descriptionTemplate: '+{added} ~{changed} -{removed} {checksum} ({cluster})' }), TOKEN, SINK) as ReviewSettings
  const subject = { cluster: 'lab-west', namespace: 'team-a', name: 'prod' }

  test('renders the branch, title and description from the export', () => {
    assert.equal(reviewBranch(settings, subject, SINK), 'kollect/team-a/prod')
    assert.deepEqual(reviewText(settings, { ...subject, added: 3, changed: 1, removed: 0, checksum: 'ab12' }), {
      title: 'kollect: team-a/prod on lab-west',
      description: '+3 ~1 -0 ab12 (lab-west)',
    })
  })

  test('a value that looks like a placeholder is inserted as text, not expanded again', () => {
    assert.equal(renderTemplate('{name}/{cluster}', { name: '{cluster}', cluster: 'c' }), '{cluster}/c')
  })

  test('names from the prototype are not placeholders', () => {
    assert.match(templateProblem('{constructor}{toString}', ['name']) ?? '', /unknown placeholder \{constructor\}/)
    assert.equal(renderTemplate('{constructor}', {}), '{constructor}')
  })
})

describe('the SSRF guard on review.apiUrl', () => {
  const factory = (seen: string[]) => createSinkFactory({
    dataDir: '/nonexistent',
    credentials: async () => TOKEN,
    checkEndpoint: async (url) => (seen.push(url), checkEndpoint(url, false)),
  })
  const resolved = (apiUrl: string) => ({ name: 'reviewed', namespace: 'team-a', spec: specWith({ apiUrl }) })

  test('a blocked apiUrl is refused before the sink is built, naming the setting', async () => {
    const seen: string[] = []
    const err = await factory(seen)(resolved('http://169.254.169.254/api/v4')).then(() => undefined, (e: unknown) => e)
    assert.ok(err instanceof SinkError && !err.retriable, String(err))
    assert.equal(err.message, 'sink team-a/reviewed: review.apiUrl: host 169.254.169.254 is a link-local or metadata address (private sinks are disabled)')
    assert.deepEqual(seen, ['https://gitlab.example/platform/inventory.git', 'http://169.254.169.254/api/v4'], 'the remote, then the API')
  })
})

describe('the CRD schema of git.review', () => {
  const valid = { ...specWith({}), secretRef: { name: 'forge-token' } }

  test('a complete review block is valid, and the schema defaults are the resolver\'s', () => {
    assert.deepEqual(validateSpec('KollectSink', valid, { rejectUnknownFields: true }), { valid: true })
    assert.deepEqual(ruleFindings('KollectSink', valid), [])
    const props = (specSchema('KollectSink').properties?.git?.properties?.review?.properties ?? {}) as Record<string, { default?: unknown }>
    const resolved = resolveReviewSettings(valid, TOKEN, SINK) as ReviewSettings
    for (const field of ['branchTemplate', 'titleTemplate', 'autoMerge'] as const) assert.equal(props[field]?.default, resolved[field], field)
  })

  test('the enums and the apiUrl scheme are checked by the schema', () => {
    for (const review of [{ provider: 'bitbucket' }, { autoMerge: 'always' }, { apiUrl: 'ftp://gitlab.example/' }]) {
      assert.equal(validateSpec('KollectSink', { ...valid, git: { ...valid.git, review: { ...REVIEW, ...review } } }).valid, false, JSON.stringify(review))
    }
  })

  test('review needs git.url and a secretRef (CEL rules)', () => {
    const noUrl = { ...valid, git: { branch: 'main', review: REVIEW } }
    assert.deepEqual(ruleFindings('KollectSink', noUrl).map((f) => f.path), ['spec.git.url'])
    const noSecret = { ...specWith({}) }
    assert.deepEqual(ruleFindings('KollectSink', noSecret).map((f) => f.path), ['spec.secretRef'])
  })
})

test('review mode: the sink reads and bases its proposals on the target branch, and carries the review settings', () => {
  const settings = resolveGitSettings(specWith({ targetBranch: 'records-reviewed' }), TOKEN, SINK)
  assert.equal(settings.branch, 'records-reviewed')
  assert.equal(settings.review?.targetBranch, 'records-reviewed')
  assert.equal(resolveGitSettings(specWith({}), TOKEN, SINK).branch, 'records', 'no targetBranch: git.branch')
  assert.equal(resolveGitSettings(specWith(undefined), TOKEN, SINK).review, undefined)
})

test('pollInterval: a duration of at least 5s, 1m by default', () => {
  assert.equal(resolveReviewSettings(specWith({}), TOKEN, SINK)?.pollMs, 60_000)
  assert.equal(resolveReviewSettings(specWith({ pollInterval: '5s' }), TOKEN, SINK)?.pollMs, 5_000)
  assert.match(refusal({ pollInterval: '1s' }), /pollInterval "1s" must be a duration of at least 5s/)
  assert.match(refusal({ pollInterval: 'soon' }), /pollInterval "soon" must be a duration/)
  assert.throws(() => resolveGitSettings(specWith({ pollInterval: 'soon' }), TOKEN, SINK), (err: unknown) => err instanceof SinkError && !err.retriable)
})
