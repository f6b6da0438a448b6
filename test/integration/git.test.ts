import assert from 'node:assert/strict'
import { once } from 'node:events'
import { existsSync } from 'node:fs'
import { readFile, rm, writeFile } from 'node:fs/promises'
import http from 'node:http'
import path from 'node:path'
import { describe, it } from 'node:test'
import { buildSnapshot, canonicalJsonPretty, itemKey } from '../../api/canonical.js'
import type { Item, ObjectRef } from '../../api/types.js'
import { itemPath, renderSnapshot } from '../../sinks/document.js'
import { readStoredInventory } from '../../sinks/git/read.js'
import { envelopePath, shardedFiles, shardOf, shardPath } from '../../sinks/git/shards.js'
import { resolveGitSettings } from '../../sinks/git/config.js'
import { createGitSink } from '../../sinks/git/index.js'
import { gitFailure } from '../../sinks/git/process.js'
import { LOOSE_OBJECTS_BEFORE_REPACK } from '../../sinks/git/service.js'
import { bumpReplicas, makeItems } from '../support/items.js'
import { freePort } from '../support/ports.js'
import { rejection } from '../support/assertions.js'
import {
  changedLines,
  cloneRemote,
  createBareRemote,
  git,
  gitLog,
  gitSinkOptions,
  listTree,
  looseObjects,
  numstat,
  packedBlobs,
  pushFromOtherWriterAfterCommit,
  removeHooks,
  showFile,
  tempDir,
  withSink,
} from '../support/git.js'

const INVENTORY: ObjectRef = { namespace: 'team-a', name: 'deployments' }
const CLUSTER = 'lab-west'
const DOCUMENT = 'inventory/lab-west/team-a/deployments.json'
const RESOURCE_DIR = 'inventory/lab-west/team-a/deployments'
const DOCUMENT_TEMPLATE = 'inventory/{cluster}/{namespace}/{name}.json'
const TOKEN = 'tok-s3cr3t'

function snapshot(items: readonly Item[]) {
  return buildSnapshot(INVENTORY, CLUSTER, items)
}

/** A clone of the remote in which a person has committed a README (not pushed yet). */
async function personCommitsReadme(remote: string, root: string): Promise<string> {
  const other = await cloneRemote(remote, path.join(root, 'other'))
  await writeFile(path.join(other, 'README.md'), 'written by a person\n')
  await git(other, 'add', 'README.md')
  await git(other, 'commit', '-q', '-m', 'docs: readme')
  return other
}


function assertNoSecret(text: string, secret: string, user = 'x-access-token'): void {
  for (const form of [secret, Buffer.from(secret).toString('base64'), Buffer.from(`${user}:${secret}`).toString('base64')]) {
    assert.ok(!text.includes(form), `"${text}" contains a form of the secret (${form})`)
  }
}

describe('git sink, local repository (embedded default)', () => {
  it('first export is one commit carrying the trailers and the canonical document', async (t) => {
    const dataDir = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir)))
    const snap = snapshot(makeItems(5))

    assert.deepEqual(await sink.write(snap), { added: 5, changed: 0, removed: 0 })

    const log = await gitLog(dataDir)
    assert.equal(log.length, 1)
    assert.equal(log[0]?.subject, 'kollect: team-a/deployments +5 ~0 -0 (5 items)')
    assert.equal(log[0]?.author, 'kollect <kollect@kollect.dev>')
    assert.deepEqual(log[0]?.trailers, {
      'Kollect-Inventory': 'team-a/deployments',
      'Kollect-Cluster': CLUSTER,
      'Kollect-Checksum': snap.checksum,
    })
    assert.equal(await showFile(dataDir, 'HEAD', DOCUMENT), canonicalJsonPretty(snap))
    assert.equal((await git(dataDir, 'rev-parse', '--abbrev-ref', 'HEAD')).trim(), 'main')
    assert.equal((await git(dataDir, 'status', '--porcelain')).trim(), '')
  })

  it('a one-item change is one commit touching only that attribute line and the checksum line', async (t) => {
    const dataDir = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir)))
    const items = makeItems(20)
    await sink.write(snapshot(items))
    items[7] = bumpReplicas(items[7] as Item, 42)
    const changed = snapshot(items)

    assert.deepEqual(await sink.write(changed), { added: 0, changed: 1, removed: 0 })

    const log = await gitLog(dataDir)
    assert.equal(log.length, 2)
    assert.equal(log[0]?.subject, 'kollect: team-a/deployments +0 ~1 -0 (20 items)')
    assert.equal(log[0]?.trailers['Kollect-Checksum'], changed.checksum)
    assert.deepEqual(await numstat(dataDir, 'HEAD~1'), [{ added: 2, deleted: 2, path: DOCUMENT }])
    const lines = await changedLines(dataDir, 'HEAD~1')
    assert.deepEqual(lines.filter((l) => l.startsWith('+')), [
      `+  "checksum": "${changed.checksum}",`,
      '+        "replicas": 42,',
    ])
    assert.deepEqual(
      lines.filter((l) => l.startsWith('-')).map((l) => l.replace(/"[0-9a-f]{64}"/, '"<sha>"').replace(/\d+,$/, 'N,')),
      ['-  "checksum": "<sha>",', '-        "replicas": N,'],
    )
  })

  it('the same snapshot again makes no commit and reports zeros', async (t) => {
    const dataDir = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir)))
    const snap = snapshot(makeItems(4))
    await sink.write(snap)
    const head = (await git(dataDir, 'rev-parse', 'HEAD')).trim()

    assert.deepEqual(await sink.write(snap), { added: 0, changed: 0, removed: 0 })
    assert.deepEqual(await sink.write(snapshot([...snap.items].reverse())), { added: 0, changed: 0, removed: 0 })
    assert.equal((await git(dataDir, 'rev-parse', 'HEAD')).trim(), head)
  })

  it('a new sink instance on the same directory diffs against the repository (restart)', async (t) => {
    const dataDir = await tempDir(t)
    const items = makeItems(10)
    const first = createGitSink(gitSinkOptions(dataDir))
    await first.write(snapshot(items))
    await first.close()

    const restarted = withSink(t, createGitSink(gitSinkOptions(dataDir)))
    items[3] = bumpReplicas(items[3] as Item, 9)
    assert.deepEqual(await restarted.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
    assert.equal((await gitLog(dataDir)).length, 2)
  })

  it('a wiped data directory is re-created on the next export', async (t) => {
    const dataDir = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir)))
    const snap = snapshot(makeItems(2))
    await sink.write(snap)
    await rm(dataDir, { recursive: true, force: true })

    await sink.healthcheck()
    assert.deepEqual(await sink.write(snap), { added: 2, changed: 0, removed: 0 })
    assert.equal((await gitLog(dataDir)).length, 1)
  })

  it('diffs against the branch tip, not against a working tree someone edited', async (t) => {
    const dataDir = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir)))
    const snap = snapshot(makeItems(3))
    await sink.write(snap)
    await writeFile(path.join(dataDir, DOCUMENT), 'not json')
    await writeFile(path.join(dataDir, 'inventory', 'stray.txt'), 'x')

    assert.deepEqual(await sink.write(snap), { added: 0, changed: 0, removed: 0 })
    assert.equal((await gitLog(dataDir)).length, 1)
    assert.equal(await readFile(path.join(dataDir, DOCUMENT), 'utf8'), canonicalJsonPretty(snap))
  })

  it('perResource: one file per item, a removed item deletes its file, a restart diffs from the files', async (t) => {
    const dataDir = await tempDir(t)
    const options = gitSinkOptions(dataDir, { layout: 'perResource' })
    const items = makeItems(6)
    const first = createGitSink(options)
    assert.deepEqual(await first.write(snapshot(items)), { added: 6, changed: 0, removed: 0 })

    const files = await listTree(dataDir, 'HEAD', RESOURCE_DIR)
    assert.equal(files.length, 6)
    const gone = items[2] as Item
    const gonePath = itemPath(RESOURCE_DIR, gone)
    assert.equal(gonePath, `${RESOURCE_DIR}/team-a/prod-deploys/apps/Deployment/${gone.namespace}/${gone.name}.json`)
    assert.ok(files.includes(gonePath))
    assert.equal(await showFile(dataDir, 'HEAD', gonePath), canonicalJsonPretty(gone))

    const remaining = items.filter((item) => item !== gone)
    assert.deepEqual(await first.write(snapshot(remaining)), { added: 0, changed: 0, removed: 1 })
    assert.deepEqual(await numstat(dataDir, 'HEAD~1'), [{ added: 0, deleted: canonicalJsonPretty(gone).split('\n').length - 1, path: gonePath }])
    assert.ok(!existsSync(path.join(dataDir, gonePath)))
    assert.ok(!(await listTree(dataDir, 'HEAD', RESOURCE_DIR)).includes(gonePath))
    await first.close()

    const restarted = withSink(t, createGitSink(options))
    remaining[0] = bumpReplicas(remaining[0] as Item, 77)
    assert.deepEqual(await restarted.write(snapshot(remaining)), { added: 0, changed: 1, removed: 0 })
    assert.deepEqual((await numstat(dataDir, 'HEAD~1')).map((row) => row.path), [itemPath(RESOURCE_DIR, remaining[0] as Item)])
    assert.deepEqual(await restarted.write(snapshot(remaining)), { added: 0, changed: 0, removed: 0 })
    assert.equal((await gitLog(dataDir)).length, 3)
  })

  it('sharded: a 1-item change rewrites its one shard and the envelope; git log -p shows the changed line', async (t) => {
    const dataDir = await tempDir(t)
    const options = gitSinkOptions(dataDir, { layout: 'sharded', shards: 4 })
    const items = makeItems(120)
    const first = createGitSink(options)
    assert.deepEqual(await first.write(snapshot(items)), { added: 120, changed: 0, removed: 0 })
    assert.deepEqual(await listTree(dataDir, 'HEAD', RESOURCE_DIR), shardedFiles(RESOURCE_DIR, 4))
    const held = await Promise.all([0, 1, 2, 3].map(async (shard) => JSON.parse(await showFile(dataDir, 'HEAD', shardPath(RESOURCE_DIR, shard, 4))) as { items: Item[] }))
    assert.deepEqual(held.flatMap((file) => file.items).map(itemKey).sort(), items.map(itemKey).sort(), 'every item in exactly one shard')
    for (const [shard, file] of held.entries()) assert.ok(file.items.every((item) => shardOf(itemKey(item), 4) === shard))

    items[42] = bumpReplicas(items[42] as Item, 4242)
    assert.deepEqual(await first.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
    const changed = shardPath(RESOURCE_DIR, shardOf(itemKey(items[42] as Item), 4), 4)
    assert.deepEqual((await numstat(dataDir, 'HEAD~1')).map((row) => [row.path, row.added, row.deleted]).sort(),
      [[envelopePath(RESOURCE_DIR), 1, 1], [changed, 1, 1]].sort())
    const patch = await git(dataDir, 'log', '-p', '-1', '--format=', '--', changed)
    assert.match(patch, /^\+ {8}"replicas": 4242,$/m)
    const envelope = JSON.parse(await showFile(dataDir, 'HEAD', envelopePath(RESOURCE_DIR))) as Record<string, unknown>
    assert.deepEqual(envelope, { ...JSON.parse(canonicalJsonPretty({ ...snapshot(items), items: undefined })), shards: 4 })
    await first.close()

    // A restart reads the shards back, and a new count moves every item to its new shard.
    const restarted = withSink(t, createGitSink(options))
    items[7] = bumpReplicas(items[7] as Item, 7)
    assert.deepEqual(await restarted.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
    assert.equal((await numstat(dataDir, 'HEAD~1')).length, 2)
    const recounted = withSink(t, createGitSink(gitSinkOptions(dataDir, { layout: 'sharded', shards: 3 })))
    assert.deepEqual(await recounted.write(snapshot(items)), { added: 0, changed: 0, removed: 0 })
    assert.deepEqual(await listTree(dataDir, 'HEAD', RESOURCE_DIR), shardedFiles(RESOURCE_DIR, 3))
    assert.equal((await git(dataDir, 'status', '--porcelain')).trim(), '')
  })

  it('every layout stores the same items: read back from the repository, whichever wrote it', async (t) => {
    const items = makeItems(30)
    for (const layout of ['document', 'perResource', 'sharded'] as const) {
      const dataDir = await tempDir(t)
      const sink = withSink(t, createGitSink(gitSinkOptions(dataDir, { layout })))
      await sink.write(snapshot(items))
      const stored = await readStoredInventory(dataDir, 'HEAD', DOCUMENT_TEMPLATE, { cluster: CLUSTER, ...INVENTORY })
      assert.equal(stored?.layout, layout)
      assert.deepEqual(stored?.items, snapshot(items).items, layout)
      assert.equal(stored?.checksum, layout === 'perResource' ? undefined : snapshot(items).checksum, layout)
    }
  })

  it('perResource: hostile names stay inside the inventory directory', async (t) => {
    const dataDir = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir, { layout: 'perResource' })))
    const [base] = makeItems(1) as [Item]
    const hostile: Item[] = ['../../../escape', '.git', '..', 'a/b', '*', 'ünï"cødé\''].map((name, i) => ({
      ...base,
      uid: `uid-${i}`,
      name,
      namespace: i % 2 === 0 ? '..' : '',
      kind: i === 3 ? '../Kind' : base.kind,
    }))
    assert.deepEqual(await sink.write(snapshot(hostile)), { added: 6, changed: 0, removed: 0 })
    const files = await listTree(dataDir, 'HEAD', '.')
    assert.equal(files.length, 6)
    for (const file of files) {
      assert.ok(file.startsWith(`${RESOURCE_DIR}/`), file)
      assert.ok(!file.split('/').some((part) => part === '..' || part === '.' || part === '.git'), file)
    }
    assert.deepEqual(await sink.write(snapshot(hostile)), { added: 0, changed: 0, removed: 0 })
  })

  it('paths are data to git: a quote, a backslash or a colon in the template names those very files', async (t) => {
    // The sink hands git the files it wrote as lines of paths; git reads a line that starts with a quote as C-quoted.
    for (const layout of ['document', 'perResource'] as const) {
      const dataDir = await tempDir(t)
      const sink = withSink(t, createGitSink(gitSinkOptions(dataDir, { layout, path: '"inv\\:*/{name}.json' })))
      const items = makeItems(2)
      await sink.write(snapshot(items))
      items[1] = bumpReplicas(items[1] as Item, 4)
      assert.deepEqual(await sink.write(snapshot(items)), { added: 0, changed: 1, removed: 0 }, layout)
      const files = await listTree(dataDir, 'HEAD', '.')
      assert.equal(files.length, layout === 'document' ? 1 : 2, layout)
      for (const file of files) assert.ok(file.startsWith('"inv\\:*/deployments'), `${layout}: ${file}`)
      assert.equal((await git(dataDir, 'status', '--porcelain')).trim(), '', layout)
    }
  })

  it('path templates that leave the repository or point into .git are permanent errors', async (t) => {
    for (const template of ['../outside/{name}.json', '/etc/{name}.json', '.git/hooks/{name}', 'inventory/', 'inventory/\n{name}.json']) {
      const dataDir = await tempDir(t)
      const sink = withSink(t, createGitSink(gitSinkOptions(dataDir, { path: template })))
      const err = await rejection(sink.write(snapshot(makeItems(1))))
      assert.equal(err.retriable, false, `${template}: ${err.message}`)
    }
  })

  it('remove (deletionPolicy Delete) commits the deletion with the trailers', async (t) => {
    const dataDir = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir)))
    await sink.write(snapshot(makeItems(2)))
    await sink.remove(INVENTORY, CLUSTER)
    await sink.remove(INVENTORY, CLUSTER)

    const log = await gitLog(dataDir)
    assert.equal(log.length, 2)
    assert.equal(log[0]?.subject, 'kollect: remove team-a/deployments')
    assert.deepEqual(log[0]?.trailers, { 'Kollect-Inventory': 'team-a/deployments', 'Kollect-Cluster': CLUSTER })
    assert.deepEqual(await listTree(dataDir, 'HEAD', '.'), [])
  })

  it('10k items: initial write, then a one-item change of two lines', async (t) => {
    const dataDir = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir)))
    const items = makeItems(10_000)
    let started = performance.now()
    assert.deepEqual(await sink.write(snapshot(items)), { added: 10_000, changed: 0, removed: 0 })
    const initialMs = performance.now() - started

    items[5_000] = bumpReplicas(items[5_000] as Item, 1234)
    started = performance.now()
    assert.deepEqual(await sink.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
    const changeMs = performance.now() - started

    const stat = await numstat(dataDir, 'HEAD~1')
    assert.deepEqual(stat, [{ added: 2, deleted: 2, path: DOCUMENT }])
    t.diagnostic(`10k initial write ${initialMs.toFixed(0)} ms, 1-item change ${changeMs.toFixed(0)} ms, numstat ${JSON.stringify(stat)}`)
  })

  it('the clone stays small: the sink packs what exports leave loose, each version of the document a delta of another', async (t) => {
    const dataDir = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir)))
    // Over 1 MiB, the core.bigFileThreshold the sink used to set: above it git stored every version whole.
    const items = makeItems(700)
    const exports = 36
    let packedAt = 0
    for (let n = 0; n < exports; n++) {
      items[(n * 7) % items.length] = bumpReplicas(items[(n * 7) % items.length] as Item, 1_000 + n)
      await sink.write(snapshot(items))
      const loose = await looseObjects(dataDir)
      assert.ok(loose < LOOSE_OBJECTS_BEFORE_REPACK, `export ${n + 1} left ${loose} loose objects`)
      if (packedAt === 0 && loose === 0) packedAt = n + 1
    }
    assert.ok(packedAt > 1, 'the sink packed once loose objects had accumulated, not at every export')
    // The versions packed so far: one or two stored whole, every other as a delta.
    const { whole, deltas } = await packedBlobs(dataDir)
    assert.ok(whole + deltas >= packedAt, `${whole + deltas} versions packed`)
    assert.ok(whole >= 1 && whole <= 2, `${whole} whole copies of the document among ${whole + deltas} packed versions`)
    assert.equal((await gitLog(dataDir)).length, exports)
    await git(dataDir, 'fsck', '--strict')
    assert.equal(await showFile(dataDir, 'HEAD', DOCUMENT), canonicalJsonPretty(snapshot(items)))
  })
})

describe('git sink, remote repository', () => {
  async function setup(t: { after(fn: () => Promise<void>): void }, settings: { layout?: 'document' | 'perResource' } = {}) {
    const root = await tempDir(t)
    const remote = await createBareRemote(root)
    const dataDir = path.join(root, 'data')
    const sink = withSink(t, createGitSink(gitSinkOptions(dataDir, { url: remote, ...settings })))
    return { root, remote, dataDir, work: path.join(dataDir, 'work'), sink }
  }

  it('pushes to an empty bare remote: an initial commit on the branch, then the export', async (t) => {
    const { remote, sink } = await setup(t)
    const snap = snapshot(makeItems(3))
    assert.deepEqual(await sink.write(snap), { added: 3, changed: 0, removed: 0 })

    const log = await gitLog(remote, 'main')
    assert.deepEqual(log.map((entry) => entry.subject), ['kollect: team-a/deployments +3 ~0 -0 (3 items)', 'kollect: initialise main'])
    assert.equal(log[0]?.trailers['Kollect-Checksum'], snap.checksum)
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snap))

    assert.deepEqual(await sink.write(snap), { added: 0, changed: 0, removed: 0 })
    assert.equal((await gitLog(remote, 'main')).length, 2)
  })

  it('another writer pushing between our commit and our push: rebased, both commits on the remote', async (t) => {
    const { root, remote, work, sink } = await setup(t)
    const items = makeItems(5)
    await sink.write(snapshot(items))

    await pushFromOtherWriterAfterCommit(work, await personCommitsReadme(remote, root), 'once')

    items[1] = bumpReplicas(items[1] as Item, 3)
    const changed = snapshot(items)
    assert.deepEqual(await sink.write(changed), { added: 0, changed: 1, removed: 0 })

    assert.ok(existsSync(path.join(work, '.git', 'other-writer-pushed')), 'the other writer did push in between')
    const subjects = (await gitLog(remote, 'main')).map((entry) => entry.subject)
    assert.deepEqual(subjects.slice(0, 2), ['kollect: team-a/deployments +0 ~1 -0 (5 items)', 'docs: readme'])
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(changed))
    assert.equal(await showFile(remote, 'main', 'README.md'), 'written by a person\n')
  })

  // An export that follows our own push starts from it without a fetch (issue 29): these are the
  // ways the remote can have moved meanwhile, which the push's lease must catch.
  it('another writer pushing between two exports: the next export lands on top of their commit', async (t) => {
    const { root, remote, sink } = await setup(t)
    const items = makeItems(5)
    await sink.write(snapshot(items))
    await git(await personCommitsReadme(remote, root), 'push', '-q', 'origin', 'HEAD:main')

    items[2] = bumpReplicas(items[2] as Item, 8)
    assert.deepEqual(await sink.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
    const subjects = (await gitLog(remote, 'main')).map((entry) => entry.subject)
    assert.deepEqual(subjects.slice(0, 3), ['kollect: team-a/deployments +0 ~1 -0 (5 items)', 'docs: readme', 'kollect: team-a/deployments +5 ~0 -0 (5 items)'])
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snapshot(items)))
  })

  it('a restarted sink on the same clone: the first export fetches, and diffs against the remote', async (t) => {
    const { remote, dataDir } = await setup(t)
    const items = makeItems(5)
    const first = createGitSink(gitSinkOptions(dataDir, { url: remote }))
    await first.write(snapshot(items))
    items[0] = bumpReplicas(items[0] as Item, 2)
    await first.write(snapshot(items))
    await first.close()

    const restarted = withSink(t, createGitSink(gitSinkOptions(dataDir, { url: remote })))
    items[1] = bumpReplicas(items[1] as Item, 3)
    assert.deepEqual(await restarted.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snapshot(items)))
    // One attribute line and the checksum line, as from a sink that never stopped.
    assert.equal((await changedLines(remote, 'main~1', 'main')).length, 4)
  })

  it('sharded, in a clone: a new count, then a lost race, rebases (the old shards are not written back)', async (t) => {
    const { root, remote, work, dataDir } = await setup(t)
    const items = makeItems(20)
    const four = createGitSink(gitSinkOptions(dataDir, { url: remote, layout: 'sharded', shards: 4 }))
    await four.write(snapshot(items))
    await four.close()
    const three = withSink(t, createGitSink(gitSinkOptions(dataDir, { url: remote, layout: 'sharded', shards: 3 })))
    await three.write(snapshot(items))
    items[5] = bumpReplicas(items[5] as Item, 5)
    await three.write(snapshot(items))
    await pushFromOtherWriterAfterCommit(work, await personCommitsReadme(remote, root), 'once')

    items[6] = bumpReplicas(items[6] as Item, 6)
    assert.deepEqual(await three.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
    assert.ok(existsSync(path.join(work, '.git', 'other-writer-pushed')), 'the other writer did push in between')
    assert.deepEqual((await gitLog(remote, 'main')).map((entry) => entry.subject).slice(0, 2), ['kollect: team-a/deployments +0 ~1 -0 (20 items)', 'docs: readme'])
    assert.deepEqual((await listTree(remote, 'main', RESOURCE_DIR)).sort(), shardedFiles(RESOURCE_DIR, 3).sort())
  })

  it('a branch rewound by another writer between two exports: what they removed stays removed', async (t) => {
    const { root, remote, sink } = await setup(t)
    const items = makeItems(5)
    await sink.write(snapshot(items))
    const [removed, kept] = (await gitLog(remote, 'main')).map((entry) => entry.sha)
    // A person takes the export back out, as after publishing something by mistake.
    const other = await cloneRemote(remote, path.join(root, 'other'))
    await git(other, 'push', '-q', '--force', 'origin', `${kept ?? ''}:main`)

    items[2] = bumpReplicas(items[2] as Item, 8)
    assert.deepEqual(await sink.write(snapshot(items)), { added: 5, changed: 0, removed: 0 })
    const log = await gitLog(remote, 'main')
    assert.deepEqual(log.map((entry) => entry.sha).slice(1), [kept])
    assert.ok(!log.some((entry) => entry.sha === removed), 'the removed commit came back')
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snapshot(items)))
  })

  it('a conflicting writer editing the same document: our write re-renders and wins', async (t) => {
    const { root, remote, work, sink } = await setup(t)
    const items = makeItems(5)
    await sink.write(snapshot(items))

    const other = await cloneRemote(remote, path.join(root, 'other'))
    const stale = [...items]
    stale[1] = bumpReplicas(items[1] as Item, 99)
    await writeFile(path.join(other, DOCUMENT), renderSnapshot(snapshot(stale)))
    await git(other, 'commit', '-q', '-am', 'hand edit')
    await pushFromOtherWriterAfterCommit(work, other, 'once')

    items[1] = bumpReplicas(items[1] as Item, 3)
    const ours = snapshot(items)
    const result = await sink.write(ours)

    assert.ok(existsSync(path.join(work, '.git', 'other-writer-pushed')), 'the other writer did push in between')
    assert.deepEqual(result, { added: 0, changed: 1, removed: 0 })
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(ours))
    const log = await gitLog(remote, 'main')
    assert.deepEqual(log.slice(0, 2).map((entry) => entry.subject), ['kollect: team-a/deployments +0 ~1 -0 (5 items)', 'hand edit'])
    assert.equal(log[0]?.trailers['Kollect-Checksum'], ours.checksum)
  })

  it('perResource: another writer adding a file in our directory is pruned by our next export', async (t) => {
    const { root, remote, work, sink } = await setup(t, { layout: 'perResource' })
    const items = makeItems(3)
    await sink.write(snapshot(items))

    const other = await cloneRemote(remote, path.join(root, 'other'))
    await writeFile(path.join(other, RESOURCE_DIR, 'intruder.json'), '{}\n')
    await git(other, 'add', '.')
    await git(other, 'commit', '-q', '-m', 'intruder')
    await pushFromOtherWriterAfterCommit(work, other, 'once')

    items[0] = bumpReplicas(items[0] as Item, 5)
    assert.deepEqual(await sink.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
    const files = await listTree(remote, 'main', RESOURCE_DIR)
    assert.deepEqual(files.sort(), items.map((item) => itemPath(RESOURCE_DIR, item)).sort())
  })

  it('a remote that moves on every attempt: a retriable error after bounded attempts, then recovery', async (t) => {
    const { root, remote, work, sink } = await setup(t)
    const items = makeItems(3)
    await sink.write(snapshot(items))
    const other = await cloneRemote(remote, path.join(root, 'other'))
    await pushFromOtherWriterAfterCommit(work, other, 'always')

    items[0] = bumpReplicas(items[0] as Item, 6)
    const err = await rejection(sink.write(snapshot(items)))
    assert.equal(err.retriable, true)
    assert.match(err.message, /push still rejected after 5 attempts/)
    const races = (await gitLog(remote, 'main')).filter((entry) => entry.subject === 'race').length
    assert.ok(races >= 5, `${races} racing commits`)

    await removeHooks(work)
    assert.deepEqual(await sink.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
    assert.equal(await showFile(remote, 'main', DOCUMENT), renderSnapshot(snapshot(items)))
  })

  it('remove deletes the document (and the perResource directory) on the remote', async (t) => {
    for (const layout of ['document', 'perResource'] as const) {
      const { remote, sink } = await setup(t, { layout })
      await sink.write(snapshot(makeItems(3)))
      assert.notDeepEqual(await listTree(remote, 'main', 'inventory'), [])

      await sink.remove(INVENTORY, CLUSTER)
      assert.deepEqual(await listTree(remote, 'main', 'inventory'), [], layout)
      const [last] = await gitLog(remote, 'main')
      assert.equal(last?.subject, 'kollect: remove team-a/deployments')
      assert.equal(last?.trailers['Kollect-Checksum'], undefined)
    }
  })

  it('healthcheck lists the remote; a missing repository is a permanent error', async (t) => {
    const { root, sink } = await setup(t)
    await sink.healthcheck()
    const missing = withSink(t, createGitSink(gitSinkOptions(path.join(root, 'd2'), { url: path.join(root, 'nope.git') })))
    const err = await rejection(missing.healthcheck())
    assert.equal(err.retriable, false, err.message)
    assert.equal((await rejection(missing.write(snapshot(makeItems(1))))).retriable, false)
  })
})

describe('git sink credentials', () => {
  it('an unreachable remote is a retriable error that names neither the token nor its base64', async (t) => {
    const root = await tempDir(t)
    const url = `http://127.0.0.1:${await freePort()}/x.git`
    const sink = withSink(t, createGitSink(gitSinkOptions(root, { url }, { token: TOKEN })))

    const err = await rejection(sink.write(snapshot(makeItems(1))))
    assert.equal(err.retriable, true, err.message)
    assert.match(err.message, /git fetch failed/)
    assertNoSecret(err.message, TOKEN)
    assertNoSecret(String(err.stack), TOKEN)
    assert.equal(err.cause, undefined)

    const health = await rejection(sink.healthcheck())
    assertNoSecret(health.message, TOKEN)
    const config = await readFile(path.join(root, 'work', '.git', 'config'), 'utf8')
    assertNoSecret(config, TOKEN)
    assert.match(config, new RegExp(`url = ${url.replace(/[.]/g, '\\.')}\n`))
  })

  it('sends the token as a basic header; a refusal is permanent and redacted', async (t) => {
    const root = await tempDir(t)
    const seen: (string | undefined)[] = []
    const server = http.createServer((req, res) => {
      seen.push(req.headers.authorization)
      // Echo the header back: the redaction must catch what a server (or proxy) reflects.
      res.writeHead(403, { 'content-type': 'text/plain' })
      res.end(`forbidden for ${req.headers.authorization ?? 'nobody'}\n`)
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    t.after(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const { port } = server.address() as { port: number }
    const url = `http://127.0.0.1:${port}/team/x.git`
    const sink = withSink(t, createGitSink(gitSinkOptions(root, { url }, { token: TOKEN })))

    const err = await rejection(sink.write(snapshot(makeItems(1))))
    assert.equal(err.retriable, false, err.message)
    assert.deepEqual([...new Set(seen)], [`Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`])
    assertNoSecret(err.message, TOKEN)

    const userSink = withSink(t, createGitSink(gitSinkOptions(path.join(root, 'u'), { url }, { username: 'robot', password: TOKEN })))
    seen.length = 0
    const health = await rejection(userSink.healthcheck())
    assert.equal(health.retriable, false)
    assert.deepEqual([...new Set(seen)], [`Basic ${Buffer.from(`robot:${TOKEN}`).toString('base64')}`])
    assertNoSecret(health.message, TOKEN, 'robot')
  })

  it('redacts every form of the secret that git output could carry', () => {
    const label = { kind: 'git', id: 'team-a/git' }
    const settings = resolveGitSettings(
      { type: 'git', git: { url: 'https://git.example.com/x.git' } },
      { token: TOKEN },
      label,
    )
    const basic = Buffer.from(`x-access-token:${TOKEN}`).toString('base64')
    const raw = new Error(
      `fatal: unable to access: header Authorization: Basic ${basic}\n` +
        `remote: token ${TOKEN} (${Buffer.from(TOKEN).toString('base64')}) revoked\n` +
        `fatal: Authentication failed for 'https://x-access-token:${encodeURIComponent(TOKEN)}@git.example.com/x.git'`,
    )
    const err = gitFailure(label, 'push', raw, settings.secrets)
    assert.equal(err.retriable, false)
    assertNoSecret(err.message, TOKEN)
    assert.match(err.message, /Authentication failed/)
    assert.equal(settings.auth?.configKey, 'http.https://git.example.com/.extraHeader')
  })

  it('leads with the refused credentials, git\'s prompt text after', () => {
    const label = { kind: 'git', id: 'team-a/git' }
    const settings = resolveGitSettings({ type: 'git', git: { url: 'https://git.example.com/x.git' } }, { token: TOKEN }, label)
    const raw = new Error("fatal: could not read Username for 'https://git.example.com': terminal prompts disabled")
    assert.equal(gitFailure(label, 'fetch', raw, settings.secrets).message,
      "git sink team-a/git: git fetch failed: the remote refused the credentials: check the sink secret; git said: fatal: could not read Username for 'https://git.example.com': terminal prompts disabled")
  })

  it('refuses credentials in the URL without echoing them', async (t) => {
    const root = await tempDir(t)
    const sink = withSink(t, createGitSink(gitSinkOptions(root, { url: `https://bot:${TOKEN}@git.example.com/x.git` })))
    const err = await rejection(sink.write(snapshot(makeItems(1))))
    assert.equal(err.retriable, false)
    assertNoSecret(err.message, TOKEN, 'bot')
    assert.ok(!existsSync(path.join(root, 'work')))
  })
})
