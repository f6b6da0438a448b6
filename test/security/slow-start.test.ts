import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { after, before, test } from 'node:test'
import { get } from '../support/hooks-server.js'
import { spawnEntry } from '../support/kollect-process.js'
import { deployment, targetSyncRequest } from '../support/metacontroller.js'
import { pollUntil } from '../support/process.js'
import { ROUTES, send } from './support.js'

// Issue 24, also seen: at load 18 two instances exited at start with AVV_ERR_PLUGIN_EXEC_TIMEOUT.
// Start-up waits up to 30 s for the extraction children, and that wait ran inside a Fastify
// plugin, which Fastify gives 10 s. Here every child is held back longer than those 10 s (a
// preload that sleeps before the child's own code runs), as a loaded machine holds them back.
// The delay is a lower bound, so the old code fails whatever the load; nothing is timed.

const FASTIFY_PLUGIN_TIMEOUT_MS = 10_000
const CHILD_DELAY_MS = FASTIFY_PLUGIN_TIMEOUT_MS + 2_000

let dir: string
let preload: string
before(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-slow-start-'))
  preload = path.join(dir, 'slow-child.mjs')
  // NODE_OPTIONS reaches the server and its children; only the extraction children wait.
  writeFileSync(preload, `if (process.argv[1]?.endsWith('extraction/child.js')) await new Promise((resolve) => setTimeout(resolve, ${CHILD_DELAY_MS}))\n`)
})
after(() => rmSync(dir, { recursive: true, force: true }))

test('extraction children slower to start than Fastify\'s plugin timeout: the server waits for them, listens, and extracts', async () => {
  const p = await spawnEntry('main-dev', { HOST: '127.0.0.1', NODE_OPTIONS: `--import=${pathToFileURL(preload).href}` })
  try {
    const url = `http://127.0.0.1:${p.port}`
    await pollUntil('main-dev /healthz', async () => (await get(`${url}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 120_000, proc: p.proc })
    assert.doesNotMatch(p.output(), /AVV_ERR_PLUGIN_EXEC_TIMEOUT/)
    const res = await send(url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([deployment(1), deployment(2)])) })
    assert.equal(res.status, 200, res.text)
  } finally {
    await p.close()
  }
})
