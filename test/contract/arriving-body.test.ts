import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import type { KubeObject } from '../../api/types.js'
import { keptAndPlain, post, readResponse, startHooksServer, type RawResponse } from '../support/hooks-server.js'
import { deployment, goJson, targetSyncRequest } from '../support/metacontroller.js'

// Issue 28: a target sync's body is read as it arrives (server/http/plugins/arriving-body.ts),
// with the incremental scan running behind the bytes. However the bytes come, the answer is the
// one the whole body gets at once, the body limit holds, and a body cut short costs nothing.

const SYNC = '/hooks/targets/sync'

/** Sends body in pieces with pauses between them, as a slow network delivers it; chunked (no Content-Length) when declared is false. */
function trickle(url: string, body: Buffer, pieces: number, declared = true): Promise<RawResponse> {
  const { hostname, port } = new URL(url)
  const headers: Record<string, string> = { 'Content-Type': 'application/json', Connection: 'close' }
  if (declared) headers['Content-Length'] = String(body.length)
  return new Promise((resolve, reject) => {
    let answered = false
    const req = httpRequest({ host: hostname, port, method: 'POST', path: SYNC, headers, agent: false }, (res) => {
      answered = true
      readResponse(res).then(resolve, reject)
    })
    req.on('error', (err) => { if (!answered) reject(err) })
    void (async () => {
      const size = Math.ceil(body.length / pieces)
      for (let at = 0; at < body.length && !answered; at += size) {
        req.write(body.subarray(at, at + size))
        await sleep(15)
      }
      req.end()
    })()
  })
}

describe('a target sync body as it arrives', () => {
  const servers = keptAndPlain(startHooksServer)
  before(servers.start)
  after(servers.close)

  test('in pieces with pauses, declared or chunked: the answer the whole body gets at once, and the resync reads only what changed', async () => {
    const objects = Array.from({ length: 300 }, (_, i) => deployment(i))
    const first = Buffer.from(goJson(targetSyncRequest(objects)))
    const atOnce = await post(servers.plain.url + SYNC, first)
    assert.equal(atOnce.status, 200, atOnce.text)
    assert.deepEqual((await trickle(servers.kept.url, first, 9)).json(), atOnce.json())

    ;(objects[150] as KubeObject & { spec: { replicas: number } }).spec.replicas = 7
    const resync = Buffer.from(goJson(targetSyncRequest(objects)))
    const expected = (await post(servers.plain.url + SYNC, resync)).json()
    for (const declared of [true, false]) {
      const before = (await servers.kept.metrics.syncObjects.get()).values.find((v) => v.labels.result === 'extracted')?.value ?? 0
      const res = await trickle(servers.kept.url, resync, 23, declared)
      assert.equal(res.status, 200, res.text)
      assert.deepEqual(res.json(), expected)
      const extracted = ((await servers.kept.metrics.syncObjects.get()).values.find((v) => v.labels.result === 'extracted')?.value ?? 0) - before
      // Declared: the changed object alone; chunked, the same body again: none.
      assert.equal(extracted, declared ? 1 : 0)
    }
  })

  test('a first sync scanned for its nesting and keys as it arrives: past the bound or with a __proto__ key, refused as when it comes at once', async () => {
    // Objects past the first MiB carry the hostile parts, so the scan reaches them only after it stopped and went on.
    const bodyWith = (annotation: string): Buffer => {
      const objects = Array.from({ length: 1000 }, (_, i) => deployment(i, { managedFields: true }))
      ;(objects[900]?.metadata as Record<string, unknown>)['annotations'] = { marked: 'HERE' }
      const body = Buffer.from(goJson(targetSyncRequest(objects)).replace('{"marked":"HERE"}', annotation))
      assert.ok(body.indexOf(annotation) > 1024 * 1024)
      return body
    }
    const limit = 512
    const nested = (depth: number) => `{"deep":${'['.repeat(depth)}${']'.repeat(depth)}}`
    const cases: [string, Buffer, number][] = [
      ['at the nesting bound', bodyWith(nested(limit - 6)), 200],
      ['one level past it', bodyWith(nested(limit - 5)), 400],
      ['a __proto__ key', bodyWith('{"__proto__":{"polluted":"yes"}}'), 400],
      ['a constructor key spelled with an escape', bodyWith('{"c\\u006fnstructor":{"prototype":{}}}'), 400],
      ['the words in a value, and escaped quotes and brackets', bodyWith('{"a":"x__proto__ \\" [[[[ {{{{ \\\\"}'), 200],
    ]
    for (const [what, body, status] of cases) {
      const atOnce = await post(servers.plain.url + SYNC, body)
      assert.equal(atOnce.status, status, `${what}: ${atOnce.text.slice(0, 300)}`)
      const res = await trickle(servers.kept.url, body, 40)
      assert.equal(res.status, status, `${what}: ${res.text.slice(0, 300)}`)
      assert.deepEqual(res.json(), atOnce.json(), what)
    }
  })

  test('chunked past the body limit: 413 with the limit, and the server answers the next sync', async () => {
    const small = await startHooksServer({ KOLLECT_HOOK_BODY_LIMIT: String(64 * 1024) })
    try {
      const body = Buffer.from(goJson(targetSyncRequest(Array.from({ length: 60 }, (_, i) => deployment(i)))))
      assert.ok(body.length > 64 * 1024)
      const res = await trickle(small.url, body, 12, false)
      assert.equal(res.status, 413, res.text)
      assert.equal((res.json() as { code: string }).code, 'KOLLECT_ERR_HOOK_BODY_TOO_LARGE')
      const next = await post(small.url + SYNC, goJson(targetSyncRequest([deployment(1)])))
      assert.equal(next.status, 200, next.text)
    } finally {
      await small.close()
    }
  })

  test('a body cut short (the sender goes away): nothing is owed, nothing waits on it, and the next sync is answered', async () => {
    const body = Buffer.from(goJson(targetSyncRequest(Array.from({ length: 200 }, (_, i) => deployment(i)))))
    const { hostname, port } = new URL(servers.kept.url)
    await new Promise<void>((resolve) => {
      const req = httpRequest({ host: hostname, port, method: 'POST', path: SYNC, agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': String(body.length) } })
      req.on('error', () => resolve())
      req.write(body.subarray(0, body.length >> 1), () => setTimeout(() => {
        req.destroy()
        resolve()
      }, 50))
    })
    const next = await post(servers.kept.url + SYNC, body)
    assert.equal(next.status, 200, next.text)
    assert.equal((next.json() as { status: { extractedCount: number } }).status.extractedCount, 200)
  })
})
