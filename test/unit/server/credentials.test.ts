import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import type { KollectSinkSpec, ResolvedSink } from '../../../api/types.js'
import { envCredentials, secretEnvName, secretLocation, secretRefusal, type ScopeList } from '../../../server/cluster/credentials.js'
import { SinkError } from '../../../sinks/sink.js'

// The exporter's own decision about a sink's Secret, pure: where it is, whether the scopes of the
// sink's namespace allow it, and the local-mode variable names. Cluster mode's two API calls
// (server/cluster/credentials.ts kubeReads) need a real API server and are not exercised here.

function sink(namespace: string, secretRef: KollectSinkSpec['secretRef'], name = 'git'): ResolvedSink {
  return { namespace, name, spec: { type: 'git', git: { url: 'https://git.example.com/inv.git' }, ...(secretRef ? { secretRef } : {}) } }
}

async function rejection(p: Promise<unknown>): Promise<SinkError> {
  const err = await p.then(() => null, (e: unknown) => e)
  assert.ok(err instanceof SinkError, `expected a SinkError, got ${String(err)}`)
  return err
}

describe('secretLocation', () => {
  const cases: { reason: string; sink: ResolvedSink; want: ReturnType<typeof secretLocation> }[] = [
    { reason: 'no secretRef: nothing to read', sink: sink('team-a', undefined), want: null },
    { reason: 'no namespace: the sink\'s own', sink: sink('team-a', { name: 'git-creds' }), want: { namespace: 'team-a', name: 'git-creds', foreign: false } },
    { reason: 'an empty namespace: the sink\'s own (as the hooks read it)',
      sink: sink('team-a', { name: 'git-creds', namespace: '' }), want: { namespace: 'team-a', name: 'git-creds', foreign: false } },
    { reason: 'the own namespace spelled out', sink: sink('team-a', { name: 'git-creds', namespace: 'team-a' }), want: { namespace: 'team-a', name: 'git-creds', foreign: false } },
    { reason: 'another namespace is foreign', sink: sink('team-a', { name: 'git-creds', namespace: 'team-b' }), want: { namespace: 'team-b', name: 'git-creds', foreign: true } },
    { reason: '"../team-a" is another namespace, not the own one',
      sink: sink('team-a', { name: 'git-creds', namespace: '../team-a' }), want: { namespace: '../team-a', name: 'git-creds', foreign: true } },
  ]
  for (const c of cases) test(c.reason, () => assert.deepStrictEqual(secretLocation(c.sink), c.want))
})

describe('secretRefusal (cluster mode decides with the scopes it listed itself)', () => {
  const FOREIGN = sink('team-a', { name: 'git-creds', namespace: 'team-b' })
  const GRANT: ScopeList = [{ name: 'creds', spec: { allowedSecrets: [{ namespace: 'team-b', name: 'git-creds' }] } }]
  const cases: { reason: string; sink: ResolvedSink; scopes: ScopeList; refused: string | null }[] = [
    { reason: 'an own-namespace Secret needs no scope', sink: sink('team-a', { name: 'git-creds' }), scopes: [], refused: null },
    { reason: 'a foreign Secret without a scope is refused',
      sink: FOREIGN, scopes: [],
      refused: 'ScopeSecretDenied: Secret team-b/git-creds of KollectSink team-a/git is not allowed by the scope of namespace team-a (no KollectScope: own namespace only)' },
    { reason: 'a foreign Secret every scope lists is allowed', sink: FOREIGN, scopes: GRANT, refused: null },
    { reason: 'a foreign Secret one of two scopes lists is refused',
      sink: FOREIGN, scopes: [...GRANT, { name: 'plain', spec: {} }],
      refused: 'ScopeSecretDenied: Secret team-b/git-creds of KollectSink team-a/git is not allowed by the scope of namespace team-a (KollectScope creds, plain)' },
    { reason: 'allowedSinks is no grant for a Secret',
      sink: FOREIGN, scopes: [{ name: 's', spec: { allowedSinks: [{ namespace: 'team-b', name: 'git-creds' }] } }],
      refused: 'ScopeSecretDenied: Secret team-b/git-creds of KollectSink team-a/git is not allowed by the scope of namespace team-a (KollectScope s)' },
  ]
  for (const c of cases) {
    test(c.reason, () => {
      const err = secretRefusal(c.sink, c.scopes)
      assert.equal(err?.message ?? null, c.refused)
      if (err) assert.equal(err.retriable, false, 'a refusal is permanent until a scope or the sink changes')
    })
  }
})

describe('secretEnvName', () => {
  test('namespace, name and key, upper-cased, "-" and "." as "_", joined by "__"', () => {
    assert.equal(secretEnvName('team-a', 'pg-creds', 'dsn'), 'KOLLECT_SECRET_TEAM_A__PG_CREDS__DSN')
    assert.equal(secretEnvName('team-a', 'db.creds', 'DATABASE_URL'), 'KOLLECT_SECRET_TEAM_A__DB_CREDS__DATABASE_URL')
    assert.equal(secretEnvName('team-a', 'git-creds', ''), 'KOLLECT_SECRET_TEAM_A__GIT_CREDS__')
  })

  test('team/a-git-creds and team-a/git-creds get different variables', () => {
    assert.notEqual(secretEnvName('team', 'a-git-creds', 'token'), secretEnvName('team-a', 'git-creds', 'token'))
  })

  test('a namespace or name that would make the variable ambiguous is refused, permanently, naming it', () => {
    const cases: [namespace: string, name: string, refused: string][] = [
      ['a--b', 'x', 'namespace "a--b"'], ['team', 'a--b', 'name "a--b"'], ['team', 'a.-b', 'name "a.-b"'], ['team', 'a-.b', 'name "a-.b"'],
      ['team', 'a..b', 'name "a..b"'], ['Team', 'x', 'namespace "Team"'], ['team', 'a_b', 'name "a_b"'], ['', 'x', 'namespace ""'],
      ['team', '', 'name ""'], ['-team', 'x', 'namespace "-team"'], ['team', 'x.', 'name "x."'],
    ]
    for (const [ns, name, refused] of cases) {
      assert.throws(() => secretEnvName(ns, name, 'token'),
        (err: unknown) => err instanceof SinkError && !err.retriable && err.message.startsWith(`Secret ${refused} has no unambiguous environment variable`), `${ns}/${name}`)
    }
  })
})

describe('envCredentials (local mode)', () => {
  const ENV = {
    KOLLECT_SECRET_TEAM_A__GIT_CREDS__TOKEN: 'team-a-token',
    KOLLECT_SECRET_TEAM_A__GIT_CREDS__USERNAME: 'bot',
    KOLLECT_SECRET_TEAM_B__GIT_CREDS__TOKEN: 'team-b-token',
    KOLLECT_SECRET_TEAM_A__PG__DATABASE_URL: 'postgres://u:p@db/x',
  }
  const read = envCredentials(ENV)

  test('a sink reads the keys of its own namespace\'s Secret, and only those', async () => {
    assert.deepStrictEqual(await read(sink('team-a', { name: 'git-creds' })), { token: 'team-a-token', username: 'bot' })
    assert.deepStrictEqual(await read(sink('team-b', { name: 'git-creds', namespace: 'team-b' })), { token: 'team-b-token' })
    assert.deepStrictEqual(await read(sink('team-a', { name: 'pg' })), { database_url: 'postgres://u:p@db/x', DATABASE_URL: 'postgres://u:p@db/x' })
    assert.deepStrictEqual(await read(sink('team-a', undefined)), {})
  })

  test('another namespace\'s Secret is refused even though its variables are set, permanently and without its data', async () => {
    const err = await rejection(read(sink('team-a', { name: 'git-creds', namespace: 'team-b' })))
    assert.equal(err.retriable, false)
    assert.equal(err.message, 'ScopeSecretDenied: Secret team-b/git-creds of KollectSink team-a/git is in another namespace; ' +
      'without a cluster (credentials from environment variables) a sink may use only Secrets of its own namespace')
    assert.ok(!err.message.includes('team-b-token'))
  })

  test('no variables for the Secret: a retriable error naming the prefix to set', async () => {
    const err = await rejection(read(sink('team', { name: 'a-git-creds' })))
    assert.equal(err.message, 'Secret team/a-git-creds: no KOLLECT_SECRET_TEAM__A_GIT_CREDS__* environment variables are set')
    assert.equal(err.retriable, true)
  })

  test('a name with "--" is refused before any variable is looked at', async () => {
    const err = await rejection(envCredentials({ KOLLECT_SECRET_TEAM__A__B__TOKEN: 'x' })(sink('team', { name: 'a--b' })))
    assert.equal(err.retriable, false)
    assert.match(err.message, /^Secret name "a--b" has no unambiguous environment variable/)
  })
})
