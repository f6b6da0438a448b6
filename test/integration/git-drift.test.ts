import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'
import { buildSnapshot, itemKey } from '../../api/canonical.js'
import type { Item, ObjectRef, Snapshot } from '../../api/types.js'
import { itemPath, renderItem, renderSnapshot } from '../../sinks/document.js'
import type { GitLayout } from '../../sinks/git/config.js'
import { blobId } from '../../sinks/git/drift.js'
import { createGitSink } from '../../sinks/git/index.js'
import { envelopePath, groupByShard, renderSharded, shardedFiles, shardOf, shardOfPath, shardPath } from '../../sinks/git/shards.js'
import { defaultSinkOptions } from '../../sinks/registry.js'
import type { DriftMode, DriftResult, Sink } from '../../sinks/sink.js'
import { bumpReplicas, makeItems } from '../support/items.js'
import {
  changedLines,
  cloneRemote,
  createBareRemote,
  git,
  gitLog,
  gitSinkOptions,
  listTree,
  numstat,
  pushFromOtherWriterAfterCommit,
  showFile,
  tempDir,
  withSink,
} from '../support/git.js'

// Issue 16, finding 3: another writer changes the record behind Kollect's back, and a resync
// with unchanged input must be able to see it and put the snapshot back.

const INVENTORY: ObjectRef = { namespace: 'team-a', name: 'deployments' }
const DOCUMENT = 'inventory/lab-west/team-a/deployments.json'
const RESOURCE_DIR = 'inventory/lab-west/team-a/deployments'

function snapshot(items: readonly Item[]) {
  return buildSnapshot(INVENTORY, 'lab-west', items)
}

function verify(sink: Sink, snap: Snapshot, mode: DriftMode): Promise<DriftResult> {
  assert.ok(sink.verify, 'the git sink implements verify')
  return sink.verify(snap, mode)
}

/** The document as another writer leaves it after setting one item's replicas by hand (checksum line untouched). */
function handEdited(snap: Snapshot, index: number, replicas: number): string {
  return renderSnapshot({ ...snap, items: snap.items.map((item, i) => (i === index ? bumpReplicas(item, replicas) : item)) })
}

async function head(dir: string, ref = 'main'): Promise<string> {
  return (await git(dir, 'rev-parse', ref)).trim()
}

async function remoteSetup(t: { after(fn: () => Promise<void>): void }, layout: GitLayout = 'document', shards?: number) {
  const root = await tempDir(t)
  const remote = await createBareRemote(root)
  const dataDir = path.join(root, 'data')
  const sink = withSink(t, createGitSink(gitSinkOptions(dataDir, { url: remote, layout, shards })))
  return { root, remote, work: path.join(dataDir, 'work'), sink }
}

/** Another writer's clone: `change` edits its files, then everything is committed and pushed. */
async function otherWriterPushes(root: string, remote: string, change: (dir: string) => Promise<void>): Promise<string> {
  const other = await cloneRemote(remote, path.join(root, `other-${Math.random().toString(36).slice(2)}`))
  await change(other)
  await git(other, 'add', '-A')
  await git(other, 'commit', '-q', '-m', 'hand edit')
  await git(other, 'push', '-q', 'origin', 'HEAD:main')
  return other
}

describe('git sink drift, remote', () => {
  it('document: a hand edit is reported without writing, repaired as one commit, then in step', async (t) => {
    const { root, remote, sink } = await remoteSetup(t)
    const snap = snapshot(makeItems(5))
    await sink.write(snap)
    await otherWriterPushes(root, remote, (dir) => writeFile(path.join(dir, DOCUMENT), handEdited(snap, 2, 77)))
    const edited = await head(remote)

    const key = itemKey(snap.items[2] as Item)
    assert.deepEqual(await verify(sink, snap, 'report'), { differences: 1, examples: [key], repaired: false })
    assert.equal(await head(remote), edited, 'report wrote nothing')

    assert.deepEqual(await verify(sink, snap, 'repair'), { differences: 1, examples: [key], repaired: true })
    const log = await gitLog(remote, 'main')
    assert.equal(log[1]?.sha, edited, 'exactly one commit on top of the hand edit')
    assert.equal(log[0]?.subject, 'kollect: repair drift in team-a/deployments (1 items)')
    assert.equal(log[0]?.author, 'kollect <kollect@kollect.dev>')
    assert.equal(log[0]?.trailers['Kollect-Checksum'], snap.checksum)
    const replicas = (snap.items[2] as Item).attributes.replicas as number
    assert.deepEqual(await changedLines(remote, edited, 'main'), ['-        "replicas": 77,', `+        "replicas": ${replicas},`])
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snap))

    const repaired = await head(remote)
    assert.deepEqual(await verify(sink, snap, 'report'), { differences: 0, examples: [], repaired: false })
    assert.deepEqual(await verify(sink, snap, 'repair'), { differences: 0, examples: [], repaired: false })
    assert.deepEqual(await sink.write(snap), { added: 0, changed: 0, removed: 0 })
    assert.equal(await head(remote), repaired, 'no commit once in step')
  })

  it('document: after a report finds drift, an ordinary write of the same snapshot restores it', async (t) => {
    const { root, remote, sink } = await remoteSetup(t)
    const snap = snapshot(makeItems(4))
    await sink.write(snap)
    await otherWriterPushes(root, remote, (dir) => writeFile(path.join(dir, DOCUMENT), handEdited(snap, 0, 77)))

    assert.equal((await verify(sink, snap, 'report')).differences, 1)
    assert.deepEqual(await sink.write(snap), { added: 0, changed: 1, removed: 0 })
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snap))
    assert.equal((await verify(sink, snap, 'report')).differences, 0)
  })

  it('document: added, removed and header edits are counted per item, the header once, examples capped at five', async (t) => {
    const { root, remote, sink } = await remoteSetup(t)
    const snap = snapshot(makeItems(10))
    const items = snap.items
    await sink.write(snap)
    // Theirs: items 0-1 gone, items 2-7 edited, two items we never had, and a checksum of their own.
    const theirs = [...items.slice(2).map((item, i) => (i < 6 ? bumpReplicas(item, 70 + i) : item)), ...makeItems(2, 100)]
    await otherWriterPushes(root, remote, (dir) => writeFile(path.join(dir, DOCUMENT), renderSnapshot(snapshot(theirs))))

    const found = await verify(sink, snap, 'report')
    assert.equal(found.differences, 2 + 6 + 2 + 1)
    assert.deepEqual(found.examples, items.slice(0, 5).map(itemKey))
    assert.equal(found.repaired, false)

    assert.equal((await verify(sink, snap, 'repair')).repaired, true)
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snap))
  })

  it('document: a deleted document is drift of every item plus the header, and the repair brings it back', async (t) => {
    const { root, remote, sink } = await remoteSetup(t)
    const snap = snapshot(makeItems(2))
    await sink.write(snap)
    await otherWriterPushes(root, remote, (dir) => rm(path.join(dir, DOCUMENT)))

    assert.deepEqual(await verify(sink, snap, 'report'), {
      differences: 3,
      examples: [...snap.items.map(itemKey), DOCUMENT],
      repaired: false,
    })
    assert.equal((await verify(sink, snap, 'repair')).repaired, true)
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snap))
  })

  it('perResource: an edited file, a stray file and a deleted file are found and repaired in one commit', async (t) => {
    const { root, remote, sink } = await remoteSetup(t, 'perResource')
    const snap = snapshot(makeItems(4))
    const items = snap.items
    await sink.write(snap)
    const [edited, , deleted] = items as [Item, Item, Item]
    const stray = `${RESOURCE_DIR}/team-a/stray.json`
    await otherWriterPushes(root, remote, async (dir) => {
      await writeFile(path.join(dir, itemPath(RESOURCE_DIR, edited)), renderItem(bumpReplicas(edited, 77)))
      await rm(path.join(dir, itemPath(RESOURCE_DIR, deleted)))
      await mkdir(path.dirname(path.join(dir, stray)), { recursive: true })
      await writeFile(path.join(dir, stray), '{}\n')
    })
    const before = await head(remote)

    const expected = { differences: 3, examples: [itemKey(edited), itemKey(deleted), stray] }
    assert.deepEqual(await verify(sink, snap, 'report'), { ...expected, repaired: false })
    assert.equal(await head(remote), before, 'report wrote nothing')

    assert.deepEqual(await verify(sink, snap, 'repair'), { ...expected, repaired: true })
    const log = await gitLog(remote, 'main')
    assert.equal(log[1]?.sha, before, 'exactly one commit')
    assert.equal(log[0]?.subject, 'kollect: repair drift in team-a/deployments (3 items)')
    const touched = (await numstat(remote, before, 'main')).map((row) => row.path).sort()
    assert.deepEqual(touched, [itemPath(RESOURCE_DIR, edited), itemPath(RESOURCE_DIR, deleted), stray].sort())
    assert.deepEqual((await listTree(remote, 'main', RESOURCE_DIR)).sort(), items.map((item) => itemPath(RESOURCE_DIR, item)).sort())
    for (const item of items) assert.equal(await showFile(remote, 'main', itemPath(RESOURCE_DIR, item)), renderItem(item))

    const repaired = await head(remote)
    assert.deepEqual(await verify(sink, snap, 'repair'), { differences: 0, examples: [], repaired: false })
    assert.deepEqual(await sink.write(snap), { added: 0, changed: 0, removed: 0 })
    assert.equal(await head(remote), repaired)
  })

  it('sharded: an edited item, a deleted shard and a stray file are found, and repaired by rewriting only those', async (t) => {
    const { root, remote, sink } = await remoteSetup(t, 'sharded', 4)
    const snap = snapshot(makeItems(40))
    const items = snap.items
    await sink.write(snap)
    const edited = items[3] as Item
    const editedShard = shardPath(RESOURCE_DIR, shardOf(itemKey(edited), 4), 4)
    const deletedShard = shardedFiles(RESOURCE_DIR, 4).find((file) => file !== editedShard && file !== envelopePath(RESOURCE_DIR)) as string
    const lost = groupByShard(items, 4).get(shardOfPath(RESOURCE_DIR, deletedShard)?.shard ?? -1) ?? []
    const stray = `${RESOURCE_DIR}/stray.json`
    await otherWriterPushes(root, remote, async (dir) => {
      const file = path.join(dir, editedShard)
      await writeFile(file, (await readFile(file, 'utf8')).replace(`"replicas": ${String(edited.attributes['replicas'])},`, '"replicas": 77,'))
      await rm(path.join(dir, deletedShard))
      await writeFile(path.join(dir, stray), '{}\n')
    })
    const before = await head(remote)

    const found = await verify(sink, snap, 'report')
    assert.equal(found.differences, 1 + lost.length + 1, 'the edited item, each item of the deleted shard, the stray file')
    assert.equal(await head(remote), before, 'report wrote nothing')

    assert.equal((await verify(sink, snap, 'repair')).repaired, true)
    assert.equal((await gitLog(remote, 'main'))[1]?.sha, before, 'exactly one commit')
    assert.deepEqual((await numstat(remote, before, 'main')).map((row) => row.path).sort(), [editedShard, deletedShard, stray].sort())
    for (const [file, text] of renderSharded(RESOURCE_DIR, snap, 4)) assert.equal(await showFile(remote, 'main', file), text)
    assert.deepEqual(await verify(sink, snap, 'repair'), { differences: 0, examples: [], repaired: false })
  })

  it('a repair whose push loses the race is rebased like an export: both commits land', async (t) => {
    const { root, remote, work, sink } = await remoteSetup(t)
    const snap = snapshot(makeItems(3))
    await sink.write(snap)
    await otherWriterPushes(root, remote, (dir) => writeFile(path.join(dir, DOCUMENT), handEdited(snap, 1, 77)))
    const racer = await cloneRemote(remote, path.join(root, 'racer'))
    await writeFile(path.join(racer, 'README.md'), 'written by a person\n')
    await git(racer, 'add', 'README.md')
    await git(racer, 'commit', '-q', '-m', 'docs: readme')
    await pushFromOtherWriterAfterCommit(work, racer, 'once')

    assert.equal((await verify(sink, snap, 'repair')).repaired, true)
    assert.ok(existsSync(path.join(work, '.git', 'other-writer-pushed')), 'the other writer did push in between')
    const subjects = (await gitLog(remote, 'main')).map((entry) => entry.subject)
    assert.deepEqual(subjects.slice(0, 3), ['kollect: repair drift in team-a/deployments (1 items)', 'docs: readme', 'hand edit'])
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snap))
  })

  it('a remote without the branch: report says every item is missing and creates nothing', async (t) => {
    const { remote, sink } = await remoteSetup(t)
    const snap = snapshot(makeItems(2))
    assert.equal((await verify(sink, snap, 'report')).differences, 3)
    assert.equal((await git(remote, 'branch', '--list')).trim(), '', 'no branch created')
  })
})

describe('git sink drift, serialised and measured', () => {
  it('a verify issued during an export waits for it: it sees the exported snapshot in step', async (t) => {
    const { sink } = await remoteSetup(t)
    await sink.write(snapshot(makeItems(50)))
    const next = snapshot(makeItems(50, 1))
    // Not awaited: both calls are queued at once; interleaved, the check would read the old tip.
    const [written, found] = await Promise.all([sink.write(next), verify(sink, next, 'report')])
    assert.deepEqual(written, { added: 1, changed: 0, removed: 1 })
    assert.deepEqual(found, { differences: 0, examples: [], repaired: false })
  })

  it('10k items, document: verify costs a fraction of the initial export', async (t) => {
    const { root, remote, sink } = await remoteSetup(t)
    const snap = snapshot(makeItems(10_000))
    let started = performance.now()
    await sink.write(snap)
    const exportMs = performance.now() - started

    started = performance.now()
    assert.equal((await verify(sink, snap, 'report')).differences, 0)
    const inStepMs = performance.now() - started

    await otherWriterPushes(root, remote, (dir) => writeFile(path.join(dir, DOCUMENT), handEdited(snap, 5_000, 77)))
    started = performance.now()
    assert.equal((await verify(sink, snap, 'report')).differences, 1)
    const driftMs = performance.now() - started
    started = performance.now()
    assert.equal((await verify(sink, snap, 'repair')).repaired, true)
    const repairMs = performance.now() - started

    const ratio = (ms: number): string => `${ms.toFixed(0)} ms (${(ms / exportMs).toFixed(2)}x)`
    t.diagnostic(
      `10k document: initial export ${exportMs.toFixed(0)} ms; verify in step ${ratio(inStepMs)}, ` +
        `verify finding 1 drifted item ${ratio(driftMs)}, repair ${ratio(repairMs)}`,
    )
    // In step, a verify is a fetch and one object id: far below an export that writes 10k items.
    assert.ok(inStepMs < exportMs, `verify ${inStepMs} ms, export ${exportMs} ms`)
  })
})

describe('git sink drift, embedded default (local repository)', () => {
  it('an edit committed in the repository by hand is found and repaired', async (t) => {
    const root = await tempDir(t)
    const options = defaultSinkOptions(root)
    const repo = options.dataDir
    const sink = withSink(t, createGitSink(options))
    const snap = snapshot(makeItems(5))
    await sink.write(snap)
    await writeFile(path.join(repo, DOCUMENT), handEdited(snap, 4, 77))
    await git(repo, 'commit', '-q', '-am', 'hand edit')
    const edited = await head(repo)

    const key = itemKey(snap.items[4] as Item)
    assert.deepEqual(await verify(sink, snap, 'report'), { differences: 1, examples: [key], repaired: false })
    assert.equal(await head(repo), edited)
    assert.equal(await readFile(path.join(repo, DOCUMENT), 'utf8'), handEdited(snap, 4, 77), 'report leaves the working tree alone')

    assert.deepEqual(await verify(sink, snap, 'repair'), { differences: 1, examples: [key], repaired: true })
    assert.equal((await git(repo, 'rev-parse', 'HEAD~1')).trim(), edited)
    assert.equal((await gitLog(repo))[0]?.subject, 'kollect: repair drift in team-a/deployments (1 items)')
    assert.equal(await showFile(repo, 'HEAD', DOCUMENT), renderSnapshot(snap))
    assert.equal((await git(repo, 'status', '--porcelain')).trim(), '')

    const repaired = await head(repo)
    assert.deepEqual(await verify(sink, snap, 'repair'), { differences: 0, examples: [], repaired: false })
    assert.equal(await head(repo), repaired)
  })
})

describe('git sink object store', () => {
  it('blobId names a file as git does, so an in-step file is recognised without reading it', async (t) => {
    const dir = await tempDir(t)
    for (const text of ['', 'a\n', renderSnapshot(snapshot(makeItems(3))), 'ünïcødé\n']) {
      await writeFile(path.join(dir, 'f'), text)
      assert.equal(blobId(text, 'sha1'), (await git(dir, 'hash-object', 'f')).trim())
    }
  })

  it('after the first export to an empty remote, git fsck --full passes in the clone and in the remote', async (t) => {
    const root = await tempDir(t)
    const remote = await createBareRemote(root)
    const dataDir = path.join(root, 'data')
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir, { url: remote })))
    await sink.write(snapshot(makeItems(3)))

    // execFile rejects on a non-zero exit, so each call asserts exit 0; --no-dangling keeps the
    // output to real problems.
    for (const dir of [path.join(dataDir, 'work'), remote]) {
      assert.equal(await git(dir, 'fsck', '--full', '--strict', '--no-dangling'), '', dir)
    }
  })
})
