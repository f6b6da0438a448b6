import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import pgClient from 'pg'
import { canonicalJson, itemHash, itemKey } from '../../api/canonical.js'
import type { Item, JsonObject, ObjectRef, Snapshot } from '../../api/types.js'
import { quoteIdent } from '../../sinks/escape.js'
import { createPostgresSink } from '../../sinks/postgres/index.js'
import { SinkError, type Sink } from '../../sinks/sink.js'
import { bumpReplicas, makeItem, makeItems, snapshotOf, TARGET } from '../support/items.js'
import { freePort } from '../support/ports.js'
import { startPostgres, type PgServer } from '../support/postgres.js'

const CLUSTER = 'lab-west'
const SINK_ID = 'platform/shared-pg'

interface Row {
  target_namespace: string
  target_name: string
  uid: string
  content_hash: string
  snapshot_checksum: string
  attributes: unknown
}

describe('postgres sink (real PostgreSQL)', () => {
  let pg: PgServer
  const sinks: Sink[] = []
  let inventoryCounter = 0

  before(async () => {
    pg = await startPostgres()
  })

  after(async () => {
    for (const sink of sinks) await sink.close().catch(() => undefined)
    await pg?.destroy()
  })

  function sink(opts: { dsn?: string; schema?: string; table?: string } = {}): Sink {
    const s = createPostgresSink({
      id: SINK_ID,
      spec: { type: 'postgres', postgres: { schema: opts.schema, table: opts.table } },
      credentials: { dsn: opts.dsn ?? pg.dsn },
      dataDir: '/nonexistent',
    })
    sinks.push(s)
    return s
  }

  function freshInventory(): ObjectRef {
    inventoryCounter += 1
    return { namespace: 'team-a', name: `inv-${inventoryCounter}` }
  }

  async function rows(inv: ObjectRef, table = '"public"."kollect_items"'): Promise<Row[]> {
    return pg.query<Row>(
      `SELECT target_namespace, target_name, uid, content_hash, snapshot_checksum, attributes FROM ${table}
       WHERE cluster = $1 AND inventory_namespace = $2 AND inventory_name = $3 ORDER BY uid`,
      [CLUSTER, inv.namespace, inv.name],
    )
  }

  async function snapshotRows(inv: ObjectRef): Promise<{ checksum: string; item_count: number; added: number; changed: number; removed: number }[]> {
    return pg.query(
      `SELECT checksum, item_count, added, changed, removed FROM "public"."kollect_items_snapshots"
       WHERE cluster = $1 AND inventory_namespace = $2 AND inventory_name = $3 ORDER BY id`,
      [CLUSTER, inv.namespace, inv.name],
    )
  }

  /** The table holds exactly the snapshot's items, each with its content hash. */
  async function assertHolds(inv: ObjectRef, snapshot: Snapshot): Promise<void> {
    const held = new Map((await rows(inv)).map((r) => [`${r.target_namespace}/${r.target_name}/${r.uid}`, r.content_hash]))
    const expected = new Map(snapshot.items.map((i) => [itemKey(i), itemHash(i)]))
    assert.equal(held.size, expected.size, 'row count')
    for (const [key, hash] of expected) assert.equal(held.get(key), hash, `row ${key}`)
  }

  test('first export inserts one row per item and one snapshot row', async () => {
    const inv = freshInventory()
    const snap = snapshotOf(inv, makeItems(50))
    const result = await sink().write(snap)
    assert.deepEqual(result, { added: 50, changed: 0, removed: 0 })
    await assertHolds(inv, snap)
    const stored = await rows(inv)
    assert.ok(stored.every((r) => r.snapshot_checksum === snap.checksum))
    assert.deepEqual(stored[0]!.attributes, makeItem(0).attributes)
    assert.deepEqual(await snapshotRows(inv), [{ checksum: snap.checksum, item_count: 50, added: 50, changed: 0, removed: 0 }])
    const migrations = await pg.query('SELECT table_name, version FROM "public"."kollect_schema_migrations" ORDER BY version')
    assert.deepEqual(migrations, [{ table_name: 'kollect_items', version: 1 }, { table_name: 'kollect_items', version: 2 }])
  })

  test('changing one item updates exactly that row', async () => {
    const inv = freshInventory()
    const s = sink()
    const items = makeItems(20)
    const first = snapshotOf(inv, items)
    await s.write(first)
    const before = new Map((await rows(inv)).map((r) => [r.uid, r]))

    const changedItems = items.map((i, n) => (n === 7 ? bumpReplicas(i, 99) : i))
    const second = snapshotOf(inv, changedItems)
    assert.deepEqual(await s.write(second), { added: 0, changed: 1, removed: 0 })
    await assertHolds(inv, second)
    const after = await rows(inv)
    const differing = after.filter((r) => before.get(r.uid)?.content_hash !== r.content_hash)
    assert.equal(differing.length, 1)
    assert.equal(differing[0]!.uid, items[7]!.uid)
    assert.equal(differing[0]!.content_hash, itemHash(changedItems[7]!))
    assert.equal(differing[0]!.snapshot_checksum, second.checksum)
    // untouched rows keep the checksum of the export that last wrote them
    assert.ok(after.filter((r) => r.uid !== items[7]!.uid).every((r) => r.snapshot_checksum === first.checksum))
    assert.deepEqual((await snapshotRows(inv)).at(-1), { checksum: second.checksum, item_count: 20, added: 0, changed: 1, removed: 0 })
  })

  test('removing one item deletes exactly its row', async () => {
    const inv = freshInventory()
    const s = sink()
    const items = makeItems(20)
    await s.write(snapshotOf(inv, items))
    const remaining = items.filter((_, n) => n !== 3)
    const snap = snapshotOf(inv, remaining)
    assert.deepEqual(await s.write(snap), { added: 0, changed: 0, removed: 1 })
    await assertHolds(inv, snap)
    assert.ok(!(await rows(inv)).some((r) => r.uid === items[3]!.uid))
  })

  test('writing the same snapshot twice writes nothing the second time, also from a new sink instance', async () => {
    const inv = freshInventory()
    const snap = snapshotOf(inv, makeItems(30))
    await sink().write(snap)
    const exportedAt = await pg.query('SELECT max(exported_at) AS t FROM "public"."kollect_items" WHERE inventory_name = $1', [inv.name])
    assert.deepEqual(await sink().write(snap), { added: 0, changed: 0, removed: 0 })
    assert.equal((await rows(inv)).length, 30)
    assert.equal((await snapshotRows(inv)).length, 1)
    assert.deepEqual(
      await pg.query('SELECT max(exported_at) AS t FROM "public"."kollect_items" WHERE inventory_name = $1', [inv.name]),
      exportedAt,
    )
  })

  test('two replicas writing the same snapshot concurrently write it once', async () => {
    const inv = freshInventory()
    const snap = snapshotOf(inv, makeItems(500))
    const results = await Promise.all([sink().write(snap), sink().write(snap)])
    const added = results.map((r) => r.added).sort((a, b) => a - b)
    assert.deepEqual(added, [0, 500])
    await assertHolds(inv, snap)
    assert.equal((await snapshotRows(inv)).length, 1)
  })

  test('remove() (deletionPolicy Delete) deletes the inventory rows and snapshot rows, and nothing else', async () => {
    const s = sink()
    const gone = freshInventory()
    const kept = freshInventory()
    await s.write(snapshotOf(gone, makeItems(10)))
    await s.write(snapshotOf(gone, makeItems(12)))
    const keptSnap = snapshotOf(kept, makeItems(10))
    await s.write(keptSnap)
    await s.remove(gone, CLUSTER)
    assert.equal((await rows(gone)).length, 0)
    assert.equal((await snapshotRows(gone)).length, 0)
    await assertHolds(kept, keptSnap)
    await s.remove(gone, CLUSTER) // idempotent
  })

  test('names with quotes and spaces are identifiers, never SQL; several tables share one schema', async () => {
    const schema = 'kollect "odd" schema'
    const table = 'items"; DROP TABLE x; --'
    const s = sink({ schema, table })
    const inv = { namespace: "o'brien ns", name: 'inv "quoted"; --' }
    const snap = snapshotOf(inv, makeItems(5))
    assert.deepEqual(await s.write(snap), { added: 5, changed: 0, removed: 0 })
    const stored = await rows(inv, `${quoteIdent(schema)}.${quoteIdent(table)}`)
    assert.equal(stored.length, 5)
    const other = sink({ schema, table: 'second table' })
    assert.deepEqual(await other.write(snap), { added: 5, changed: 0, removed: 0 })
    const migrations = await pg.query(`SELECT table_name, version FROM ${quoteIdent(schema)}."kollect_schema_migrations" ORDER BY table_name, version`)
    assert.deepEqual(migrations, [
      { table_name: 'items"; DROP TABLE x; --', version: 1 },
      { table_name: 'items"; DROP TABLE x; --', version: 2 },
      { table_name: 'second table', version: 1 },
      { table_name: 'second table', version: 2 },
    ])
  })

  test('credentials never reach error messages', async () => {
    const closedPort = await freePort()
    const secret = 's3cr3t-pw'
    const unreachable = sink({ dsn: `postgres://kollect:${secret}@127.0.0.1:${closedPort}/postgres` })
    const attempts = [
      () => unreachable.healthcheck(),
      () => unreachable.write(snapshotOf(freshInventory(), makeItems(1))),
      () => unreachable.verify!(snapshotOf(freshInventory(), makeItems(1)), 'report'),
    ]
    for (const attempt of attempts) {
      const err = await attempt().then(
        () => assert.fail('expected a failure'),
        (e: unknown) => e,
      )
      assert.ok(err instanceof SinkError)
      assert.equal(err.retriable, true, err.message)
      assert.match(err.message, /postgres sink platform\/shared-pg/)
      assert.ok(!err.message.includes(secret), err.message)
      assert.ok(!err.message.includes('kollect:'), err.message)
    }

    // percent-encoded in the DSN: neither form may leak
    const encoded = sink({ dsn: `postgres://kollect:p%40ss%2F${secret}@127.0.0.1:${closedPort}/postgres` })
    const encodedErr = await encoded.healthcheck().then(
      () => assert.fail('expected a failure'),
      (e: unknown) => e,
    )
    assert.ok(encodedErr instanceof SinkError)
    assert.ok(!encodedErr.message.includes(secret) && !encodedErr.message.includes('p@ss'), encodedErr.message)

    // a live server refusing the password: permanent, and neither password nor user named
    const refused = sink({ dsn: `postgres://${pg.user}:${secret}@127.0.0.1:${pg.port}/postgres` })
    const err = await refused.healthcheck().then(
      () => assert.fail('expected an authentication failure'),
      (e: unknown) => e,
    )
    assert.ok(err instanceof SinkError)
    assert.equal(err.retriable, false, err.message)
    assert.match(err.message, /password authentication failed/)
    assert.ok(!err.message.includes(secret), err.message)
    assert.ok(!err.message.includes(`"${pg.user}"`), err.message)
  })

  test('a missing connection string is a permanent configuration error', () => {
    assert.throws(
      () => createPostgresSink({ id: SINK_ID, spec: { type: 'postgres' }, credentials: { password: 'x' }, dataDir: '' }),
      (err: unknown) => err instanceof SinkError && !err.retriable && /connection string/.test(err.message),
    )
    const fromUrl = createPostgresSink({ id: SINK_ID, spec: { type: 'postgres' }, credentials: { DATABASE_URL: pg.dsn }, dataDir: '' })
    sinks.push(fromUrl)
  })

  test('timing: 10k-item initial export, a 1-item change and a drift check', async (t) => {
    const inv = freshInventory()
    const s = sink()
    const items = makeItems(10_000)
    const first = snapshotOf(inv, items)
    let started = performance.now()
    assert.deepEqual(await s.write(first), { added: 10_000, changed: 0, removed: 0 })
    const initialMs = performance.now() - started
    const second = snapshotOf(inv, items.map((i, n) => (n === 5000 ? bumpReplicas(i, 42) : i)))
    started = performance.now()
    assert.deepEqual(await s.write(second), { added: 0, changed: 1, removed: 0 })
    const changeMs = performance.now() - started
    started = performance.now()
    assert.deepEqual(await s.write(second), { added: 0, changed: 0, removed: 0 })
    const noopMs = performance.now() - started
    t.diagnostic(`postgres: 10k initial ${initialMs.toFixed(0)} ms, 1-item change ${changeMs.toFixed(0)} ms, unchanged ${noopMs.toFixed(0)} ms`)
    await assertHolds(inv, second)

    // Drift check of the same 10k rows: in step, then with one row edited by hand and repaired.
    started = performance.now()
    assert.deepEqual(await s.verify!(second, 'report'), { differences: 0, examples: [], repaired: false })
    const verifyMs = performance.now() - started
    await pg.query(
      `UPDATE "public"."kollect_items" SET attributes = jsonb_set(attributes, '{replicas}', '77')
       WHERE cluster = $1 AND inventory_namespace = $2 AND inventory_name = $3 AND uid = $4`,
      [CLUSTER, inv.namespace, inv.name, items[1234]!.uid],
    )
    started = performance.now()
    assert.deepEqual(await s.verify!(second, 'repair'), { differences: 1, examples: [itemKey(items[1234]!)], repaired: true })
    const repairMs = performance.now() - started
    const ratio = (ms: number): string => `${((100 * ms) / initialMs).toFixed(0)}% of the initial export`
    t.diagnostic(`postgres: 10k verify in step ${verifyMs.toFixed(0)} ms (${ratio(verifyMs)}), 1-row repair ${repairMs.toFixed(0)} ms (${ratio(repairMs)})`)
    await assertHolds(inv, second)
  })

  test('PostgreSQL killed mid-export: retriable error, no partial snapshot, retry converges', async (t) => {
    const inv = freshInventory()
    const s = sink()
    const n = 20_000
    const old = snapshotOf(inv, makeItems(n))
    await s.write(old)
    // every item changes and 2000 are new: a partial commit would be visible in any row
    const next = snapshotOf(inv, [...makeItems(n).map((i) => bumpReplicas(i, 7)), ...makeItems(2000, n)])

    const pending = s.write(next)
    const outcome = pending.then(
      () => 'resolved' as const,
      (e: unknown) => e,
    )
    // Kill once the export has finished some upsert statements and is running another: a
    // non-transactional write would then have committed rows. Progress shows as the INSERT's
    // query_start changing from one chunk to the next.
    const watcher = new pgClient.Client({ connectionString: pg.dsn })
    watcher.on('error', () => undefined)
    await watcher.connect()
    const chunkStarts = new Set<string>()
    const deadline = Date.now() + 20_000
    try {
      while (chunkStarts.size < 3) {
        const { rows: active } = await watcher.query<{ started: Date }>(
          "SELECT query_start AS started FROM pg_stat_activity WHERE application_name = 'kollect' AND query LIKE 'INSERT INTO%unnest%' AND state = 'active'",
        )
        for (const r of active) chunkStarts.add(r.started.toISOString())
        if (Date.now() > deadline) assert.fail(`the export never got to its third upsert (${chunkStarts.size} seen)`)
      }
    } finally {
      await watcher.end().catch(() => undefined)
    }
    await pg.kill()
    const err = await outcome
    assert.ok(err instanceof SinkError, `write should reject, got ${String(err)}`)
    assert.equal(err.retriable, true, err.message)
    assert.ok(!err.message.includes(pg.password), err.message)
    t.diagnostic(`write during kill: ${err.message}`)

    await pg.start()
    await assertHolds(inv, old)
    assert.equal((await snapshotRows(inv)).at(-1)?.checksum, old.checksum)

    assert.deepEqual(await s.write(next), { added: 2000, changed: n, removed: 0 })
    await assertHolds(inv, next)
    const snaps = await snapshotRows(inv)
    assert.equal(snaps.length, 2)
    assert.equal(snaps[1]!.checksum, next.checksum)
  })

  describe('drift: rows changed by hand are found and put back', () => {
    const ITEMS = '"public"."kollect_items"'
    const INV_WHERE = 'cluster = $1 AND inventory_namespace = $2 AND inventory_name = $3'

    /** Every column of the inventory's rows and snapshot rows, with xmin: equal dumps mean nothing was written. */
    async function dump(inv: ObjectRef, table = ITEMS): Promise<{ items: unknown[]; snapshots: unknown[] }> {
      const params = [CLUSTER, inv.namespace, inv.name]
      return {
        items: await pg.query(`SELECT t.*, t.xmin::text AS xmin FROM ${table} t WHERE ${INV_WHERE} ORDER BY target_namespace, target_name, uid`, params),
        snapshots: await pg.query(`SELECT t.*, t.xmin::text AS xmin FROM ${table.slice(0, -1)}_snapshots" t WHERE ${INV_WHERE} ORDER BY id`, params),
      }
    }

    /** The item columns of the rows (no provenance), to compare with a fresh export's. */
    async function content(inv: ObjectRef, table = ITEMS): Promise<unknown[]> {
      return pg.query(
        `SELECT target_namespace, target_name, uid, api_group, api_version, kind, namespace, name, attributes::text, content_hash
         FROM ${table} WHERE ${INV_WHERE} ORDER BY target_namespace, target_name, uid`,
        [CLUSTER, inv.namespace, inv.name],
      )
    }

    /** Runs SQL as a person would, on the rows of inv; $4 is the uid of `item` when given. */
    async function byHand(inv: ObjectRef, sql: string, item?: Item): Promise<void> {
      await pg.query(sql, [CLUSTER, inv.namespace, inv.name, ...(item ? [item.uid] : [])])
    }

    async function exported(n: number): Promise<{ inv: ObjectRef; s: Sink; items: Item[]; snap: Snapshot }> {
      const inv = freshInventory()
      const s = sink()
      const items = makeItems(n)
      const snap = snapshotOf(inv, items)
      await s.write(snap)
      return { inv, s, items, snap }
    }

    test('UPDATE, INSERT and DELETE by hand: report finds 3 and writes nothing; repair restores the export in one transaction', async () => {
      const { inv, s, items, snap } = await exported(20)
      const edited = items[4]!
      const deleted = items[9]!
      // content_hash is left as it was: only hashing what is stored can see this edit
      await byHand(inv, `UPDATE ${ITEMS} SET attributes = jsonb_set(attributes, '{replicas}', '77') WHERE ${INV_WHERE} AND uid = $4`, edited)
      await byHand(
        inv,
        `INSERT INTO ${ITEMS} SELECT cluster, inventory_namespace, inventory_name, target_namespace, target_name, 'stray-uid',
           api_group, api_version, kind, namespace, 'stray', attributes, content_hash, snapshot_checksum, exported_at
         FROM ${ITEMS} WHERE ${INV_WHERE} AND uid = $4`,
        items[0],
      )
      await byHand(inv, `DELETE FROM ${ITEMS} WHERE ${INV_WHERE} AND uid = $4`, deleted)
      const drifted = await dump(inv)
      const examples = [itemKey(edited), itemKey(deleted), `${TARGET.namespace}/${TARGET.name}/stray-uid`].sort()

      assert.deepEqual(await s.verify!(snap, 'report'), { differences: 3, examples, repaired: false })
      assert.deepEqual(await dump(inv), drifted, 'report wrote nothing')

      assert.deepEqual(await s.verify!(snap, 'repair'), { differences: 3, examples, repaired: true })
      await assertHolds(inv, snap)
      const fresh = 'fresh_export'
      await sink({ table: fresh }).write(snap)
      assert.deepEqual(await content(inv), await content(inv, `"public"."${fresh}"`), 'the rows equal a fresh export of the snapshot')

      // One transaction: the rows it wrote and its snapshot row carry the same xmin; the rest are untouched.
      const repaired = await dump(inv)
      const newSnapshot = repaired.snapshots.at(-1) as { xmin: string; added: number; changed: number; removed: number; checksum: string }
      assert.equal(repaired.snapshots.length, 2)
      assert.deepEqual({ ...newSnapshot }, { ...newSnapshot, checksum: snap.checksum, added: 1, changed: 1, removed: 1 })
      const before = new Map((drifted.items as { uid: string; xmin: string }[]).map((r) => [r.uid, r.xmin]))
      const written = (repaired.items as { uid: string; xmin: string }[]).filter((r) => before.get(r.uid) !== r.xmin)
      assert.deepEqual(written.map((r) => r.uid).sort(), [deleted.uid, edited.uid].sort())
      assert.ok(written.every((r) => r.xmin === newSnapshot.xmin), 'rows and snapshot row written by one transaction')

      assert.deepEqual(await s.verify!(snap, 'repair'), { differences: 0, examples: [], repaired: false })
      assert.deepEqual(await dump(inv), repaired, 'a verify in step writes nothing')
    })

    // Each edit touches one column Kollect writes; each must count as one difference and be put back.
    const edits: { reason: string; sql: string; differences?: number; example?: 'item' | 'snapshot' | 'snapshot+4' | 'first5' }[] = [
      { reason: 'attributes edited, hash column left alone', sql: `UPDATE ${ITEMS} SET attributes = attributes || '{"owner": "mallory"}' WHERE ${INV_WHERE} AND uid = $4` },
      { reason: 'hash column edited, attributes left alone', sql: `UPDATE ${ITEMS} SET content_hash = md5(content_hash) WHERE ${INV_WHERE} AND uid = $4` },
      { reason: 'an identity column edited', sql: `UPDATE ${ITEMS} SET kind = 'StatefulSet' WHERE ${INV_WHERE} AND uid = $4` },
      { reason: 'the row claims an export that never happened', sql: `UPDATE ${ITEMS} SET snapshot_checksum = md5('x') WHERE ${INV_WHERE} AND uid = $4` },
      { reason: 'the export time edited', sql: `UPDATE ${ITEMS} SET exported_at = exported_at - interval '1 day' WHERE ${INV_WHERE} AND uid = $4` },
      {
        // the rows that export stamped now name an export the history does not hold
        reason: 'the snapshot row checksum edited',
        sql: `UPDATE "public"."kollect_items_snapshots" SET checksum = md5(checksum) WHERE ${INV_WHERE} AND $4 <> ''`,
        differences: 1 + 8,
        example: 'snapshot+4',
      },
      {
        reason: 'the snapshot row item count edited',
        sql: `UPDATE "public"."kollect_items_snapshots" SET item_count = 3 WHERE ${INV_WHERE} AND $4 <> ''`,
        example: 'snapshot',
      },
      { reason: 'every row deleted', sql: `DELETE FROM ${ITEMS} WHERE ${INV_WHERE} AND $4 <> ''`, differences: 8, example: 'first5' },
    ]
    for (const edit of edits) {
      test(`drift: ${edit.reason}`, async () => {
        const { inv, s, items, snap } = await exported(8)
        await byHand(inv, edit.sql, items[2])
        const examples =
          edit.example === 'snapshot' ? ['kollect_items_snapshots']
          : edit.example === 'snapshot+4' ? ['kollect_items_snapshots', ...items.map(itemKey).sort().slice(0, 4)]
          : edit.example === 'first5' ? items.map(itemKey).sort().slice(0, 5)
          : [itemKey(items[2]!)]
        const found = { differences: edit.differences ?? 1, examples, repaired: false }
        assert.deepEqual(await s.verify!(snap, 'report'), found)
        assert.deepEqual(await s.verify!(snap, 'repair'), { ...found, repaired: true })
        await assertHolds(inv, snap)
        assert.deepEqual(await s.verify!(snap, 'report'), { differences: 0, examples: [], repaired: false })
      })
    }

    test('a write after a drift report is not skipped: it puts the rows back', async () => {
      const { inv, s, items, snap } = await exported(10)
      await byHand(inv, `UPDATE ${ITEMS} SET attributes = jsonb_set(attributes, '{replicas}', '77') WHERE ${INV_WHERE} AND uid = $4`, items[3])
      // Without a drift check the write trusts the hash column, which the edit left alone.
      assert.deepEqual(await s.write(snap), { added: 0, changed: 0, removed: 0 })
      assert.equal((await s.verify!(snap, 'report')).differences, 1)
      assert.deepEqual(await s.write(snap), { added: 0, changed: 1, removed: 0 })
      const restored = await rows(inv)
      assert.deepEqual(restored.find((r) => r.uid === items[3]!.uid)?.attributes, items[3]!.attributes)
      assert.equal((await s.verify!(snap, 'report')).differences, 0)
    })

    test('no false positives: a fresh export of varied attribute types is in step', async () => {
      const inv = freshInventory()
      const s = sink()
      const varied: JsonObject[] = [
        { text: 'plain', empty: '', escapes: 'tab\tquote"backslash\\ line\nsep\u2028', unicode: 'café ✓ 日本語 עברית 🚀 e\u0301' },
        { int: 42, negative: -7, zero: 0, negativeZero: -0, large: 9007199254740991, beyondSafe: 2 ** 60, huge: 1e21, max: 1.7976931348623157e308 },
        { float: 0.1, third: 1 / 3, tiny: 5e-324, small: 1.5e-7, wholeFloat: 2.0, negativeFloat: -123.456 },
        { yes: true, no: false, nothing: null, emptyObject: {}, emptyList: [] },
        { nested: { b: { z: [1, { y: null, x: 'deep' }], a: 1 }, aa: [[], [[true]]], a: 'short key after long' } },
        { mixed: ['s', 1, 1.5, false, null, { k: 'v' }, ['x']], 'ключ': 'unicode key', 'a b.c/d': 'odd key' },
      ]
      const items = varied.map((attributes, i) => makeItem(i, { attributes }))
      const snap = snapshotOf(inv, items)
      await s.write(snap)
      const written = await dump(inv)
      assert.deepEqual(await s.verify!(snap, 'report'), { differences: 0, examples: [], repaired: false })
      assert.deepEqual(await s.verify!(snap, 'repair'), { differences: 0, examples: [], repaired: false })
      assert.deepEqual(await dump(inv), written, 'nothing rewritten')
      // jsonb did reformat: the stored text differs from the exported canonical JSON for some rows
      const stored = await pg.query<{ text: string }>(`SELECT attributes::text AS text FROM ${ITEMS} WHERE ${INV_WHERE}`, [CLUSTER, inv.namespace, inv.name])
      assert.ok(stored.some((r) => !items.some((i) => canonicalJson(i.attributes) === r.text)))
    })
  })

  test('helper fixtures are realistic and distinct', () => {
    const items: Item[] = makeItems(3)
    assert.equal(new Set(items.map(itemKey)).size, 3)
    assert.notEqual(itemHash(items[0]!), itemHash(bumpReplicas(items[0]!, 9)))
  })
})
