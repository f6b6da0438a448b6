// One snapshot written to one sink from a process of its own, the sink built as the exporter
// builds it (the sink registry and the SSRF guard, private endpoints allowed for a loopback
// test server). For findings that depend on the process's environment, such as
// NODE_EXTRA_CA_CERTS, which Node.js reads only at start. Prints one JSON line:
// {"ok":true,"result":…} or {"ok":false,"message":…}.
//   node dist/test/support/sink-write-child.js '<KollectSink spec JSON>' '<credentials JSON>'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { buildSnapshot } from '../../api/canonical.js'
import type { KollectSinkSpec } from '../../api/types.js'
import { checkResolvedEndpoint } from '../../server/guards/ssrf.js'
import { createSinkFactory } from '../../sinks/registry.js'
import { makeItems } from './items.js'

const spec = JSON.parse(process.argv[2] ?? '{}') as KollectSinkSpec
const credentials = JSON.parse(process.argv[3] ?? '{}') as Record<string, string>
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'kollect-sink-child-'))
const create = createSinkFactory({ dataDir, credentials: async () => credentials, checkEndpoint: (url) => checkResolvedEndpoint(url, true) })
let outcome: { ok: boolean; result?: unknown; message?: string }
try {
  const sink = await create({ namespace: 'team-a', name: 'private-ca', spec: { ...spec, secretRef: { name: 'credentials' } } })
  try {
    outcome = { ok: true, result: await sink.write(buildSnapshot({ namespace: 'team-a', name: 'inv' }, 'lab-west', makeItems(3))) }
  } finally {
    await sink.close()
  }
} catch (err) {
  outcome = { ok: false, message: (err as Error).message }
} finally {
  rmSync(dataDir, { recursive: true, force: true })
}
process.stdout.write(`${JSON.stringify(outcome)}\n`)
