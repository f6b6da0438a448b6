// A target sync of 10,000 realistic Deployments (managedFields, two containers) over HTTP,
// with the example profile: 6 attributes, 4 CEL and 2 JSONPath. The baseline is JSON.parse +
// JSON.stringify of the same body in the same process; target: hook time / baseline ≤ 2.0.
import { goJson, deployment, targetSyncRequest } from '../test/support/metacontroller.js'
import { post, startHooksServer } from '../test/support/hooks-server.js'
import { median, peakRssMiB, report, timeMs, timeMsAsync } from './stats.js'

export async function benchHookSync(count = 10_000, rounds = 7): Promise<boolean> {
  const deployments = Array.from({ length: count }, (_, i) => deployment(i))
  const body = Buffer.from(goJson(targetSyncRequest(deployments)))
  const server = await startHooksServer({ KOLLECT_HOOK_BODY_LIMIT: String(512 * 1024 * 1024) })
  try {
    const text = body.toString('utf8')
    const baseline: number[] = []
    const hook: number[] = []
    let extracted = 0
    for (let r = 0; r < rounds + 1; r++) {
      const b = timeMs(() => JSON.stringify(JSON.parse(text)))
      let status = 0
      const h = await timeMsAsync(async () => {
        const res = await post(server.url + '/hooks/targets/sync', body)
        status = res.status
        extracted = (res.json() as { status: { extractedCount: number } }).status.extractedCount
      })
      if (status !== 200) throw new Error(`hook answered ${status}`)
      if (r === 0) continue // warm-up: JIT and the compiled-program cache
      baseline.push(b)
      hook.push(h)
    }
    const ratio = median(hook) / median(baseline)
    const evals = (extracted * 6) / (median(hook) / 1000)
    return report(`hook sync: ${count} Deployments, 6 attributes (4 CEL, 2 JSONPath)`, [
      ['request body', `${(body.length / 1024 / 1024).toFixed(1)} MiB`],
      ['items extracted', extracted],
      ['hook wall time (median)', `${median(hook).toFixed(1)} ms`],
      ['JSON.parse+stringify baseline (median)', `${median(baseline).toFixed(1)} ms`],
      ['ratio hook / baseline', ratio.toFixed(2)],
      ['attribute evaluations per second', Math.round(evals).toLocaleString('en-US')],
      ['peak RSS', `${peakRssMiB()} MiB`],
    ], [['ratio <= 2.0', ratio <= 2.0], ['all objects extracted', extracted === count]])
  } finally {
    await server.close()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const ok = await benchHookSync(Number(process.env['BENCH_COUNT'] ?? 10_000))
  process.exitCode = ok ? 0 : 1
}
