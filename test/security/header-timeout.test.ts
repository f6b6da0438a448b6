import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { get } from '../support/hooks-server.js'
import { spawnEntry, type EntryProcess } from '../support/kollect-process.js'
import { pollUntil } from '../support/process.js'

// Slow headers: the docs promise that a client which has not finished its request headers after
// 10 s is disconnected. Node checks headersTimeout only every connectionsCheckingInterval (30 s by
// default), so without care the promise is kept at 30-40 s. Real processes, real sockets.

const PROMISED_MS = 10_000
// Lower bound: not before the promise. Upper bound: the promise plus a check interval and an
// honest margin for a loaded 2-core machine.
const EARLIEST_MS = 9_000
const LATEST_MS = 15_000

interface Closed { afterMs: number; answer: string }

/**
 * Open a connection, send the request line and part of a header, and then either nothing more
 * or one header byte a second (a slowloris); resolves when the server closes the connection.
 */
function slowHeaders(port: number, path: string, trickle: boolean): Promise<Closed> {
  return new Promise((resolve, reject) => {
    const started = Date.now()
    const socket = net.connect({ host: '127.0.0.1', port })
    let answer = ''
    let timer: NodeJS.Timeout | undefined
    const giveUp = setTimeout(() => {
      socket.destroy()
      reject(new Error(`the server kept a connection with unfinished headers open for ${Date.now() - started} ms`))
    }, 90_000)
    socket.setEncoding('latin1')
    socket.on('data', (d: string) => (answer += d))
    socket.on('error', () => undefined) // a reset is a close too
    socket.once('close', () => {
      clearTimeout(giveUp)
      clearInterval(timer)
      resolve({ afterMs: Date.now() - started, answer })
    })
    socket.once('connect', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: kollect\r\nContent-Type: application/json\r\nX-Slow: `)
      if (trickle) timer = setInterval(() => socket.write('a'), 1000)
    })
  })
}

describe('slow request headers are cut off at about 10 s', () => {
  let dev: EntryProcess
  let exporter: EntryProcess
  before(async () => {
    ;[dev, exporter] = await Promise.all([spawnEntry('main-dev', { HOST: '127.0.0.1' }), spawnEntry('main-exporter', { KOLLECT_HOOK_AUTH: 'none' })])
    await pollUntil('npm start', async () => (await get(`http://127.0.0.1:${dev.port}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 20_000, proc: dev.proc })
    await pollUntil('exporter', async () => (await get(`http://127.0.0.1:${exporter.exporterPort}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 20_000, proc: exporter.proc })
  })
  after(async () => {
    await Promise.all([dev?.close(), exporter?.close()])
  })

  test(`hooks and exporter API close idle and trickling header senders within ${EARLIEST_MS}-${LATEST_MS} ms`, async (t) => {
    const cases = [
      ['hooks, headers stop', slowHeaders(dev.port, '/hooks/targets/sync', false)],
      ['hooks, one header byte a second', slowHeaders(dev.port, '/hooks/inventories/sync', true)],
      ['exporter API, headers stop', slowHeaders(exporter.exporterPort, '/v1/inventories/apply', false)],
      ['exporter API, one header byte a second', slowHeaders(exporter.exporterPort, '/v1/targets/report', true)],
    ] as const
    const results = await Promise.all(cases.map(([, p]) => p))
    cases.forEach(([what], i) => {
      const { afterMs, answer } = results[i] as Closed
      t.diagnostic(`${what}: closed after ${afterMs} ms`)
      assert.ok(afterMs >= EARLIEST_MS && afterMs <= LATEST_MS, `${what}: closed after ${afterMs} ms (promised ${PROMISED_MS})`)
      // Node answers 408 before closing; nothing of a hook ran.
      assert.match(answer, /^(HTTP\/1\.1 408 Request Timeout\r\n|$)/, `${what}: ${answer}`)
    })
    // The servers are still fine afterwards.
    assert.equal((await get(`http://127.0.0.1:${dev.port}/healthz`)).status, 200)
    assert.equal((await get(`http://127.0.0.1:${exporter.exporterPort}/healthz`)).status, 200)
  })
})
