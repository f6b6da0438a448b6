// npm run bench: every benchmark in turn. Each prints its figures as ratios against a baseline
// measured in the same run and says whether its target was met; the exit code says if all were.
import { benchBurst } from './burst.js'
import { benchExporter, benchKafkaExporter, benchS3Exporter } from './exporter.js'
import { benchFailover } from './failover.js'
import { benchFleet } from './fleet.js'
import { benchGitHistory } from './git-history.js'
import { benchAtDefaults, benchHookSync } from './hook-sync.js'
import { benchItemBudget } from './item-budget.js'
import { benchLoad } from './load.js'
import { benchMemory } from './memory.js'
import { benchReview } from './review.js'
import { benchTenants } from './tenants.js'

const results: boolean[] = []
results.push(await benchHookSync())
results.push(await benchAtDefaults(100_000))
results.push(await benchExporter(10_000, 'document'))
results.push(await benchExporter(10_000, 'perResource'))
results.push(await benchExporter(10_000, 'sharded'))
results.push(await benchGitHistory())
results.push(await benchS3Exporter(10_000))
results.push(await benchKafkaExporter(10_000))
results.push(await benchReview(1_000))
results.push(await benchFleet(10, 5_000))
results.push(await benchFailover(3))
results.push(await benchItemBudget())
results.push(await benchMemory())
results.push(await benchBurst())
results.push(await benchLoad())
results.push(await benchTenants())
console.log(`\n${results.filter(Boolean).length} of ${results.length} benchmarks met their targets`)
process.exitCode = results.every(Boolean) ? 0 : 1
