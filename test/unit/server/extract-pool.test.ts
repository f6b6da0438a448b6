import { test } from 'node:test'
import { parsedReport } from '../../../api/report.js'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { getPriority } from 'node:os'
import { DEFAULT_LIMITS } from '../../../hooks/limits.js'
import { ExtractPool, type PoolOutcome } from '../../../server/extraction/pool.js'
import { longSync, oneAttributeSync, ordinarySync, sleep } from '../../security/support.js'
import { deployment } from '../../support/metacontroller.js'

// The pool with real child processes, one shared child and one reserve, a 2 s budget.

const kind = (o: PoolOutcome) => (o.kind === 'aborted' ? `aborted ${o.reason}` : o.kind)

test('the reserve child: a namespace whose last sync ran long cannot take it, even with nothing running; a fresh one can', async () => {
  const pool = new ExtractPool({ size: 1, reserve: 1, timeoutMs: 2000, memoryMb: 256, limits: DEFAULT_LIMITS, resolvePlural: async () => ({ plural: 'deployments', source: 'spec' }) })
  try {
    assert.ok(await pool.ready(30_000))
    const run = (namespace: string, body: string) => pool.run(Buffer.from(body), { arrival: performance.now(), namespace })
    // Each body parses as the namespace it queues under, or the child refuses it.
    const long = (namespace = 'team-a') => longSync(namespace)

    assert.equal(kind(await run('team-a', long())), 'aborted EvaluationTimeout')
    assert.ok(await pool.ready(30_000), 'the killed child was replaced')
    // team-b takes the shared child; team-a, with nothing running, queues another long sync.
    const b = run('team-b', long('team-b'))
    await sleep(100)
    const a = run('team-a', long())
    await sleep(100)
    const started = performance.now()
    const c = await run('team-c', ordinarySync('team-c', 1))
    const ms = performance.now() - started
    assert.equal(kind(c), 'done')
    assert.ok(ms < 1000, `team-c waited ${ms.toFixed(0)} ms: the reserve was taken`)
    // team-a waited for the shared child and was refused once a quarter of its budget was left.
    assert.equal(kind(await a), 'queued')
    assert.equal(kind(await b), 'aborted EvaluationTimeout')
  } finally {
    await pool.close()
  }
})

test('a child switches on the linear-time RegExp engine itself: matches() compiles, and a catastrophic pattern falls back to linear time', async () => {
  // Importing the hooks switches nothing on in a process, so what passes below is the child's own doing.
  await import('../../../hooks/cel.js')
  assert.throws(() => new RegExp('', 'l'), /Invalid flags/)
  const pool = new ExtractPool({ size: 1, reserve: 0, timeoutMs: 5000, memoryMb: 256, limits: DEFAULT_LIMITS, resolvePlural: async () => ({ plural: 'deployments', source: 'spec' }) })
  try {
    assert.ok(await pool.ready(30_000))
    const run = async (cel: string) => {
      const d = deployment(1)
      ;(d.metadata as Record<string, unknown>)['annotations'] = { s: `${'a'.repeat(40)}!` }
      const outcome = await pool.run(Buffer.from(oneAttributeSync(cel, [d])), { arrival: performance.now(), namespace: 'team-a' })
      assert.equal(outcome.kind, 'done', JSON.stringify(outcome))
      return outcome.kind === 'done' && outcome.result.report ? parsedReport(outcome.result.report).items[0]?.attributes['x'] : undefined
    }
    assert.equal(await run("object.metadata.name.matches('^web-[0-9]+$')"), true)
    // 2^40 steps for the backtracking engine: it ends within the budget only on the linear one.
    assert.equal(await run("object.metadata.annotations.s.matches('^(a+)+$')"), false)
  } finally {
    await pool.close()
  }
})

test('every child runs with the heap limit it is given, and an old generation that starts at half of it (at most 256 MiB)', async () => {
  for (const [memoryMb, initial] of [[256, 128], [2048, 256]] as const) {
    const pool = new ExtractPool({ size: 1, reserve: 1, timeoutMs: 2000, memoryMb, limits: DEFAULT_LIMITS, resolvePlural: async () => ({ plural: 'deployments', source: 'spec' }) })
    try {
      assert.ok(await pool.ready(30_000))
      for (const pid of pool.pids()) {
        const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
        assert.deepEqual(args.filter((a) => /^--(max|initial)-old-space-size=/.test(a)), [`--max-old-space-size=${memoryMb}`, `--initial-old-space-size=${initial}`])
      }
    } finally {
      await pool.close()
    }
  }
})

test('shared children run at a lower CPU priority than the reserve and the standby, and a replacement takes its role\'s', async () => {
  const pool = new ExtractPool({ size: 2, reserve: 1, timeoutMs: 2000, memoryMb: 256, limits: DEFAULT_LIMITS, resolvePlural: async () => ({ plural: 'deployments', source: 'spec' }) })
  try {
    assert.ok(await pool.ready(30_000))
    // pids(): the shared children, the reserve, then the standby.
    const niceness = () => pool.pids().map((pid) => getPriority(pid))
    const server = getPriority()
    assert.deepEqual(niceness(), [server + 5, server + 5, server, server])
    // A killed shared child is replaced by the standby, which takes the shared role's priority.
    assert.equal(kind(await pool.run(Buffer.from(longSync('team-a')), { arrival: performance.now(), namespace: 'team-a' })), 'aborted EvaluationTimeout')
    assert.ok(await pool.ready(30_000))
    assert.deepEqual(niceness(), [server + 5, server + 5, server, server])
  } finally {
    await pool.close()
  }
})

test('idle shared children: what would start a sync at once, none while a sync waits; a body in parts is one body', async () => {
  const pool = new ExtractPool({ size: 2, reserve: 1, timeoutMs: 2000, memoryMb: 256, limits: DEFAULT_LIMITS, resolvePlural: async () => ({ plural: 'deployments', source: 'spec' }) })
  try {
    assert.ok(await pool.ready(30_000))
    assert.equal(pool.idleShared(), 2, 'the reserve child does not count')
    const run = (namespace: string, body: string | Buffer[]) => pool.run(typeof body === 'string' ? Buffer.from(body) : body, { arrival: performance.now(), namespace })
    const long = run('team-a', longSync('team-a'))
    assert.equal(pool.idleShared(), 1)
    const other = run('team-b', longSync('team-b'))
    assert.equal(pool.idleShared(), 0)
    // Both shared children busy: a third sync waits, and nothing is idle while it does (the reserve takes only short namespaces).
    const waiting = run('team-a', longSync('team-a'))
    assert.equal(pool.idleShared(), 0)
    assert.deepEqual([kind(await long), kind(await other)], ['aborted EvaluationTimeout', 'aborted EvaluationTimeout'])
    await waiting
    assert.ok(await pool.ready(30_000))
    // The parts of a body, written one after another, reach the child as one body.
    const body = Buffer.from(ordinarySync('team-c', 3))
    const whole = await run('team-c', body.toString())
    const parts = await run('team-c', [body.subarray(0, 10), body.subarray(10, 5000), body.subarray(5000)])
    assert.equal(kind(parts), 'done')
    assert.equal(kind(whole), 'done')
    if (parts.kind === 'done' && whole.kind === 'done') assert.deepEqual(parts.result.response, whole.result.response)
  } finally {
    await pool.close()
  }
})
