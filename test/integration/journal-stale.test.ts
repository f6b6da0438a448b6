// Issue 25, scenario 4, against a real Git remote: exporter B journals C3 while the remote is
// unreachable and is killed; A takes over and pushes C4; B restarts on its data directory with
// the Lease and must not push C3 over C4. In-process, as in split-brain.test.ts: two Exporter
// instances with their own data directories (journal and clone), one bare remote.
import assert from 'node:assert/strict'
import { rename } from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import type { InventoryComposition, Item, ObjectRef, ResolvedSink } from '../../api/types.js'
import { Exporter } from '../../exporter/index.js'
import { PendingJournal } from '../../exporter/pending-journal.js'
import { createGitSink } from '../../sinks/git/index.js'
import { FakeClock } from '../support/clock.js'
import { createBareRemote, git, gitLog, tempDir } from '../support/git.js'
import { makeItems, snapshotOf } from '../support/items.js'
import { pollUntil } from '../support/process.js'

const CLUSTER = 'lab-west'
const TARGET: ObjectRef = { namespace: 'team-a', name: 'deploys' }
const INVENTORY: ObjectRef = { namespace: 'team-a', name: 'shop' }
const DEBOUNCE_MS = 1_000

const items = (n: number): Item[] => makeItems(n).map((item) => ({ ...item, target: TARGET }))

test('a restarted exporter never pushes its stale journaled snapshot over the newer one another exporter pushed', async (t: TestContext) => {
  const root = await tempDir(t)
  const remote = await createBareRemote(root)
  const composition: InventoryComposition = {
    inventory: INVENTORY, generation: 1, targets: [TARGET], debounceMs: DEBOUNCE_MS, maxWaitMs: 10 * DEBOUNCE_MS, suspend: false,
    sinks: [{ namespace: 'team-a', name: 'git', spec: { type: 'git', cluster: CLUSTER, git: { url: remote, branch: 'main' }, drift: { policy: 'Off' } } }],
  }
  const logs: string[] = []
  const start = async (name: string) => {
    const dataDir = path.join(root, name)
    const clock = new FakeClock()
    const exp = new Exporter({
      cluster: CLUSTER,
      clock,
      backoff: { minMs: 1, maxMs: 5, factor: 2 },
      journal: new PendingJournal(path.join(dataDir, 'pending')),
      log: (_level, msg) => logs.push(`${name}: ${msg}`),
      createSink: async (resolved) => {
        const { spec, namespace, name: sinkName } = resolved as ResolvedSink
        return createGitSink({ id: `${namespace}/${sinkName}`, spec, dataDir, credentials: {} })
      },
    })
    t.after(() => exp.close())
    const exportItems = async (list: Item[], generation: number) => {
      await exp.applyInventory(composition)
      await exp.reportTarget({ target: TARGET, generation, checksum: '', items: list, failedKeys: [] })
      clock.advance(DEBOUNCE_MS)
    }
    return { exp, exportItems, journal: new PendingJournal(path.join(dataDir, 'pending')) }
  }
  const c3 = snapshotOf(INVENTORY, items(3), CLUSTER)
  const c4 = snapshotOf(INVENTORY, items(4), CLUSTER)
  const pushed = async () => (await gitLog(remote, 'main')).map((c) => c.trailers['Kollect-Checksum'])

  // B journals C3 while the remote is unreachable, and is killed.
  const away = `${remote}.away`
  await rename(remote, away)
  const b = await start('b')
  await b.exportItems(items(3), 1)
  await pollUntil('B journaled C3', async () => (await b.journal.load()).entries[0]?.snapshot?.checksum === c3.checksum, { timeoutMs: 20_000 })
  await b.exp.close()
  await rename(away, remote)

  // A takes over and pushes C4.
  const a = await start('a')
  await a.exportItems(items(4), 2)
  await pollUntil('A pushed C4', async () => (await pushed().catch(() => []))[0] === c4.checksum, { timeoutMs: 20_000 })
  await a.exp.close()
  const head = (await git(remote, 'rev-parse', 'main')).trim()

  // B restarts with its journal and is active; its target has not reported yet.
  const b2 = await start('b')
  assert.equal(await b2.exp.restorePending(), 1)
  await b2.exp.idle()
  assert.equal((await git(remote, 'rev-parse', 'main')).trim(), head, 'nothing is pushed before the target reports')

  // The target reports C4: nothing to push (the remote holds it), and C3 never.
  await b2.exportItems(items(4), 2)
  await pollUntil('B confirmed the fresh export', async () => (await b2.journal.load()).entries[0]?.sinks.length === 0, { timeoutMs: 20_000 })
  assert.equal((await git(remote, 'rev-parse', 'main')).trim(), head, 'the remote still holds C4, with no new commit')
  assert.ok(!(await pushed()).includes(c3.checksum), 'C3 was never pushed')
  assert.equal(b2.exp.inventoryState(INVENTORY)?.sinks[0]?.checksum, c4.checksum)
  assert.ok(logs.includes('b: dropped a pending export from the journal: the targets\' fresh reports supersede it'), logs.join('\n'))
})
