import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startHooksServer, type HooksServer, type RawResponse } from '../support/hooks-server.js'
import { ROUTES, conditionOf, longSync, ordinarySync, send, sleep, statusOf } from './support.js'

// Issue 24, F11: the fair queue's key is sniffed from the raw bytes before any parse. A token
// holder could queue each sync under a name of its choosing: a duplicate "namespace" key ahead
// of the real one (the sniff took the first, JSON.parse keeps the last), or a fresh namespace per
// body. Either bought a lane of its own and a reserve child, and another team's syncs waited
// until they were refused. One shared and one reserve child make the contention certain.

/** The same body with `"namespace":"<first>"` added ahead of parent.metadata's own. */
function duplicateNamespace(body: string, first: string): string {
  const metadata = body.indexOf('"metadata":{', body.indexOf('"parent":')) + '"metadata":{'.length
  return `${body.slice(0, metadata)}"namespace":${JSON.stringify(first)},${body.slice(metadata)}`
}

const ready = (res: RawResponse) => conditionOf(res, 'Ready')?.reason

/** team-b's five syncs, one after another: each must extract, none may be shed. */
async function teamBIsServed(server: HooksServer): Promise<string> {
  const took: number[] = []
  for (let i = 0; i < 5; i++) {
    const started = performance.now()
    const res = await send(server.url, ROUTES.targetSync, { body: ordinarySync('team-b', 3) })
    took.push(performance.now() - started)
    assert.equal(res.status, 200, `team-b sync ${i + 1}: ${res.status} ${res.text}`)
    assert.deepEqual([ready(res), statusOf(res).extractedCount], ['Extracted', 3])
  }
  return took.map((ms) => ms.toFixed(0)).join(', ')
}

describe('the fair queue cannot be lied to about a sync\'s namespace', () => {
  let server: HooksServer
  before(async () => {
    server = await startHooksServer({ KOLLECT_EXTRACT_WORKERS: '1', KOLLECT_EXTRACT_RESERVE: '1', KOLLECT_SYNC_TIMEOUT_MS: '8000' })
    // team-b is a known tenant: its record of short syncs is what earns it the reserve child.
    const warm = await send(server.url, ROUTES.targetSync, { body: ordinarySync('team-b', 3) })
    assert.equal(warm.status, 200, warm.text)
  })
  after(async () => {
    await server.close()
  })

  test('a body naming parent.metadata.namespace twice with different values: 400 with a clear message', async () => {
    const res = await send(server.url, ROUTES.targetSync, { body: duplicateNamespace(ordinarySync('team-a', 1), 'team-z') })
    assert.equal(res.status, 400, res.text)
    assert.deepEqual(res.json(), {
      code: 'KOLLECT_ERR_HOOK_BAD_REQUEST',
      message: 'request does not match the hook contract: parent.metadata.namespace must appear once: the body names "team-z" first but parses as another namespace',
    })
    // Metacontroller's own bodies name it once, and nothing else changed for them.
    const honest = await send(server.url, ROUTES.targetSync, { body: ordinarySync('team-a', 1) })
    assert.equal(honest.status, 200, honest.text)
  })

  test('six long team-a syncs, each queued under a fresh name by a duplicate key: team-b\'s five syncs all extract', async (t) => {
    const flood = Array.from({ length: 6 }, (_, i) => send(server.url, ROUTES.targetSync, { body: duplicateNamespace(longSync('team-a'), `decoy-${i}`) }))
    await sleep(300)
    const took = await teamBIsServed(server)
    const answers = await Promise.all(flood)
    t.diagnostic(`team-b ${took} ms; flood ${answers.map((r) => r.status).join(' ')}`)
    for (const r of answers) assert.equal(r.status, 400, r.text)
  })

  test('six long syncs, each in a fresh namespace of its own: team-b\'s five syncs all extract', async (t) => {
    const flood = Array.from({ length: 6 }, (_, i) => send(server.url, ROUTES.targetSync, { body: longSync(`fresh-${i}`) }))
    await sleep(300)
    const took = await teamBIsServed(server)
    const answers = await Promise.all(flood)
    t.diagnostic(`team-b ${took} ms; flood ${answers.map((r) => `${r.status} ${r.status === 200 ? ready(r) : (r.json() as { code: string }).code}`).join(', ')}`)
    // The fresh names get what any tenant gets under overload: a stopped sync or a 429, in time.
    for (const r of answers) {
      if (r.status === 200) assert.equal(ready(r), 'EvaluationTimeout', r.text)
      else {
        assert.equal(r.status, 429, r.text)
        assert.ok(r.headers['retry-after'], r.text)
      }
    }
  })
})
