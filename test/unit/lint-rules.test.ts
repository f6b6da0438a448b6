import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, test } from 'node:test'
import { ESLint } from 'eslint'
import { repoRoot } from '../../cli/crd-docs.js'

// The layering rules of eslint.config.js, run through ESLint itself on snippets: each rule must
// refuse what it is for and let the legal imports beside it through. A new rule is a new entry
// of RULES, with at least one refused and one allowed case.

interface ImportCase {
  /** Where the snippet is written, relative to the repository root (it need not exist). */
  file: string
  code: string
  /** Part of the rule's message when the import is refused; absent when it is allowed. */
  refused?: string
}

const SIBLING = "must not import another sink's folder"
const FACADE = 'import the exporter through exporter/index.js'

const RULES: Record<string, ImportCase[]> = {
  'a sink folder never imports another sink folder': [
    { file: 'sinks/s3/x.ts', code: "import { itemPath } from '../git/encode.js'", refused: `sinks/s3/ ${SIBLING}` },
    { file: 'sinks/kafka/x.ts', code: "import type { OutgoingMessage } from '../nats/encode.js'", refused: `sinks/kafka/ ${SIBLING}` },
    { file: 'sinks/git/review/x.ts', code: "export { s3Sink } from '../../s3/index.js'", refused: `sinks/git/ ${SIBLING}` },
    { file: 'sinks/s3/x.ts', code: "import { natsSink } from '../../sinks/nats/index.js'", refused: `sinks/s3/ ${SIBLING}` },
    { file: 'sinks/s3/x.ts', code: "import { EMPTY_CHECKSUM } from '../events.js'" },
    { file: 'sinks/s3/x.ts', code: "import { s3Settings } from './config.js'" },
    { file: 'sinks/git/review/x.ts', code: "import { gitEndpoints } from '../config.js'" },
    { file: 'sinks/git/x.ts', code: "import { S3Client } from '@aws-sdk/client-s3'" },
    { file: 'sinks/registry.ts', code: "import { gitSink } from './git/index.js'" },
  ],
  'outside the exporter, only its index.ts is imported': [
    { file: 'server/process/x.ts', code: "import { SinkPool } from '../../exporter/pool.js'", refused: FACADE },
    { file: 'hub/x.ts', code: "import { SinkDriver } from '../exporter/sink-driver.js'", refused: FACADE },
    { file: 'test/integration/x.ts', code: "import { PendingJournal } from '../../exporter/pending-journal.js'", refused: FACADE },
    { file: 'hub/x.ts', code: "import { SinkDriver } from '../exporter/index.js'" },
    { file: 'exporter/x.ts', code: "import { SinkPool } from './pool.js'" },
    { file: 'test/unit/exporter/x.ts', code: "import { SinkPool } from '../../../exporter/pool.js'" },
  ],
  'each layer imports only the layers below it': [
    { file: 'api/x.ts', code: "import { gitSink } from '../sinks/git/index.js'", refused: 'api/ must not import' },
    { file: 'hooks/x.ts', code: "import { loadConfig } from '../server/process/config.js'", refused: 'hooks/ must not import' },
    { file: 'exporter/x.ts', code: "import { Hub } from '../hub/hub.js'", refused: 'exporter/ must not import' },
    { file: 'hub/x.ts', code: "import { createLogger } from '../server/process/logger.js'", refused: 'hub/ must not import' },
    { file: 'sinks/x.ts', code: "import { extract } from '../hooks/extract.js'", refused: 'sinks/ must not import' },
    { file: 'hooks/x.ts', code: "import { canonicalJson } from '../api/canonical.js'" },
    { file: 'exporter/x.ts', code: "import { NO_FENCE } from '../sinks/fence.js'" },
  ],
  'a server room imports only the rooms below it, never an entry point': [
    { file: 'server/protocol/x.ts', code: "import { buildHooksApp } from '../http/hooks-app.js'", refused: 'server/protocol/ imports only the rooms below it' },
    { file: 'server/http/plugins/x.ts', code: "import { exporterClient } from '../../exporter-api/client.js'", refused: 'server/http/ imports only the rooms below it' },
    { file: 'server/extraction/x.ts', code: "import { main } from '../main-hooks.js'", refused: 'never an entry point' },
    { file: 'server/cluster/x.ts', code: "import { createExporter } from '../exporter-wiring.js'", refused: 'never an entry point' },
    { file: 'server/extraction/x.ts', code: "import { KollectError } from '../protocol/errors.js'" },
    { file: 'server/http/plugins/x.ts', code: "import { ExtractionPool } from '../../extraction/pool.js'" },
    { file: 'server/main-hooks.ts', code: "import { buildHooksApp } from './http/hooks-app.js'" },
  ],
  'sinks never import exporter/': [
    { file: 'sinks/s3/x.ts', code: "import { createExporter } from '../../exporter/index.js'", refused: 'sinks/ must not import exporter/' },
    { file: 'sinks/registry.ts', code: "import { createExporter } from '../exporter/index.js'", refused: 'sinks/ must not import exporter/' },
  ],
}

const eslint = new ESLint({ cwd: repoRoot() })

/** The messages of no-restricted-imports for the snippet; other rules (unused imports) are not the point. */
async function restrictedImports(c: ImportCase): Promise<string[]> {
  const [result] = await eslint.lintText(`${c.code}\n`, { filePath: path.join(repoRoot(), c.file) })
  assert.ok(result, 'ESLint linted the snippet')
  return result.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message)
}

for (const [rule, cases] of Object.entries(RULES)) {
  describe(rule, () => {
    for (const c of cases) {
      test(`${c.file}: ${c.code} is ${c.refused ? 'refused' : 'allowed'}`, async () => {
        const messages = await restrictedImports(c)
        if (c.refused === undefined) assert.deepEqual(messages, [])
        else assert.ok(messages.length === 1 && messages[0]?.includes(c.refused), `one error saying "${c.refused}", got ${JSON.stringify(messages)}`)
      })
    }
  })
}
