import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, test } from 'node:test'
import type { KollectSinkSpec, ResolvedSink } from '../../../api/types.js'
import { createSinkFactory, IN_POD_WITH_STANDBYS } from '../../../sinks/registry.js'
import { SinkError } from '../../../sinks/sink.js'

// Issue 27: with exporter.replicas=2 the embedded default, a git sink without a url and a file sink
// each wrote to their own pod's data directory, so a takeover split the history across pods.
// Beside standbys the registry refuses them, with the reason; sinks on a server are built as before.

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'kollect-registry-'))
after(() => rmSync(dataDir, { recursive: true, force: true }))

const factory = (standbys: boolean) => createSinkFactory({ dataDir, credentials: async () => ({ dsn: 'postgres://u:p@db.example:5432/k' }), checkEndpoint: async () => null, standbys })
const sink = (name: string, spec: Omit<KollectSinkSpec, 'cluster'>): ResolvedSink => ({ namespace: 'team-a', name, spec: { cluster: 'lab-west', ...spec } as KollectSinkSpec })

const IN_POD: [string, ResolvedSink | null][] = [
  ['the embedded default', null],
  ['a file sink', sink('files', { type: 'file' })],
  ['a git sink without a url', sink('local-git', { type: 'git', git: {} })],
  ['a git sink with a blank url', sink('blank-git', { type: 'git', git: { url: '  ' } })],
]

for (const [what, resolved] of IN_POD) {
  test(`beside standbys, ${what} is refused with the reason, and never retried`, async () => {
    const err = await factory(true)(resolved).then(() => null, (e: unknown) => e)
    assert.ok(err instanceof SinkError, String(err))
    assert.equal(err.retriable, false)
    assert.ok(err.message.endsWith(IN_POD_WITH_STANDBYS), err.message)
    assert.match(err.message, resolved ? new RegExp(`^sink team-a/${resolved.name} keeps its record in this exporter pod's data directory`) : /^the embedded default sink keeps/)
    assert.match(err.message, /Give a git sink a url .*or run one exporter \(exporter\.replicas=1\)$/)
  })

  test(`without standbys, ${what} is built`, async () => {
    const built = await factory(false)(resolved)
    assert.equal(typeof built.write, 'function')
    await built.close()
  })
}

test('beside standbys, sinks on a server are built: git with a url, PostgreSQL', async () => {
  for (const resolved of [sink('remote', { type: 'git', git: { url: 'https://git.example/inv.git' } }), sink('pg', { type: 'postgres', secretRef: { name: 'pg' } })]) {
    const built = await factory(true)(resolved)
    assert.equal(typeof built.write, 'function', resolved.name)
    await built.close()
  }
})
