import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, describe, test } from 'node:test'
import { get } from '../support/hooks-server.js'
import { spawnEntry, type Entry, type EntryProcess } from '../support/kollect-process.js'
import { controllerFor, loadExampleCr, syncRequest } from '../support/metacontroller.js'
import { canConnect } from '../support/ports.js'
import { pollUntil } from '../support/process.js'
import { ROUTES, send } from './support.js'

// Authentication fails closed, checked on the real entry points as separate processes: a blank
// token is a start-up error before anything listens, and running open is an explicit, logged
// choice (KOLLECT_HOOK_AUTH=none, or npm start on loopback with no token set).

let dir: string
const file = (name: string, text: string) => {
  const p = path.join(dir, name)
  writeFileSync(p, text)
  return p
}
before(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-auth-'))
})
after(() => rmSync(dir, { recursive: true, force: true }))

const PROFILE_SYNC = JSON.stringify(syncRequest(controllerFor('kollect-profiles'), loadExampleCr('profile-deployments.yaml'), {}))
const NOT_LISTENING = /Server listening/

/** The entry must exit non-zero on its own, having printed `message` and never listened. */
async function refusesToStart(entry: Entry, env: Record<string, string>, message: RegExp): Promise<void> {
  const p = await spawnEntry(entry, env)
  try {
    const outcome = await Promise.race([p.proc.exited, new Promise<string>((r) => setTimeout(() => r('still running'), 15_000))])
    assert.equal(outcome, 'exit 1', `${entry} ${JSON.stringify(env)}: ${outcome}\n${p.output()}`)
    const fatal = p.output().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { level: number; msg: string }).find((l) => l.level === 60)
    assert.ok(fatal, `a fatal log line: ${p.output()}`)
    assert.match(fatal.msg, message)
    assert.doesNotMatch(p.output(), NOT_LISTENING)
    assert.equal(await canConnect(entry === 'main-exporter' ? p.exporterPort : p.port), false)
  } finally {
    await p.close()
  }
}

async function listening(entry: Entry, env: Record<string, string>): Promise<EntryProcess & { url: string }> {
  const p = await spawnEntry(entry, env)
  const url = `http://127.0.0.1:${entry === 'main-exporter' ? p.exporterPort : p.port}`
  try {
    await pollUntil(`${entry} /healthz`, async () => (await get(`${url}/healthz`).catch(() => null))?.status === 200, { timeoutMs: 20_000, proc: p.proc })
  } catch (err) {
    await p.close()
    throw err
  }
  return { ...p, url }
}

const warnings = (p: EntryProcess) => p.output().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { level: number; msg: string; reason?: string }).filter((l) => l.level === 40)

describe('a blank hook token stops every entry point before it listens', { concurrency: 3 }, () => {
  const BLANK: [string, () => Record<string, string>, RegExp][] = [
    ['empty KOLLECT_HOOK_TOKEN', () => ({ KOLLECT_HOOK_TOKEN: '' }), /^invalid configuration: KOLLECT_HOOK_TOKEN is set but blank; set a token, or KOLLECT_HOOK_AUTH=none to run without authentication$/],
    ['whitespace-only KOLLECT_HOOK_TOKEN', () => ({ KOLLECT_HOOK_TOKEN: ' \t \n' }), /^invalid configuration: KOLLECT_HOOK_TOKEN is set but blank/],
    ['empty token file', () => ({ KOLLECT_HOOK_TOKEN_FILE: file('empty', '') }), /^invalid configuration: KOLLECT_HOOK_TOKEN_FILE ".*empty" is empty; put a token in it, or KOLLECT_HOOK_AUTH=none/],
    ['whitespace-only token file', () => ({ KOLLECT_HOOK_TOKEN_FILE: file('blank', '\n  \n') }), /^invalid configuration: KOLLECT_HOOK_TOKEN_FILE ".*blank" is empty/],
    ['unreadable token file', () => ({ KOLLECT_HOOK_TOKEN_FILE: path.join(dir, 'no-such-file') }), /^invalid configuration: KOLLECT_HOOK_TOKEN_FILE ".*no-such-file" cannot be read \(ENOENT\)$/],
  ]
  for (const entry of ['main-dev', 'main-hooks', 'main-exporter'] as const) {
    for (const [what, env, message] of BLANK) {
      test(`${entry}: ${what}`, () => refusesToStart(entry, env(), message))
    }
  }

  test('the pod entry points never default to no authentication', async () => {
    for (const entry of ['main-hooks', 'main-exporter'] as const) {
      await refusesToStart(entry, { HOST: '127.0.0.1' }, /^invalid configuration: no hook token: set KOLLECT_HOOK_TOKEN or KOLLECT_HOOK_TOKEN_FILE, or KOLLECT_HOOK_AUTH=none/)
    }
  })

  test('npm start listening beyond loopback needs a token or an explicit KOLLECT_HOOK_AUTH=none', async () => {
    await refusesToStart('main-dev', { HOST: '0.0.0.0' }, /^invalid configuration: no hook token/)
  })

  test('an exporter listening beyond loopback needs a token: KOLLECT_HOOK_AUTH=none is refused', async () => {
    await refusesToStart('main-exporter', { KOLLECT_EXPORTER_HOST: '0.0.0.0', KOLLECT_HOOK_AUTH: 'none' }, /^invalid configuration: KOLLECT_EXPORTER_HOST=0.0.0.0 is beyond loopback: the exporter API then needs a hook token, KOLLECT_HOOK_AUTH=none is refused$/)
  })

  test('contradictory or unknown settings are refused too', async () => {
    await refusesToStart('main-hooks', { KOLLECT_HOOK_AUTH: 'none', KOLLECT_HOOK_TOKEN: 'sekret' }, /^invalid configuration: KOLLECT_HOOK_AUTH=none, but a hook token is set too; unset one$/)
    await refusesToStart('main-hooks', { KOLLECT_HOOK_AUTH: 'off' }, /^invalid configuration: KOLLECT_HOOK_AUTH must be token or none, got "off"$/)
    await refusesToStart('main-hooks', { KOLLECT_HOOK_TOKEN: 'a', KOLLECT_HOOK_TOKEN_FILE: file('token-both', 'b') }, /^invalid configuration: KOLLECT_HOOK_TOKEN and KOLLECT_HOOK_TOKEN_FILE are both set; set one$/)
  })
})

describe('running without authentication is explicit and logged', () => {
  test('npm start on loopback with no token: open, and a warning says why', async () => {
    const p = await listening('main-dev', { HOST: '127.0.0.1' })
    try {
      assert.deepEqual(warnings(p).map((w) => [w.msg, w.reason]), [['hook authentication is disabled', 'the default for a local run listening on 127.0.0.1 only']])
      assert.equal((await send(p.url, ROUTES.profileSync, { body: PROFILE_SYNC })).status, 200)
    } finally {
      await p.close()
    }
  })

  test('main-hooks and main-exporter with KOLLECT_HOOK_AUTH=none: open, with the warning', async () => {
    const hooks = await listening('main-hooks', { KOLLECT_HOOK_AUTH: 'none' })
    const exporter = await listening('main-exporter', { KOLLECT_HOOK_AUTH: 'none' })
    try {
      for (const p of [hooks, exporter]) assert.deepEqual(warnings(p).map((w) => [w.msg, w.reason]), [['hook authentication is disabled', 'KOLLECT_HOOK_AUTH=none']])
      assert.equal((await send(hooks.url, ROUTES.profileSync, { body: PROFILE_SYNC })).status, 200)
      assert.equal((await send(exporter.url, '/v1/targets/remove', { body: '{"namespace":"team-a","name":"t"}' })).status, 200)
    } finally {
      await Promise.all([hooks.close(), exporter.close()])
    }
  })

  test('a token file (with its trailing newline) guards the hooks and the exporter API, with no warning', async () => {
    const env = { KOLLECT_HOOK_TOKEN_FILE: file('token', 'file-token-123\n') }
    const hooks = await listening('main-hooks', env)
    const exporter = await listening('main-exporter', env)
    try {
      for (const p of [hooks, exporter]) assert.deepEqual(warnings(p), [])
      assert.equal((await send(hooks.url, ROUTES.profileSync, { body: PROFILE_SYNC })).status, 401)
      assert.equal((await send(hooks.url, ROUTES.profileSync, { body: PROFILE_SYNC, headers: { Authorization: 'Bearer file-token-123' } })).status, 200)
      assert.equal((await send(exporter.url, '/v1/targets/remove', { body: '{"namespace":"team-a","name":"t"}' })).status, 401)
      assert.equal((await send(exporter.url, '/v1/targets/remove', { body: '{"namespace":"team-a","name":"t"}', headers: { Authorization: 'Bearer file-token-123' } })).status, 200)
    } finally {
      await Promise.all([hooks.close(), exporter.close()])
    }
  })

  test('the exporter is on loopback only unless KOLLECT_EXPORTER_HOST says otherwise, and then the token guards it', async () => {
    const ip = Object.values(os.networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address
    assert.ok(ip, 'a non-loopback IPv4 address to test against')
    const env = { KOLLECT_HOOK_TOKEN: 'exporter-token' }
    const sidecar = await listening('main-exporter', { ...env, HOST: '0.0.0.0' })
    const separate = await listening('main-exporter', { ...env, KOLLECT_EXPORTER_HOST: '0.0.0.0' })
    try {
      assert.equal(await canConnect(sidecar.exporterPort, 500, ip), false, 'HOST does not move the sidecar off loopback')
      const url = `http://${ip}:${separate.exporterPort}`
      assert.equal((await get(`${url}/healthz`)).status, 200)
      assert.equal((await send(url, '/v1/targets/remove', { body: '{"namespace":"team-a","name":"t"}' })).status, 401)
      assert.equal((await send(url, '/v1/targets/remove', { body: '{"namespace":"team-a","name":"t"}', headers: { Authorization: 'Bearer exporter-token' } })).status, 200)
    } finally {
      await Promise.all([sidecar.close(), separate.close()])
    }
  })

  test('npm start with a token set uses it, on loopback too', async () => {
    const p = await listening('main-dev', { KOLLECT_HOOK_TOKEN: 'dev-token' })
    try {
      assert.deepEqual(warnings(p), [])
      assert.equal((await send(p.url, ROUTES.profileSync, { body: PROFILE_SYNC })).status, 401)
      assert.equal((await send(p.url, ROUTES.profileSync, { body: PROFILE_SYNC, headers: { Authorization: 'Bearer dev-token' } })).status, 200)
    } finally {
      await p.close()
    }
  })
})
