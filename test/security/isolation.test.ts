import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { KubeObject } from '../../api/types.js'
import { startKollectProcess, type KollectProcess } from '../support/kollect-process.js'
import type { RawResponse } from '../support/hooks-server.js'
import { deployment } from '../support/metacontroller.js'
import { pollUntil } from '../support/process.js'
import { HEAP_BOMB_CEL, QUADRATIC_CEL, ROUTES, conditionOf, doubling, oneAttributeSync, ordinarySync, send, sleep, statusOf, withList } from './support.js'

// Issue 8, findings 2 and 4, against the real server process (npm start's entry point):
// a V8 fatal error in one tenant's extraction must end only that extraction, and a flood of
// expensive syncs from one namespace must not delay another namespace's sync.

const DIED = 'the extraction process ended before it finished (out of memory or a fatal error); split the target or simplify the profile'

/** A target sync in team-a whose profile is one CEL attribute. */
const teamA = (cel: string, object: KubeObject = deployment(1), target = 'prod-deploys') => oneAttributeSync(cel, [object], target)

async function timed(url: string, body: string): Promise<RawResponse & { ms: number }> {
  const started = performance.now()
  const res = await send(url, ROUTES.targetSync, { body })
  return Object.assign(res, { ms: performance.now() - started })
}

function readyOf(res: RawResponse): { status?: string; reason?: string; message?: string } {
  const c = conditionOf(res, 'Ready')
  return { status: c?.status, reason: c?.reason, message: c?.message }
}

describe('a V8 fatal error in one tenant\'s extraction ends only that extraction', () => {
  let kollect: KollectProcess
  let pid: number
  before(async () => {
    kollect = await startKollectProcess({ KOLLECT_EXTRACT_WORKERS: '2', KOLLECT_WORKER_MEMORY_MB: '128', KOLLECT_SYNC_TIMEOUT_MS: '8000' })
    pid = kollect.proc.child.pid as number
  })
  after(async () => {
    await kollect.close()
  })

  /** The same server process answers /healthz, and another namespace's sync extracts. */
  async function stillServing(): Promise<void> {
    assert.ok(!kollect.proc.hasExited(), `the server exited: ${kollect.proc.logTail()}`)
    assert.equal(kollect.proc.child.pid, pid)
    assert.equal((await send(kollect.url, '/healthz', { method: 'GET' })).status, 200)
    const res = await timed(kollect.url, ordinarySync('team-b', 3))
    assert.equal(res.status, 200, res.text)
    assert.deepEqual([statusOf(res).extractedCount, readyOf(res).reason], [3, 'Extracted'])
  }

  const bombs: { reason: string; cel: string; message: RegExp }[] = [
    {
      reason: 'a string doubled 26 times by nested cel.bind, then split(\'\')',
      cel: doubling(26, "'ab'", (s) => `${s}.split('')`),
      message: /^extraction stopped: attribute x: a CEL string at position \d+ has 8388608 characters; the limit is 4194304$/,
    },
    {
      reason: 'a list doubled 26 times by nested cel.bind',
      cel: doubling(26, '[1, 2]', (s) => `size(${s})`),
      message: /^extraction stopped: attribute x: a CEL list at position \d+ has 2097152 elements; the limit is 1048576$/,
    },
    {
      reason: 'lists nested 28 deep sharing one value (2^28 strings once serialised)',
      cel: doubling(28, "['x', 'y']", (s) => s, (v) => `[${v}, ${v}]`),
      message: /^extraction stopped: attribute x: the attribute values of one object have more than 4194304 elements and characters$/,
    },
  ]
  for (const bomb of bombs) {
    test(`${bomb.reason}: that sync is stopped (ResourceLimit), the process stays up, another namespace is served`, async () => {
      const res = await timed(kollect.url, teamA(bomb.cel))
      assert.equal(res.status, 200, res.text)
      const ready = readyOf(res)
      assert.equal(ready.status, 'False')
      // The bound stops it as a thrown error; were it to slip through, the deadline would.
      assert.ok(ready.reason === 'ResourceLimit' || ready.reason === 'EvaluationTimeout', JSON.stringify(ready))
      if (ready.reason === 'ResourceLimit') assert.match(ready.message ?? '', bomb.message)
      assert.deepEqual([statusOf(res).extractedCount, statusOf(res).checksum], [0, ''])
      await stillServing()
    })
  }

  test('a profile that exhausts a child\'s heap with values inside every bound: the child dies, its sync is ResourceLimit, the child is replaced', async () => {
    const before = kollect.extractionPids()
    assert.equal(before.length, 4, 'two shared children, one reserve, one standby')
    const res = await timed(kollect.url, teamA(HEAP_BOMB_CEL, withList(5000)))
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(readyOf(res), { status: 'False', reason: 'ResourceLimit', message: DIED })
    assert.ok(res.ms < 8000, `answered after ${res.ms.toFixed(0)} ms, not at the death of the child`)
    await pollUntil('a replacement child', async () => kollect.extractionPids().length === 4, { timeoutMs: 10_000 })
    const now = kollect.extractionPids()
    assert.equal(now.filter((p) => !before.includes(p)).length, 1, `children before ${before.join(',')}, after ${now.join(',')}`)
    await stillServing()
  })

  test('children killed by SIGKILL in the middle of a sync: it answers ResourceLimit at once, they are replaced, the next sync works', async () => {
    const before = kollect.extractionPids()
    assert.equal(before.length, 4)
    const pending = timed(kollect.url, teamA(QUADRATIC_CEL, withList(50_000)))
    await sleep(1000)
    for (const child of before) process.kill(child, 'SIGKILL')
    const res = await pending
    assert.equal(res.status, 200, res.text)
    assert.deepEqual(readyOf(res), { status: 'False', reason: 'ResourceLimit', message: DIED })
    assert.ok(res.ms < 6000, `answered after ${res.ms.toFixed(0)} ms; the deadline (8 s) would have answered EvaluationTimeout`)
    await pollUntil('four replacement children', async () => kollect.extractionPids().filter((p) => !before.includes(p)).length === 4, { timeoutMs: 15_000 })
    await stillServing()
    const metrics = await send(kollect.url, '/metrics', { method: 'GET' })
    assert.match(metrics.text, /kollect_hook_shed_total\{reason="ResourceLimit"\} [5-9]\b/)
  })
})

describe('one namespace cannot starve another', () => {
  let kollect: KollectProcess
  const TIMEOUT_MS = 8000
  before(async () => {
    kollect = await startKollectProcess({ KOLLECT_EXTRACT_WORKERS: '2', KOLLECT_SYNC_TIMEOUT_MS: String(TIMEOUT_MS) })
  })
  after(async () => {
    await kollect.close()
  })

  test('six quadratic syncs from team-a, then one sync from team-b: team-b answers within 2 s; team-a gets stopped syncs or 429s, in time', async (t) => {
    const flood = Array.from({ length: 6 }, (_, i) => timed(kollect.url, teamA(QUADRATIC_CEL, withList(50_000), `flood-${i}`)))
    await sleep(300)
    const b = await timed(kollect.url, ordinarySync('team-b', 1))
    const a = await Promise.all(flood)
    t.diagnostic(`team-b ${b.ms.toFixed(0)} ms; team-a ${a.map((r) => `${r.status}${r.status === 200 ? ' ' + readyOf(r).reason : ''} ${r.ms.toFixed(0)} ms`).join(', ')}`)

    assert.equal(b.status, 200, b.text)
    assert.deepEqual([statusOf(b).extractedCount, readyOf(b).reason], [1, 'Extracted'])
    assert.ok(b.ms < 2000, `team-b answered after ${b.ms.toFixed(0)} ms`)

    for (const r of a) {
      assert.ok(r.ms < TIMEOUT_MS + 2000, `a team-a sync answered after ${r.ms.toFixed(0)} ms`)
      if (r.status === 200) assert.ok(['EvaluationTimeout', 'ResourceLimit'].includes(readyOf(r).reason ?? ''), r.text)
      else {
        assert.equal(r.status, 429, r.text)
        assert.equal(r.headers['retry-after'], '2')
        assert.equal((r.json() as { code: string }).code, 'KOLLECT_ERR_HOOK_QUEUE_TIMEOUT')
      }
    }
    // Two shared children: two floods run to the deadline, the other four are refused in time.
    const refused = a.filter((r) => r.status === 429).length
    assert.ok(refused >= 1 && refused <= 4, `${refused} refused`)
    const metrics = await send(kollect.url, '/metrics', { method: 'GET' })
    assert.match(metrics.text, new RegExp(`kollect_hook_shed_total\\{reason="queue"\\} ${refused}\\b`))
  })
})

describe('an ordinary resync', () => {
  let kollect: KollectProcess
  before(async () => {
    kollect = await startKollectProcess({ KOLLECT_EXTRACT_WORKERS: '2' })
  })
  after(async () => {
    await kollect.close()
  })

  test('20 concurrent syncs (Metacontroller\'s 5 workers × 4 controllers) get no 429 under the default in-flight bound', async (t) => {
    const bodies = Array.from({ length: 20 }, (_, i) => ordinarySync(`team-${'abcd'[i % 4]}`, 20, `resync-${i}`))
    const answers = await Promise.all(bodies.map((body) => timed(kollect.url, body)))
    t.diagnostic(`statuses ${answers.map((r) => r.status).join(' ')}; slowest ${Math.max(...answers.map((r) => r.ms)).toFixed(0)} ms`)
    for (const r of answers) {
      assert.equal(r.status, 200, r.text)
      assert.equal(statusOf(r).extractedCount, 20)
    }
  })
})
