// What the git sink's working clone keeps (issue 29): the initial export of a 10,000-item
// inventory in the document layout to a bare remote, then one-item exports, each through the
// sink as the exporter drives it. It prints the clone's bytes per export, how many versions of
// the document the clone packs whole (the rest as deltas), what the sink's own maintenance cost
// (the baseline: an export it did not follow, in the same run), and what a person's `git gc`
// leaves. BENCH_GIT_EXPORTS sets the number of one-item exports (100).
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { buildSnapshot } from '../api/canonical.js'
import type { Item } from '../api/types.js'
import { createGitSink } from '../sinks/git/index.js'
import { LOOSE_OBJECTS_BEFORE_REPACK } from '../sinks/git/service.js'
import { createBareRemote, git, looseObjects, packedBlobs } from '../test/support/git.js'
import { bumpReplicas, makeItems } from '../test/support/items.js'
import { median, report, timeMsAsync } from './stats.js'
import { INVENTORY } from './exporter.js'

/** Bytes under dir, files only. */
function bytesUnder(dir: string): number {
  let n = 0
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) n += statSync(path.join(entry.parentPath, entry.name)).size
  }
  return n
}

export async function benchGitHistory(count = 10_000, exports = Number(process.env['BENCH_GIT_EXPORTS'] ?? 100)): Promise<boolean> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-bench-git-history-'))
  try {
    const remote = await createBareRemote(root)
    const dataDir = path.join(root, 'data')
    const sink = createGitSink({
      id: 'team-a/git', dataDir, credentials: {},
      spec: { type: 'git', cluster: 'bench', git: { url: remote, branch: 'main', layout: 'document' }, drift: { policy: 'Off' } },
    })
    const clone = path.join(dataDir, 'work')
    const objects = path.join(clone, '.git', 'objects')
    const items = makeItems(count)
    const write = () => sink.write(buildSnapshot(INVENTORY, 'bench', items))
    const initialMs = await timeMsAsync(write)
    const afterInitial = bytesUnder(objects)
    // Each export's time, and whether the sink packed after it (its loose objects went down).
    const plain: number[] = []
    const packing: number[] = []
    let before = await looseObjects(clone)
    for (let n = 0; n < exports; n++) {
      const i = (n * 37) % count
      items[i] = bumpReplicas(items[i] as Item, 100_000 + n)
      const ms = await timeMsAsync(write)
      const loose = await looseObjects(clone)
      ;(loose < before ? packing : plain).push(ms)
      before = loose
    }
    await sink.close()
    const held = bytesUnder(objects)
    const packed = await packedBlobs(clone)
    const loose = before
    // A repack's cost: what an export it followed took over the median export without one.
    const typical = median(plain)
    const maintenanceMs = packing.reduce((sum, t) => sum + t - typical, 0)
    const gcMs = await timeMsAsync(() => git(clone, 'gc', '-q'))
    const afterGc = await packedBlobs(clone)
    const gcBytes = bytesUnder(objects)
    const document = packed.whole > 0 ? packed.wholeBytes / packed.whole : afterGc.wholeBytes / Math.max(1, afterGc.whole)
    const kb = (n: number) => `${(n / 1024).toFixed(0)} KiB`
    return report(`git history: ${exports} one-item exports of a ${count}-item inventory (document layout, remote)`, [
      ['initial export', `${initialMs.toFixed(0)} ms; the clone holds ${kb(afterInitial)}`],
      ['one-item export, median', `${typical.toFixed(0)} ms; with a repack after it ${median(packing).toFixed(0)} ms (${packing.length} repacks)`],
      ['  maintenance per export', `${(maintenanceMs / exports).toFixed(0)} ms (${(maintenanceMs / exports / typical).toFixed(3)} of an export)`],
      ['the clone after them', `${kb(held)}: ${kb((held - afterInitial) / exports)} per export; ${loose} loose objects`],
      ['  packed versions of the document: whole / as deltas', `${packed.whole} / ${packed.deltas} (one whole copy compressed: ${kb(document)}, deltas ${kb(packed.deltaBytes)})`],
      ['after `git gc` as a person runs it (git\'s defaults)', `${kb(gcBytes)} in ${gcMs.toFixed(0)} ms: ${afterGc.whole} whole / ${afterGc.deltas} deltas`],
    ], [
      // Issue 29, goal 1: at most 2 × one compressed document plus the deltas, by the sink's own maintenance.
      ['the clone packs at most 2 whole copies of the document, every other version as a delta', packed.whole <= 2 && packed.whole + packed.deltas >= exports + 1 - loose],
      [`loose objects stay below a repack's worth (${LOOSE_OBJECTS_BEFORE_REPACK})`, loose < LOOSE_OBJECTS_BEFORE_REPACK],
    ])
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = (await benchGitHistory()) ? 0 : 1
