// Issue 15: the git sink in review mode against a real Gitea 1.26 (scripts/install-gitea.sh).
// Every export is a commit on the target's tip, pushed to the inventory's review branch and
// proposed in one pull request; the target branch changes only when that request is merged.
import assert from 'node:assert/strict'
import { after, before, describe, it, test, type TestContext } from 'node:test'
import { Exporter } from '../../exporter/index.js'
import { inventoryStatus } from '../../hooks/inventory-status.js'
import type { SyncRequest } from '../../hooks/request.js'
import type { GitReviewSettings } from '../../api/sink-spec.js'
import type { InventoryComposition, KollectSinkSpec, ObjectRef, ResolvedSink, Snapshot } from '../../api/types.js'
import { createGitSink } from '../../sinks/git/index.js'
import { giteaProvider } from '../../sinks/git/review/gitea.js'
import type { ReviewProvider } from '../../sinks/git/review/provider.js'
import { SinkError, type Sink, type WriteResult } from '../../sinks/sink.js'
import { startGitea, type GiteaServer } from '../support/gitea.js'
import { tempDir, withSink } from '../support/git.js'
import { bumpReplicas, makeItems, snapshotOf } from '../support/items.js'
import { FakeClock } from '../support/clock.js'
import { pollUntil } from '../support/process.js'

const INV: ObjectRef = { namespace: 'team-a', name: 'deployments' }
const DOC = 'inventory/lab-west/team-a/deployments.json'
const BRANCH = 'kollect/team-a/deployments'
const ITEMS = makeItems(12)

let forge: GiteaServer
before(async () => {
  forge = await startGitea()
})
after(async () => {
  await forge?.stop()
})

/** A Gitea call as a person makes it, around the sink. */
async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; data: T }> {
  const res = await fetch(`${forge.apiUrl}${path}`, {
    method,
    headers: { Authorization: `token ${forge.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const text = await res.text()
  return { status: res.status, data: (text ? JSON.parse(text) : undefined) as T }
}

interface Repo {
  project: string
  url: string
  /** The provider as a reviewer uses it: merge and close by hand. */
  person: ReviewProvider
}

let repos = 0
async function newRepo(): Promise<Repo> {
  const name = `inventory-${++repos}`
  const url = await forge.createRepo(name)
  const project = `${forge.user}/${name}`
  const person = giteaProvider({ apiUrl: forge.apiUrl, project, token: forge.token, checkEndpoint: () => Promise.resolve(null), timeoutMs: 15_000 })
  return { project, url, person }
}

function reviewSpec(repo: Repo, review: Partial<GitReviewSettings> = {}): KollectSinkSpec {
  return { type: 'git', cluster: 'lab-west', git: { url: repo.url, branch: 'main', review: { provider: 'gitea', apiUrl: forge.apiUrl, project: repo.project, ...review } } }
}

async function reviewSink(t: TestContext, repo: Repo, review: Partial<GitReviewSettings> = {}, token = forge.token, spec = reviewSpec(repo, review)): Promise<Sink> {
  const dataDir = await tempDir(t)
  // Loopback is the forge here; the SSRF guard itself is tested with the providers.
  return withSink(t, createGitSink({ id: 'team-a/reviewed', spec, credentials: { token }, dataDir, checkEndpoint: () => Promise.resolve(null) }))
}

async function branchTip(repo: Repo, branch: string): Promise<string | undefined> {
  const res = await api<{ commit: { id: string } }>('GET', `/repos/${repo.project}/branches/${branch.split('/').map(encodeURIComponent).join('/')}`)
  return res.status === 404 ? undefined : res.data.commit.id
}

async function commitParent(repo: Repo, sha: string): Promise<string> {
  const res = await api<{ parents: { sha: string }[] }>('GET', `/repos/${repo.project}/git/commits/${sha}`)
  return res.data.parents[0]?.sha ?? ''
}

/** The inventory document on a branch, or undefined when the branch does not hold it. */
async function documentOn(repo: Repo, ref: string): Promise<{ checksum: string } | undefined> {
  const res = await fetch(`${forge.apiUrl}/repos/${repo.project}/raw/${DOC}?ref=${encodeURIComponent(ref)}`, { headers: { Authorization: `token ${forge.token}` } })
  if (res.status === 404) return undefined
  assert.equal(res.status, 200)
  return (await res.json()) as { checksum: string }
}

async function pulls(repo: Repo, state: 'open' | 'closed' | 'all'): Promise<{ number: number; state: string; title: string; body: string; head: { ref: string } }[]> {
  const res = await api<{ number: number; state: string; title: string; body: string; head: { ref: string } }[]>('GET', `/repos/${repo.project}/pulls?state=${state}&limit=50`)
  return res.data.filter((p) => p.head.ref === BRANCH)
}

/** Gitea takes the pushed head and checks mergeability in the background. */
async function mergeable(repo: Repo, id: string, sha: string): Promise<void> {
  await pollUntil(`request ${id} mergeable at ${sha.slice(0, 8)}`, async () => {
    const pr = await api<{ head: { sha: string }; mergeable: boolean }>('GET', `/repos/${repo.project}/pulls/${id}`)
    return pr.data.head.sha === sha && pr.data.mergeable
  }, { timeoutMs: 60_000, intervalMs: 200 })
}

/**
 * A reviewer merges the request at sha, as a person does: once Gitea calls it mergeable, and again
 * while Gitea still refuses (it can answer "try again later" while it re-checks the last push,
 * though its API already says mergeable). A moved head is never retried.
 */
async function reviewerMerges(repo: Repo, id: string, sha: string): Promise<void> {
  await mergeable(repo, id, sha)
  await pollUntil(`request ${id} merged at ${sha.slice(0, 8)}`, async () => {
    const outcome = await repo.person.merge(id, sha)
    if (outcome === 'stale') throw new Error(`request ${id}: its head is no longer ${sha}`)
    return outcome === 'merged'
  }, { timeoutMs: 60_000, intervalMs: 200 })
}

/** The inventory after n changes: the first n items bumped, each once. */
function change(n: number): Snapshot {
  return snapshotOf(INV, ITEMS.map((item, i) => (i < n ? bumpReplicas(item, 100 + i) : item)))
}

async function writeError(sink: Sink, snapshot: Snapshot): Promise<SinkError> {
  const err = await sink.write(snapshot).then(() => undefined, (e: unknown) => e)
  assert.ok(err instanceof SinkError, `expected a SinkError, got ${String(err)}`)
  assert.ok(!err.message.includes(forge.token), `the token leaked into: ${err.message}`)
  return err
}

function requestOf(result: WriteResult): string {
  assert.ok(result.review, 'the export awaits review')
  return result.review.url.split('/').pop() as string
}

describe('review mode against Gitea: a reviewer merges', () => {
  let repo: Repo
  let sink: Sink
  let id: string
  let mainBefore: string | undefined

  before(async () => {
    repo = await newRepo()
    mainBefore = await branchTip(repo, 'main')
  })

  it('the first export opens one request from the review branch, based on the target tip, and leaves the target alone', async (t) => {
    sink = await reviewSink(t, repo, { pollInterval: '5s' })
    const first = snapshotOf(INV, ITEMS)
    const result = await sink.write(first)
    assert.deepEqual({ ...result, review: undefined }, { added: 12, changed: 0, removed: 0, review: undefined })
    assert.equal(result.review?.pollMs, 5_000)
    id = requestOf(result)
    assert.ok(result.review?.url.startsWith(`${forge.url}/${repo.project}/pulls/`), result.review?.url)
    assert.equal(await branchTip(repo, 'main'), mainBefore, 'the target branch changes only by a merge')
    assert.equal(await documentOn(repo, 'main'), undefined)
    assert.equal((await documentOn(repo, BRANCH))?.checksum, first.checksum)
    assert.equal(await commitParent(repo, (await branchTip(repo, BRANCH)) as string), mainBefore, 'the proposal is based on the target tip')
    const open = await pulls(repo, 'open')
    assert.equal(open.length, 1)
    assert.equal(open[0]?.title, 'kollect: team-a/deployments on lab-west')
    assert.equal(open[0]?.body, `Inventory team-a/deployments on cluster lab-west: +12 ~0 -0\n\nSnapshot checksum: ${first.checksum}`)
  })

  it('a burst of changes updates the same request: one open request, its head the last change', async () => {
    let last: Snapshot | undefined
    for (let n = 1; n <= 4; n++) {
      last = change(n)
      assert.equal(requestOf(await sink.write(last)), id)
    }
    const open = await pulls(repo, 'open')
    assert.deepEqual(open.map((p) => String(p.number)), [id])
    assert.equal(open[0]?.body, `Inventory team-a/deployments on cluster lab-west: +12 ~0 -0\n\nSnapshot checksum: ${last?.checksum}`, 'counts are against the target branch')
    assert.equal((await documentOn(repo, BRANCH))?.checksum, last?.checksum)
    assert.equal(await branchTip(repo, 'main'), mainBefore)
  })

  it('writing the proposed snapshot again pushes nothing and reports no change, still awaiting review', async () => {
    const head = await branchTip(repo, BRANCH)
    const again = await sink.write(change(4))
    assert.deepEqual({ added: again.added, changed: again.changed, removed: again.removed }, { added: 0, changed: 0, removed: 0 })
    assert.equal(requestOf(again), id)
    assert.equal(await branchTip(repo, BRANCH), head)
  })

  it('after a reviewer merges, the next write finds the target holding the snapshot, and the next change starts from the new target', async () => {
    const head = (await branchTip(repo, BRANCH)) as string
    await reviewerMerges(repo, id, head)
    const synced = await sink.write(change(4))
    assert.equal(synced.review, undefined, 'the target holds the current checksum: Synced')
    assert.equal((await documentOn(repo, 'main'))?.checksum, change(4).checksum)

    const mainNow = await branchTip(repo, 'main')
    const next = await sink.write(change(5))
    assert.deepEqual({ added: next.added, changed: next.changed, removed: next.removed }, { added: 0, changed: 1, removed: 0 }, 'counted against the merged target')
    const nextId = requestOf(next)
    assert.notEqual(nextId, id, 'the merged request is done; a new one proposes the change')
    assert.equal(await commitParent(repo, (await branchTip(repo, BRANCH)) as string), mainNow)
    assert.equal((await pulls(repo, 'open')).length, 1)
  })
})

describe('review mode against Gitea: a request closed without merging', () => {
  it('fails the sink with the reason until the next change, which opens a new request', async (t) => {
    const repo = await newRepo()
    const sink = await reviewSink(t, repo)
    const first = snapshotOf(INV, ITEMS)
    const id = requestOf(await sink.write(first))
    await repo.person.close(id)
    const err = await writeError(sink, first)
    assert.equal(err.retriable, false)
    assert.match(err.message, new RegExp(`review request ${forge.url}/${repo.project}/pulls/${id} was closed without merging; the next change of the inventory opens a new one`))
    assert.equal((await repo.person.get(id)).state, 'closed', 'a rejected proposal is not reopened')
    assert.equal((await pulls(repo, 'open')).length, 0)

    const next = requestOf(await sink.write(change(1)))
    assert.notEqual(next, id)
    assert.deepEqual((await pulls(repo, 'all')).map((p) => [String(p.number), p.state]).sort(), [[id, 'closed'], [next, 'open']].sort())
  })
})

describe('review mode against Gitea: auto-merge', () => {
  it('whenChecksPass merges the proposal once Gitea finds it mergeable; the target then holds the checksum', async (t) => {
    const repo = await newRepo()
    const sink = await reviewSink(t, repo, { autoMerge: 'whenChecksPass' })
    const first = snapshotOf(INV, ITEMS)
    // Gitea checks a new request in the background and refuses a merge until then: the poll retries.
    await untilMerged(sink, first)
    assert.equal((await documentOn(repo, 'main'))?.checksum, first.checksum)
    assert.deepEqual((await pulls(repo, 'all')).map((p) => p.state), ['closed'], 'merged, and no other request')
  })

  it('whenChecksPass waits for a required check: not merged while it is pending, merged by the poll once it passes', async (t) => {
    const repo = await requiringChecks()
    const sink = await reviewSink(t, repo, { autoMerge: 'whenChecksPass' })
    const first = snapshotOf(INV, ITEMS)
    const id = requestOf(await sink.write(first))
    const head = (await branchTip(repo, BRANCH)) as string
    await mergeable(repo, id, head)
    assert.equal(requestOf(await sink.write(first)), id, 'the check is pending: still awaiting review')
    assert.equal(await documentOn(repo, 'main'), undefined)
    await passCheck(repo, head)
    await untilMerged(sink, first)
    assert.equal((await documentOn(repo, 'main'))?.checksum, first.checksum)
  })

  it('a head moved by someone else is never merged, even with its checks passing: the sink proposes its own again', async (t) => {
    const repo = await requiringChecks()
    const sink = await reviewSink(t, repo, { autoMerge: 'whenChecksPass' })
    const first = snapshotOf(INV, ITEMS)
    const id = requestOf(await sink.write(first))
    // Someone commits to the review branch, and CI passes that commit.
    const put = await api<{ commit: { sha: string } }>('PUT', `/repos/${repo.project}/contents/${DOC}`, {
      branch: BRANCH, sha: await blobSha(repo, BRANCH), content: Buffer.from('{"hand":"edit"}\n').toString('base64'), message: 'hand edit',
    })
    assert.equal(put.status, 200)
    await mergeable(repo, id, put.data.commit.sha)
    await passCheck(repo, put.data.commit.sha)

    assert.equal(requestOf(await sink.write(first)), id, 'stale: nothing merged, still awaiting review')
    assert.equal(await documentOn(repo, 'main'), undefined, 'the hand edit never reached the target')
    // The next poll puts the sink's own proposal back; once CI passes it, that is merged.
    assert.equal(requestOf(await sink.write(first)), id)
    const own = (await branchTip(repo, BRANCH)) as string
    assert.notEqual(own, put.data.commit.sha)
    assert.equal((await documentOn(repo, BRANCH))?.checksum, first.checksum)
    await mergeable(repo, id, own)
    await passCheck(repo, own)
    await untilMerged(sink, first)
    assert.equal((await documentOn(repo, 'main'))?.checksum, first.checksum)
  })
})

/** A repository whose main branch needs the status check ci/test to pass before a merge. */
async function requiringChecks(): Promise<Repo> {
  const repo = await newRepo()
  const rule = await api('POST', `/repos/${repo.project}/branch_protections`, { rule_name: 'main', enable_status_check: true, status_check_contexts: ['ci/test'] })
  assert.equal(rule.status, 201)
  return repo
}

async function passCheck(repo: Repo, sha: string): Promise<void> {
  assert.equal((await api('POST', `/repos/${repo.project}/statuses/${sha}`, { state: 'success', context: 'ci/test' })).status, 201)
}

/** Polls as the exporter does (a write of the same snapshot) until the request is merged. */
async function untilMerged(sink: Sink, snapshot: Snapshot): Promise<void> {
  await pollUntil('the poll merges the request', async () => (await sink.write(snapshot)).review === undefined, { timeoutMs: 60_000, intervalMs: 500 })
}

async function blobSha(repo: Repo, ref: string): Promise<string> {
  const res = await api<{ sha: string }>('GET', `/repos/${repo.project}/contents/${DOC}?ref=${encodeURIComponent(ref)}`)
  assert.equal(res.status, 200)
  return res.data.sha
}

describe('review mode against Gitea: finalize', () => {
  it('deletionPolicy Delete closes the open request and deletes the review branch; the target branch is left as it is', async (t) => {
    const repo = await newRepo()
    const sink = await reviewSink(t, repo)
    const id = requestOf(await sink.write(snapshotOf(INV, ITEMS)))
    const main = await branchTip(repo, 'main')
    await sink.remove(INV, 'lab-west')
    assert.equal((await repo.person.get(id)).state, 'closed')
    assert.equal(await branchTip(repo, BRANCH), undefined)
    assert.equal(await branchTip(repo, 'main'), main)
    await sink.remove(INV, 'lab-west')
  })
})

describe('review mode against Gitea: bad input', () => {
  it('a wrong token: a clear permanent failure, and the token in no message', async (t) => {
    const repo = await newRepo()
    const wrong = 'f'.repeat(40)
    const sink = await reviewSink(t, repo, {}, wrong)
    const err = await writeError(sink, snapshotOf(INV, ITEMS))
    assert.equal(err.retriable, false)
    assert.ok(!err.message.includes(wrong), err.message)
    assert.match(err.message, /the remote refused the credentials: check the sink secret/)
  })

  it('an unknown project: the forge says so, permanently; nothing is opened', async (t) => {
    const repo = await newRepo()
    const sink = await reviewSink(t, { ...repo, project: `${forge.user}/no-such-repo` })
    const err = await writeError(sink, snapshotOf(INV, ITEMS))
    assert.equal(err.retriable, false)
    assert.match(err.message, /review: open or update the request \(the forge does not know the project or request; check review\.project and review\.apiUrl\) failed/)
    assert.equal((await pulls(repo, 'all')).length, 0)
  })

  it('a protected review branch: the push refusal is a clear permanent failure', async (t) => {
    const repo = await newRepo()
    assert.equal((await api('POST', `/repos/${repo.project}/branch_protections`, { rule_name: 'kollect/**', enable_push: false })).status, 201)
    const sink = await reviewSink(t, repo)
    const err = await writeError(sink, snapshotOf(INV, ITEMS))
    assert.equal(err.retriable, false)
    assert.match(err.message, /push failed: .*protected branch/i)
    assert.equal((await pulls(repo, 'all')).length, 0)
  })
})

test('review mode runs no drift check: a repair would push to the target past the review', async (t) => {
  const repo = await newRepo()
  const sink = await reviewSink(t, repo)
  assert.equal(sink.verify, undefined)
})

describe('review mode in the exporter: status follows the request', () => {
  const TARGET: ObjectRef = { namespace: 'team-a', name: 'deploys' }
  const SINK: ObjectRef = { namespace: 'team-a', name: 'reviewed' }
  const items = ITEMS.map((item) => ({ ...item, target: TARGET }))

  async function exporting(t: TestContext, spec: KollectSinkSpec, token = forge.token) {
    const clock = new FakeClock()
    const exporter = new Exporter({
      cluster: 'lab-west',
      clock,
      backoff: { minMs: 1, maxMs: 5, factor: 2 },
      createSink: async (resolved) => {
        const sinkSpec = (resolved as ResolvedSink).spec
        return createGitSink({ id: 'team-a/reviewed', spec: sinkSpec, credentials: { token }, dataDir: await tempDir(t), checkEndpoint: () => Promise.resolve(null) })
      },
    })
    t.after(() => exporter.close())
    const composition: InventoryComposition = { inventory: INV, generation: 1, targets: [TARGET], sinks: [{ ...SINK, spec }], debounceMs: 1_000, maxWaitMs: 10_000, suspend: false }
    await exporter.applyInventory(composition)
    await exporter.reportTarget({ target: TARGET, generation: 1, checksum: '', items, failedKeys: [] })
    clock.advance(1_000)
    await exporter.idle()
    const status = () => {
      const parent = { apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectInventory', metadata: { name: INV.name, namespace: INV.namespace, generation: 1 }, spec: {} }
      const state = exporter.inventoryState(INV)
      return inventoryStatus({ controller: {}, parent, children: {}, related: {} } as unknown as SyncRequest, { ok: true, composition, problems: [] }, state)
    }
    return { clock, exporter, composition, status }
  }

  it('AwaitingReview with the request URL until a reviewer merges; the next poll then finds it Synced', async (t) => {
    const repo = await newRepo()
    const { clock, exporter, status } = await exporting(t, reviewSpec(repo, { pollInterval: '30s' }))
    const sink = exporter.inventoryState(INV)?.sinks[0]
    assert.equal(sink?.state, 'AwaitingReview', sink?.message)
    const url = sink?.reviewUrl ?? ''
    assert.match(url, new RegExp(`^${forge.url}/${repo.project}/pulls/\\d+$`))
    assert.equal(sink?.message, `awaiting review: ${url}`)
    assert.deepEqual(status().conditions?.filter((c) => c.type !== 'Ready').map((c) => [c.type, c.status, c.reason, c.message]), [
      ['Degraded', 'False', 'AsExpected', ''],
      ['Synced', 'False', 'AwaitingReview', `1 of 1 sinks await review: team-a/reviewed ${url}`],
    ])
    assert.equal(exporter.inventoryState(INV)?.nextChangeInMs, 30_000, 'Metacontroller is asked back at the poll')

    // Not merged yet: the poll leaves it awaiting review.
    clock.advance(30_000)
    await exporter.idle()
    assert.equal(exporter.inventoryState(INV)?.sinks[0]?.state, 'AwaitingReview')

    const id = url.split('/').pop() as string
    const head = (await branchTip(repo, BRANCH)) as string
    await reviewerMerges(repo, id, head)
    clock.advance(30_000)
    await exporter.idle()
    const synced = exporter.inventoryState(INV)?.sinks[0]
    assert.equal(synced?.state, 'Synced', synced?.message)
    assert.equal(synced?.reviewUrl, undefined)
    assert.equal((await documentOn(repo, 'main'))?.checksum, synced?.checksum)
    assert.deepEqual(status().conditions?.find((c) => c.type === 'Synced')?.reason, 'Exported')
    assert.equal(exporter.inventoryState(INV)?.nextChangeInMs, undefined, 'no more polls')
  })

  it('finalize with deletionPolicy Retain leaves the open request and its branch', async (t) => {
    const repo = await newRepo()
    const { exporter, composition } = await exporting(t, { ...reviewSpec(repo), deletionPolicy: 'Retain' })
    const url = exporter.inventoryState(INV)?.sinks[0]?.reviewUrl ?? ''
    assert.ok(url)
    assert.equal((await exporter.finalizeInventory(composition)).finalized, true)
    assert.equal((await repo.person.get(url.split('/').pop() as string)).state, 'open')
    assert.ok(await branchTip(repo, BRANCH))
  })

  it('finalize with deletionPolicy Delete closes the request and deletes its branch', async (t) => {
    const repo = await newRepo()
    const { exporter, composition } = await exporting(t, { ...reviewSpec(repo), deletionPolicy: 'Delete' })
    const url = exporter.inventoryState(INV)?.sinks[0]?.reviewUrl ?? ''
    assert.equal((await exporter.finalizeInventory(composition)).finalized, true)
    assert.equal((await repo.person.get(url.split('/').pop() as string)).state, 'closed')
    assert.equal(await branchTip(repo, BRANCH), undefined)
  })

  it('a wrong token: Failing with the reason in status, never the token', async (t) => {
    const repo = await newRepo()
    const wrong = '0'.repeat(40)
    const { exporter } = await exporting(t, reviewSpec(repo), wrong)
    const sink = exporter.inventoryState(INV)?.sinks[0]
    assert.equal(sink?.state, 'Failing')
    assert.match(sink?.message ?? '', /the remote refused the credentials: check the sink secret.*\(permanent/)
    assert.ok(!JSON.stringify(exporter.inventoryState(INV)).includes(wrong))
  })
})
