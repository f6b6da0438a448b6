import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, describe, test } from 'node:test'
import YAML from 'yaml'
import type { KollectSinkSpec } from '../../api/types.js'
import type { Credentials, Sink } from '../../sinks/sink.js'
import { createFileSink } from '../../sinks/file/index.js'
import { createGitSink } from '../../sinks/git/index.js'
import { createKafkaSink } from '../../sinks/kafka/index.js'
import { createNatsSink } from '../../sinks/nats/index.js'
import { createPostgresSink } from '../../sinks/postgres/index.js'
import { createS3Sink } from '../../sinks/s3/index.js'
import { ROOT } from '../support/metacontroller.js'

// Which sinks have drift checks is said in three places (the KollectSink CRD's spec.drift,
// design.md, operations.md); they once disagreed with each other and with the code. The truth
// is whether a sink implements Sink.verify: built here, never connected.

const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-drift-docs-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const SINKS: Record<string, [(o: { id: string; spec: KollectSinkSpec; credentials: Credentials; dataDir: string }) => Sink, KollectSinkSpec, Credentials]> = {
  file: [createFileSink, { type: 'file' }, {}],
  git: [createGitSink, { type: 'git', git: { url: 'https://git.example.com/fleet.git' } }, {}],
  postgres: [createPostgresSink, { type: 'postgres' }, { dsn: 'postgres://kollect:secret@127.0.0.1:1/kollect' }],
  nats: [createNatsSink, { type: 'nats', nats: { url: 'nats://127.0.0.1:1' } }, {}],
  kafka: [createKafkaSink, { type: 'kafka', kafka: { brokers: '127.0.0.1:1', topic: 'inventory' } }, {}],
  s3: [createS3Sink, { type: 's3', s3: { bucket: 'kollect-inventory', region: 'us-east-1', endpoint: 'http://127.0.0.1:1' } }, { accessKeyId: 'a', secretAccessKey: 'b' }],
}

async function unchecked(): Promise<string[]> {
  const without: string[] = []
  for (const [type, [create, spec, credentials]] of Object.entries(SINKS)) {
    const sink = create({ id: `team-a/${type}`, spec, credentials, dataDir: path.join(dir, type) })
    if (!sink.verify) without.push(type)
    await sink.close()
  }
  return without.sort()
}

/** The sink types a sentence like "File and S3 sinks have no check" names, lower-cased and sorted. */
function named(text: string, pattern: RegExp, where: string): string[] {
  const m = pattern.exec(text)
  assert.ok(m, `${where} says which sinks have no drift check (${pattern})`)
  return Object.keys(SINKS).filter((t) => new RegExp(`\\b${t}\\b`, 'i').test(m[1] as string)).sort()
}

function section(file: string, heading: RegExp): string {
  const text = readFileSync(path.join(ROOT, file), 'utf8')
  const start = text.search(heading)
  assert.ok(start >= 0, `${file} has ${heading}`)
  const next = text.slice(start + 1).search(/\n## /)
  return next < 0 ? text.slice(start) : text.slice(start, start + 1 + next)
}

describe('the docs name the sinks the code checks for drift', () => {
  test('a git sink in review mode has no check (each poll compares the target branch)', () => {
    const sink = createGitSink({ id: 'team-a/review', spec: { type: 'git', git: { url: 'https://git.example.com/fleet.git', review: { provider: 'gitea', apiUrl: 'https://git.example.com/api/v1', project: 'team/fleet' } } }, credentials: { token: 't' }, dataDir: path.join(dir, 'review') })
    assert.equal(sink.verify, undefined)
  })

  test('the KollectSink CRD spec.drift description', async () => {
    type SinkCrd = { spec: { versions: { schema: { openAPIV3Schema: { properties: { spec: { properties: { drift: { description: string } } } } } } }[] } }
    const crd = YAML.parse(readFileSync(path.join(ROOT, 'manifests/crds/kollect.dev_kollectsinks.yaml'), 'utf8')) as SinkCrd
    const description = (crd.spec.versions[0] as (typeof crd.spec.versions)[number]).schema.openAPIV3Schema.properties.spec.properties.drift.description
    assert.deepEqual(named(description, /([^.:]*) sinks ignore it/i, 'the CRD'), await unchecked())
    assert.match(description, /not in review mode/)
  })

  test('operations.md, Drift detection', async () => {
    assert.deepEqual(named(section('docs/operations.md', /^## Drift detection/m), /^([^.:\n]*) sinks have no check/m, 'operations.md'), await unchecked())
  })

  test('design.md, Delivery guarantees', async () => {
    assert.deepEqual(named(section('docs/design.md', /^## Delivery guarantees/m), /([^.:;(]*) sinks have no check/, 'design.md'), await unchecked())
  })
})
