import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { specProblems } from '../../api/crd-schemas.js'
import type { KollectSinkSpec } from '../../api/types.js'
import { resolveReviewSettings } from '../../sinks/git/config.js'
import { giteaProvider } from '../../sinks/git/review/gitea.js'
import { createGitLabProvider } from '../../sinks/git/review/gitlab.js'
import { githubProvider } from '../../sinks/git/review/github.js'
import { ReviewError, type ReviewEndpoint, type ReviewProvider } from '../../sinks/git/review/provider.js'
import { SinkError } from '../../sinks/sink.js'
import { startHooksServer, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { controllerFor, syncRequest } from '../support/metacontroller.js'
import { hostilePeer, type HostilePeer } from './hostile-peer.js'
import { ROUTES, conditionOf, meta, send } from './support.js'

// Issue 24 F12 and the review.apiUrl finding: a project is owner/repo (or a GitLab
// group/…/project), segment by segment, so "..", "." or an encoded slash cannot move a forge call
// to another API path; and an apiUrl with user-info is refused by the sink hook, not accepted as
// Valid and failed later.

const SINK = { kind: 'git', id: 'team-a/reviewed' }

function reviewSpec(review: Record<string, unknown>): KollectSinkSpec {
  return { type: 'git', secretRef: { name: 'forge-token' }, git: { url: 'https://forge.example/org/repo.git', review: { provider: 'gitea', apiUrl: 'https://forge.example/api/v1', project: 'org/repo', ...review } as never } }
}

// [provider, project]: every one has a segment that is empty, "." or "..", or percent, or backslash.
const BAD_PROJECTS: [string, string][] = [
  ['gitea', 'org/..'], ['gitea', '../repo'], ['github', './repo'], ['github', 'org/.'], ['gitea', '../..'],
  ['gitlab', 'group/../project'], ['gitlab', 'group/./project'], ['gitlab', '../..'], ['gitlab', 'group//project'], ['gitlab', 'group/project/..'],
  ['gitea', 'org/%2e%2e'], ['gitlab', 'group%2Fsub/project'], ['gitea', 'org\\repo'], ['gitlab', 'group\\..\\x/y'],
]

const GOOD_PROJECTS: [string, string][] = [
  ['gitea', 'org/repo'], ['github', 'org/repo.name'], ['github', 'o-r_g/.dotfiles'], ['gitlab', '42'], ['gitlab', 'group/sub.group/project'], ['gitlab', 'group/project..old'],
]

describe('F12: git.review.project, segment by segment', () => {
  for (const [provider, project] of BAD_PROJECTS) {
    test(`${provider} refuses "${project}" in the exporter and in the CRD schema`, () => {
      const spec = reviewSpec({ provider, project })
      assert.throws(() => resolveReviewSettings(spec, { token: 't' }, SINK), (err) => err instanceof SinkError && /review: project ".*" must be/.test(err.message))
      assert.ok(specProblems('KollectSink', spec).length > 0, 'the CRD schema refuses it too')
    })
  }
  for (const [provider, project] of GOOD_PROJECTS) {
    test(`${provider} accepts "${project}"`, () => {
      assert.equal(resolveReviewSettings(reviewSpec({ provider, project }), { token: 't' }, SINK)?.project, project)
      assert.deepEqual(specProblems('KollectSink', reviewSpec({ provider, project })), [])
    })
  }

  describe('a provider given such a project anyway sends nothing', () => {
    let forge: HostilePeer
    before(async () => {
      forge = await hostilePeer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end('[]')
      })
    })
    after(async () => {
      await forge?.close()
    })
    const PROVIDERS: [string, (e: ReviewEndpoint) => ReviewProvider][] = [['gitea', giteaProvider], ['github', githubProvider], ['gitlab', createGitLabProvider]]
    for (const [name, create] of PROVIDERS) {
      test(`${name}: "../.." and "org/.." are refused before any request`, async () => {
        for (const project of ['../..', 'org/..']) {
          const endpoint: ReviewEndpoint = { apiUrl: `${forge.url}/api/v1`, project, token: 't', checkEndpoint: async () => null, timeoutMs: 5000 }
          const err = await (async () => create(endpoint).findOpen('kollect/a', 'main'))().then(() => undefined, (e: unknown) => e)
          assert.ok(err instanceof ReviewError && err.kind === 'invalid', `${project}: ${String(err)}`)
        }
        assert.deepEqual(forge.requests.map((r) => r.path), [], 'no forge call was made')
      })
    }
  })
})

describe('the sink hook on review settings', () => {
  let server: HooksServer
  before(async () => {
    server = await startHooksServer({ KOLLECT_ALLOW_PRIVATE_SINKS: 'false' })
  })
  after(async () => {
    await server?.close()
  })

  const ready = async (spec: KollectSinkSpec): Promise<(string | undefined)[]> => {
    const body = JSON.stringify(syncRequest(controllerFor('kollect-sinks'), { ...meta('KollectSink', 'team-a', 'reviewed'), spec }, {}))
    const res: RawResponse = await send(server.url, ROUTES.sinkSync, { body })
    assert.equal(res.status, 200, res.text)
    const c = conditionOf(res, 'Ready')
    return [c?.status, c?.reason, c?.message]
  }

  test('an apiUrl with user-info is InvalidConfig naming spec.git.review.apiUrl', async () => {
    for (const apiUrl of ['https://user:pass@forge.example/api/v1', 'https://token@forge.example/api/v1']) {
      assert.deepEqual(await ready(reviewSpec({ apiUrl })), ['False', 'InvalidConfig', 'spec.git.review.apiUrl: must not carry credentials; put the token in the sink secret'])
    }
  })

  test('a project with ".." is InvalidConfig naming spec.git.review.project', async () => {
    const [status, reason, message] = await ready(reviewSpec({ project: 'org/..' }))
    assert.deepEqual([status, reason], ['False', 'InvalidConfig'])
    assert.match(message ?? '', /spec\.git\.review\.project/)
  })

  test('valid review settings are Valid', async () => {
    assert.deepEqual(await ready(reviewSpec({})), ['True', 'Valid', 'configuration is valid'])
  })
})
