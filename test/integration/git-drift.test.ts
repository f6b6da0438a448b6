import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'
import { buildSnapshot } from '../../api/canonical.js'
import type { Item, ObjectRef } from '../../api/types.js'
import { createGitSink } from '../../sinks/git/index.js'
import { makeItems } from '../support/items.js'
import { createBareRemote, git, gitSinkOptions, tempDir, withSink } from '../support/git.js'

const INVENTORY: ObjectRef = { namespace: 'team-a', name: 'deployments' }

function snapshot(items: readonly Item[]) {
  return buildSnapshot(INVENTORY, 'lab-west', items)
}

describe('git sink object store', () => {
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
