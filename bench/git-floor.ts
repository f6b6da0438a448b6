// What a 1-item change of the git sink costs over git's own floor for the same commit (issue 29,
// goal 2): the sink writes one branch of a bare remote, raw git plumbing writes a twin branch
// with the very bytes the sink wrote, and the rounds alternate so both share the noise.
import path from 'node:path'
import type { Item, ResolvedSink } from '../api/types.js'
import { buildSnapshot } from '../api/canonical.js'
import { renderSnapshot } from '../sinks/document.js'
import { resolveGitSettings } from '../sinks/git/config.js'
import { gitEnvironment, runGit } from '../sinks/git/process.js'
import type { Sink } from '../sinks/sink.js'
import { git } from '../test/support/git.js'
import { bumpReplicas } from '../test/support/items.js'
import { collectGarbage, median, timeMsAsync } from './stats.js'

/** One-item changes per side; each side's median is compared. */
const FLOOR_ROUNDS = 16
/** The sink's 1-item change over raw git's, for the document layout. */
export const FLOOR_BOUND = 1.2

export interface FloorCost {
  sinkMs: number
  rawMs: number
  /** Every round changed one item on both branches, and the two tips hold the same document. */
  same: boolean
}

/**
 * Raw git's floor for a 1-item change of the document: the document is already rendered (in
 * memory), then `hash-object -w --stdin`, `update-index --cacheinfo`, `write-tree`,
 * `commit-tree`, `update-ref` and `push`, in a clone of its own, with the sink's own git settings.
 */
export async function gitFloorCost(create: (s: ResolvedSink) => Promise<Sink>, resolved: ResolvedSink, items: Item[], root: string): Promise<FloorCost> {
  const git0 = resolved.spec.git ?? {}
  const remote = git0.url ?? ''
  const spec = { ...resolved.spec, git: { ...git0, branch: 'floor-sink' } }
  const sink = await create({ ...resolved, name: `${resolved.name}-floor`, spec })
  const inventory = { namespace: 'team-a', name: 'bench' }
  try {
    await sink.write(buildSnapshot(inventory, 'bench', items))
    // The raw side starts from the same commit, on its own branch and clone.
    await git(remote, 'branch', 'floor-raw', 'floor-sink')
    const settings = resolveGitSettings(spec, {}, { kind: 'git', id: 'bench/floor' })
    const dir = path.join(root, 'floor-raw')
    const env = gitEnvironment(settings, root)
    await git(root, 'clone', '-q', '-b', 'floor-raw', remote, dir)
    const raw = (args: string[], input?: string) => runGit(dir, env, args, input).then((out) => out.trim())
    const file = 'inventory/bench/team-a/bench.json'
    let parent = await raw(['rev-parse', 'HEAD'])
    const rawCommit = async (text: string, round: number) => {
      const blob = await raw(['hash-object', '-w', '--no-filters', '--stdin'], text)
      await raw(['update-index', '--cacheinfo', `100644,${blob},${file}`])
      const tree = await raw(['write-tree'])
      const commit = await raw(['commit-tree', tree, '-p', parent, '-m', `raw round ${round}`])
      await raw(['update-ref', 'HEAD', commit, parent])
      await raw(['push', '-q', 'origin', 'HEAD:refs/heads/floor-raw'])
      parent = commit
    }

    const sinkMs: number[] = []
    const rawMs: number[] = []
    let same = true
    const changed = Math.min(4321, items.length - 1)
    for (let round = 0; round < FLOOR_ROUNDS; round++) {
      const snapshot = buildSnapshot(inventory, 'bench', items.map((it, i) => (i === changed ? bumpReplicas(it, 3000 + round) : it)))
      const text = renderSnapshot(snapshot)
      const sides = [
        async () => sinkMs.push(await timeMsAsync(async () => { same &&= (await sink.write(snapshot)).changed === 1 })),
        async () => rawMs.push(await timeMsAsync(() => rawCommit(text, round))),
      ]
      // Each side starts on a collected heap: a round's rendering leaves garbage whose collection
      // (on the other of two cores) would slow whichever side ran first.
      for (const side of round % 2 ? sides.reverse() : sides) {
        collectGarbage()
        await side()
      }
    }
    const [ours, theirs] = await Promise.all([git(remote, 'rev-parse', `floor-sink:${file}`), git(remote, 'rev-parse', `floor-raw:${file}`)])
    return { sinkMs: median(sinkMs), rawMs: median(rawMs), same: same && ours === theirs }
  } finally {
    await sink.close()
  }
}
