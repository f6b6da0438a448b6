import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import type { KollectSinkSpec } from '../../api/types.js'
import { resolveGitSettings } from '../../sinks/git/config.js'
import { giteaProvider } from '../../sinks/git/review/gitea.js'
import { githubProvider } from '../../sinks/git/review/github.js'
import { ReviewError, type ReviewEndpoint, type ReviewProvider, type ReviewRequest } from '../../sinks/git/review/provider.js'
import { startGitea, type GiteaServer } from '../support/gitea.js'
import { git } from '../support/git.js'
import { freePort } from '../support/ports.js'
import { pollUntil } from '../support/process.js'

// The Gitea and GitHub review providers against a real Gitea 1.26 (scripts/install-gitea.sh).
// Gitea serves GitHub's pull-request JSON under /api/v1, so the GitHub provider runs the same
// suite against it, except where the two APIs differ:
//   - merge: GitHub's is PUT /pulls/{n}/merge with {sha}; Gitea routes only POST with
//     {Do, head_commit_id}, and answers the PUT with 405;
//   - branch deletion: GitHub's is DELETE /git/refs/heads/{branch}; Gitea serves /git/refs for GET
//     only (its deletion is DELETE /branches/{branch}), and answers with 405;
//   - listing: GitHub narrows by ?head=owner:branch&base=…; Gitea ignores both (the provider
//     filters the page itself either way, so both pass the same findOpen tests).
// For merge and deletion the GitHub suite asserts that difference (the provider reports nothing
// merged and nothing deleted) instead of the behaviour, which only GitHub itself can show.

let forge: GiteaServer

before(async () => {
  forge = await startGitea()
})

after(async () => {
  await forge?.stop()
})

interface Checkout {
  dir: string
  /** `git -c` arguments that authenticate as the sink does (sinks/git/config.ts). */
  auth: string[]
  project: string
}

async function checkout(repo: string, cleanup: string[]): Promise<Checkout> {
  const url = await forge.createRepo(repo)
  const root = await mkdtemp(path.join(os.tmpdir(), 'kollect-review-'))
  cleanup.push(root)
  const dir = path.join(root, 'clone')
  const settings = resolveGitSettings({ git: { url } } as KollectSinkSpec, { token: forge.token }, { kind: 'git', id: 'review-test' })
  assert.ok(settings.auth, 'the git sink sends the token as an extra header')
  const auth = ['-c', `${settings.auth.configKey}=${settings.auth.configValue}`]
  await git(root, ...auth, 'clone', '-q', url, dir)
  return { dir, auth, project: `${forge.user}/${repo}` }
}

/** A new commit on `branch` (created from main when new), pushed over HTTP; its sha. */
async function pushCommit(co: Checkout, branch: string, content: string): Promise<string> {
  await git(co.dir, 'checkout', '-q', '-B', branch, (await branchExists(co, branch)) ? `origin/${branch}` : 'origin/main')
  await writeFile(path.join(co.dir, 'inventory.json'), content)
  await git(co.dir, 'add', 'inventory.json')
  await git(co.dir, 'commit', '-q', '-m', `inventory: ${content}`)
  await git(co.dir, ...co.auth, 'push', '-q', 'origin', `HEAD:refs/heads/${branch}`)
  await git(co.dir, ...co.auth, 'fetch', '-q', 'origin')
  return (await git(co.dir, 'rev-parse', 'HEAD')).trim()
}

async function branchExists(co: Checkout, branch: string): Promise<boolean> {
  return (await remoteSha(co, branch)) !== undefined
}

async function remoteSha(co: Checkout, branch: string): Promise<string | undefined> {
  const out = await git(co.dir, ...co.auth, 'ls-remote', 'origin', `refs/heads/${branch}`)
  return out.split(/\s/)[0] || undefined
}

function endpoint(project: string, token = forge.token): ReviewEndpoint {
  return { apiUrl: forge.apiUrl, project, token, checkEndpoint: () => Promise.resolve(null), timeoutMs: 15_000 }
}

/** The forge's own view of a pull request, read around the provider. */
async function rawPull(project: string, id: string): Promise<{ title: string; body: string; mergeable: boolean; head: { sha: string } }> {
  const res = await fetch(`${forge.apiUrl}/repos/${project}/pulls/${id}`, { headers: { Authorization: `token ${forge.token}` } })
  assert.equal(res.status, 200)
  return (await res.json()) as { title: string; body: string; mergeable: boolean; head: { sha: string } }
}

async function openPullsFrom(project: string, source: string): Promise<number> {
  const res = await fetch(`${forge.apiUrl}/repos/${project}/pulls?state=open&limit=50`, { headers: { Authorization: `token ${forge.token}` } })
  const pulls = (await res.json()) as Array<{ head: { ref: string } }>
  return pulls.filter((p) => p.head.ref === source).length
}

/** Gitea updates a request's head and mergeability after a push in the background. */
async function untilHead(provider: ReviewProvider, project: string, id: string, sha: string): Promise<void> {
  await pollUntil(`request ${id} at ${sha}`, async () => {
    const pr = await rawPull(project, id)
    return pr.head.sha === sha && pr.mergeable
  }, { timeoutMs: 60_000, intervalMs: 200 })
  assert.equal((await provider.get(id)).headSha, sha)
}

async function rejects(promise: Promise<unknown>, kind: ReviewError['kind'], token?: string): Promise<ReviewError> {
  const err = await promise.then(() => undefined, (e: unknown) => e)
  assert.ok(err instanceof ReviewError, `expected a ReviewError, got ${String(err)}`)
  assert.equal(err.kind, kind, err.message)
  if (token) assert.ok(!err.message.includes(token), `the token leaked into: ${err.message}`)
  return err
}

function suite(name: 'gitea' | 'github', make: (e: ReviewEndpoint) => ReviewProvider): void {
  describe(`${name} provider against Gitea`, () => {
    const cleanup: string[] = []
    let co: Checkout
    let provider: ReviewProvider
    let request: ReviewRequest
    let firstSha: string
    const source = `kollect/team-a/deployments-${name}`

    before(async () => {
      co = await checkout(`review-${name}`, cleanup)
      provider = make(endpoint(co.project))
      firstSha = await pushCommit(co, source, '{"items":1}')
    })

    after(async () => {
      for (const dir of cleanup) await rm(dir, { recursive: true, force: true })
    })

    it('opens one request, which findOpen then finds; a second open is refused and leaves one', async () => {
      assert.equal(await provider.findOpen(source, 'main'), undefined)
      request = await provider.open(source, 'main', { title: 'Inventory team-a/deployments', description: '+1 ~0 -0' })
      assert.equal(request.state, 'open')
      assert.equal(request.source, source)
      assert.equal(request.target, 'main')
      assert.equal(request.headSha, firstSha)
      assert.ok(request.url.startsWith(`${forge.url}/${co.project}/pulls/`), request.url)
      assert.deepEqual(await provider.findOpen(source, 'main'), request)
      // Another target or source is another request.
      assert.equal(await provider.findOpen(source, 'release'), undefined)
      assert.equal(await provider.findOpen(`${source}-other`, 'main'), undefined)
      await rejects(provider.open(source, 'main', { title: 'again', description: '' }), 'invalid', forge.token)
      assert.equal(await openPullsFrom(co.project, source), 1)
    })

    it('updates title and description', async () => {
      const updated = await provider.update(request.id, { title: 'Inventory team-a/deployments (2)', description: '+2 ~1 -0\nchecksum abc' })
      assert.equal(updated.id, request.id)
      assert.equal(updated.state, 'open')
      const raw = await rawPull(co.project, request.id)
      assert.equal(raw.title, 'Inventory team-a/deployments (2)')
      assert.equal(raw.body, '+2 ~1 -0\nchecksum abc')
    })

    it('follows a push to the source branch', async () => {
      const sha = await pushCommit(co, source, '{"items":2}')
      assert.notEqual(sha, firstSha)
      await untilHead(provider, co.project, request.id, sha)
      request = await provider.get(request.id)
      assert.deepEqual(await provider.findOpen(source, 'main'), request)
    })

    if (name === 'gitea') {
      it('refuses to merge a stale head: nothing is merged', async () => {
        const mainBefore = await remoteSha(co, 'main')
        assert.equal(await provider.merge(request.id, firstSha), 'stale')
        assert.equal(await remoteSha(co, 'main'), mainBefore)
        assert.equal((await provider.get(request.id)).state, 'open')
      })

      it('merges the current head into the target branch, and a second merge says merged', async () => {
        // A refused merge sends Gitea back to checking the request, and until that ends a merge
        // answers 405 "Please try again later" (not-mergeable): the auto-merge must try again.
        await untilHead(provider, co.project, request.id, request.headSha)
        assert.equal(await provider.merge(request.id, request.headSha), 'merged')
        await git(co.dir, ...co.auth, 'fetch', '-q', 'origin')
        await git(co.dir, 'merge-base', '--is-ancestor', request.headSha, 'origin/main')
        assert.equal((await provider.get(request.id)).state, 'merged')
        assert.equal(await provider.findOpen(source, 'main'), undefined)
        assert.equal(await provider.merge(request.id, request.headSha), 'merged')
      })
    } else {
      it('differs from Gitea on merge: the PUT is not served, and nothing is merged', async () => {
        const mainBefore = await remoteSha(co, 'main')
        assert.equal(await provider.merge(request.id, request.headSha), 'not-mergeable')
        assert.equal(await remoteSha(co, 'main'), mainBefore)
        assert.equal((await provider.get(request.id)).state, 'open')
      })
    }

    it('closes a request without merging it', async () => {
      const branch = `${source}-closed`
      const sha = await pushCommit(co, branch, '{"items":3}')
      const opened = await provider.open(branch, 'main', { title: 'to close', description: '' })
      const mainBefore = await remoteSha(co, 'main')
      await provider.close(opened.id)
      const closed = await provider.get(opened.id)
      assert.equal(closed.state, 'closed')
      assert.equal(closed.headSha, sha)
      assert.equal(await provider.findOpen(branch, 'main'), undefined)
      assert.equal(await remoteSha(co, 'main'), mainBefore)
    })

    if (name === 'gitea') {
      it('deletes a branch whose name has slashes, and deleting it again is no error', async () => {
        assert.ok(await branchExists(co, source))
        await provider.deleteBranch(source)
        assert.equal(await branchExists(co, source), false)
        await provider.deleteBranch(source)
        assert.ok(await branchExists(co, 'main'))
      })
    } else {
      it('differs from Gitea on branch deletion: DELETE /git/refs is not served, and the branch stays', async () => {
        const err = await rejects(provider.deleteBranch(source), 'invalid', forge.token)
        assert.equal(err.status, 405)
        assert.ok(await branchExists(co, source))
      })
    }

    it('says auth for a wrong token, without the token', async () => {
      const wrong = 'f'.repeat(40)
      const wrongProvider = make(endpoint(co.project, wrong))
      await rejects(wrongProvider.findOpen(source, 'main'), 'auth', wrong)
      await rejects(wrongProvider.open(`${source}-x`, 'main', { title: 't', description: '' }), 'auth', wrong)
    })

    it('says not-found for an unknown repository, also when deleting a branch', async () => {
      const unknown = make(endpoint(`${forge.user}/no-such-repository`))
      await rejects(unknown.findOpen(source, 'main'), 'not-found', forge.token)
      await rejects(unknown.get('1'), 'not-found', forge.token)
      if (name === 'gitea') await rejects(unknown.deleteBranch(source), 'not-found', forge.token)
    })

    it('does not follow a redirect: a renamed repository is a configuration problem', async () => {
      const old = `review-${name}-old`
      await forge.createRepo(old)
      const res = await fetch(`${forge.apiUrl}/repos/${forge.user}/${old}`, {
        method: 'PATCH',
        headers: { Authorization: `token ${forge.token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: `${old}-renamed` }),
      })
      assert.equal(res.status, 200)
      const err = await rejects(make(endpoint(`${forge.user}/${old}`)).findOpen(source, 'main'), 'invalid', forge.token)
      assert.ok(err.status !== undefined && err.status >= 300 && err.status < 400, `status ${err.status}`)
      assert.match(err.message, /redirect/)
    })

    it('says transient when nothing answers', async () => {
      const nobody = make({ ...endpoint(co.project), apiUrl: `http://127.0.0.1:${await freePort()}/api/v1` })
      const err = await rejects(nobody.get('1'), 'transient', forge.token)
      assert.ok(err.retriable)
    })

    it('asks the SSRF guard before every request and sends nothing it refuses', async () => {
      const asked: string[] = []
      const guarded = make({
        ...endpoint(co.project),
        checkEndpoint: (url) => {
          asked.push(url)
          return Promise.resolve('loopback addresses are not allowed')
        },
      })
      const err = await rejects(guarded.findOpen(source, 'main'), 'invalid', forge.token)
      assert.match(err.message, /loopback addresses are not allowed/)
      assert.equal(asked.length, 1)
      assert.ok(asked[0]!.startsWith(`${forge.apiUrl}/repos/${co.project}/pulls?`), asked[0])
    })
  })
}

suite('gitea', giteaProvider)
suite('github', githubProvider)
