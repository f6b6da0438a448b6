import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, it } from 'node:test'
import YAML from 'yaml'
import { buildSnapshot, canonicalJsonPretty, sortKeys } from '../../api/canonical.js'
import type { FileSinkSettings, Item, ObjectRef } from '../../api/types.js'
import { renderPath } from '../../sinks/escape.js'
import { createFileSink } from '../../sinks/file/index.js'
import type { SinkOptions } from '../../sinks/options.js'
import type { Sink } from '../../sinks/sink.js'
import { tempDir } from '../support/git.js'
import { bumpReplicas, makeItems } from '../support/items.js'
import { rejection } from '../support/assertions.js'

const INVENTORY: ObjectRef = { namespace: 'team-a', name: 'deployments' }
const CLUSTER = 'lab-west'

function options(dataDir: string, file: FileSinkSettings = {}): SinkOptions {
  return { id: 'team-a/files', spec: { type: 'file', file }, credentials: {}, dataDir }
}

function fileSink(t: { after(fn: () => Promise<void>): void }, opts: SinkOptions): Sink {
  const sink = createFileSink(opts)
  t.after(() => sink.close())
  return sink
}

function snapshot(items: readonly Item[], inventory = INVENTORY, cluster = CLUSTER) {
  return buildSnapshot(inventory, cluster, items)
}

/** Every file below dir, relative to it. */
async function listAll(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
    .sort()
}


describe('file sink', () => {
  it('creates, changes, skips an identical snapshot, and removes one canonical document', async (t) => {
    const dataDir = await tempDir(t, 'kollect-file-')
    const sink = fileSink(t, options(dataDir))
    const file = path.join(dataDir, 'lab-west', 'team-a', 'deployments.json')
    const items = makeItems(5)

    const first = snapshot(items)
    assert.deepEqual(await sink.write(first), { added: 5, changed: 0, removed: 0 })
    assert.equal(await readFile(file, 'utf8'), canonicalJsonPretty(first))

    items[2] = bumpReplicas(items[2] as Item, 17)
    const second = snapshot(items)
    assert.deepEqual(await sink.write(second), { added: 0, changed: 1, removed: 0 })
    const text = await readFile(file, 'utf8')
    assert.equal(text, canonicalJsonPretty(second))
    assert.notEqual(text, canonicalJsonPretty(first))

    const before = await stat(file)
    await new Promise((resolve) => setTimeout(resolve, 20))
    assert.deepEqual(await sink.write(second), { added: 0, changed: 0, removed: 0 })
    assert.deepEqual(await sink.write(snapshot([...items].reverse())), { added: 0, changed: 0, removed: 0 })
    const after = await stat(file)
    assert.equal(after.mtimeMs, before.mtimeMs)
    assert.equal(after.ino, before.ino)
    assert.equal(await readFile(file, 'utf8'), text)

    assert.deepEqual(await sink.write(snapshot([...items.slice(1), ...makeItems(2, 100)])), { added: 2, changed: 0, removed: 1 })

    await sink.remove(INVENTORY, CLUSTER)
    assert.ok(!existsSync(file))
    assert.deepEqual(await listAll(dataDir), [])
    await sink.remove(INVENTORY, CLUSTER)
  })

  it('a restarted sink diffs against the file it finds', async (t) => {
    const dataDir = await tempDir(t, 'kollect-file-')
    const items = makeItems(4)
    const first = createFileSink(options(dataDir))
    await first.write(snapshot(items))
    await first.close()

    const restarted = fileSink(t, options(dataDir))
    items[0] = bumpReplicas(items[0] as Item, 8)
    assert.deepEqual(await restarted.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
  })

  it('writes YAML of the same sorted value, with a .yaml default path', async (t) => {
    const dataDir = await tempDir(t, 'kollect-file-')
    const sink = fileSink(t, options(dataDir, { format: 'yaml' }))
    const file = path.join(dataDir, 'lab-west', 'team-a', 'deployments.yaml')
    const items = makeItems(3)
    items[0] = { ...(items[0] as Item), attributes: { note: 'yes', version: '1.10', multi: 'a\nb', empty: '', nothing: null } }
    const snap = snapshot(items)

    assert.deepEqual(await sink.write(snap), { added: 3, changed: 0, removed: 0 })
    const text = await readFile(file, 'utf8')
    assert.deepEqual(YAML.parse(text), JSON.parse(canonicalJsonPretty(snap)))
    assert.deepEqual(Object.keys(YAML.parse(text) as object), Object.keys(sortKeys(snap) as object))
    assert.match(text, /^checksum: [0-9a-f]{64}$/m)

    assert.deepEqual(await sink.write(snap), { added: 0, changed: 0, removed: 0 })
    items[1] = bumpReplicas(items[1] as Item, 4)
    assert.deepEqual(await sink.write(snapshot(items)), { added: 0, changed: 1, removed: 0 })
  })

  it('an unreadable or foreign file counts as empty and is replaced', async (t) => {
    const dataDir = await tempDir(t, 'kollect-file-')
    const sink = fileSink(t, options(dataDir))
    const file = path.join(dataDir, 'lab-west', 'team-a', 'deployments.json')
    await mkdir(path.dirname(file), { recursive: true })
    const snap = snapshot(makeItems(2))
    for (const junk of ['{"items": [', '{"items": [{"name": 1}]}', '[]', '']) {
      await writeFile(file, junk)
      assert.deepEqual(await sink.write(snap), { added: 2, changed: 0, removed: 0 }, junk)
      assert.equal(await readFile(file, 'utf8'), canonicalJsonPretty(snap))
    }
    assert.deepEqual(await listAll(dataDir), ['lab-west/team-a/deployments.json'], 'no temporary file is left')
  })

  it('refuses path templates that leave the data directory, as permanent errors', async (t) => {
    const root = await tempDir(t, 'kollect-file-')
    const dataDir = path.join(root, 'data')
    for (const template of ['../{name}.json', 'a/../../{name}.json', '/tmp/{name}.json', '{cluster}/{unknown}.json', 'dir/']) {
      const sink = fileSink(t, options(dataDir, { path: template }))
      const err = await rejection(sink.write(snapshot(makeItems(1))))
      assert.equal(err.retriable, false, `${template}: ${err.message}`)
      assert.equal((await rejection(sink.remove(INVENTORY, CLUSTER))).retriable, false)
    }
    assert.deepEqual(await readdir(root), [])
  })

  it('hostile namespace, name and cluster values stay inside the data directory', async (t) => {
    const root = await tempDir(t, 'kollect-file-')
    const dataDir = path.join(root, 'data')
    const sink = fileSink(t, options(dataDir))
    const hostile: [ObjectRef, string][] = [
      [{ namespace: '../..', name: '../../../etc/passwd' }, '..'],
      [{ namespace: '/', name: 'a/b' }, '/abs'],
      [{ namespace: '.', name: '*' }, 'c'],
      [{ namespace: 'ünïcødé-日本', name: '"quoted" \'single\'' }, 'c'],
      [{ namespace: 'back\\slash', name: '' }, ''],
    ]
    for (const [inventory, cluster] of hostile) {
      const snap = snapshot(makeItems(1), inventory, cluster)
      assert.deepEqual(await sink.write(snap), { added: 1, changed: 0, removed: 0 }, JSON.stringify(inventory))
      const expected = renderPath(dataDir, '{cluster}/{namespace}/{name}.json', { cluster, ...inventory })
      assert.equal(await readFile(expected, 'utf8'), canonicalJsonPretty(snap))
    }
    assert.deepEqual(await readdir(root), ['data'])
    const files = await listAll(dataDir)
    assert.equal(files.length, hostile.length, files.join('\n'))
    for (const file of files) {
      assert.ok(!file.split(path.sep).some((part) => part === '..' || part === '.'), file)
    }
    for (const [inventory, cluster] of hostile) await sink.remove(inventory, cluster)
    assert.deepEqual(await listAll(dataDir), [])
  })

  it('healthcheck checks that the data directory is writable', async (t) => {
    const root = await tempDir(t, 'kollect-file-')
    await fileSink(t, options(path.join(root, 'fresh'))).healthcheck()
    assert.deepEqual(await readdir(path.join(root, 'fresh')), [])

    const blocker = path.join(root, 'not-a-dir')
    await writeFile(blocker, 'x')
    const err = await rejection(fileSink(t, options(blocker)).healthcheck())
    assert.match(err.message, /file sink team-a\/files/)

    const badFormat = fileSink(t, { ...options(root), spec: { type: 'file', file: { format: 'xml' as 'json' } } })
    assert.equal((await rejection(badFormat.healthcheck())).retriable, false)
  })
})
