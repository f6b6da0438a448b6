#!/usr/bin/env node
// Writes docs/crd-reference.md and api/status.generated.ts from manifests/crds (`npm run docs`).
// With --check it writes nothing and exits 1 when a checked-in file is out of date.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { relative } from 'node:path'
import { crdReferencePath, renderCrdReference, repoRoot, statusTypesPath } from './crd-docs.js'
import { renderStatusTypes } from './crd-types.js'

const outputs: [string, string][] = [
  [crdReferencePath(), renderCrdReference()],
  [statusTypesPath(), renderStatusTypes()],
]
for (const [file, text] of outputs) {
  const shown = relative(repoRoot(), file)
  if (process.argv.includes('--check')) {
    const current = existsSync(file) ? readFileSync(file, 'utf8') : ''
    if (current !== text) {
      process.stderr.write(`${shown} is out of date; run npm run docs\n`)
      process.exitCode = 1
    } else process.stdout.write(`${shown} is up to date\n`)
  } else {
    writeFileSync(file, text)
    process.stdout.write(`wrote ${shown}\n`)
  }
}
