import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { redact, secretsFromCredentials } from '../../sinks/errors.js'
import { forgeRequest } from '../../sinks/git/review/http.js'
import { ReviewError } from '../../sinks/git/review/provider.js'
import { startHooksServer, type HooksServer } from '../support/hooks-server.js'
import { deniedS3, exportTo, failingSink, hostilePeer, s3Sink, type HostilePeer } from './hostile-peer.js'

// Issue 24 F10: docs/security.md says redaction covers the encoded forms of a secret. An
// endpoint that echoes the base64 of a token (standard or URL-safe, padded or not, alone or as
// HTTP Basic's user:token) or its URL-encoded form must not get it into status or a log line.

const TOKEN = 'glpat-Zx9+Qw/7Rt_kL2mN8pVb'
const ACCESS_KEY = 'AKIAIOSFODNN7EXAMPLE'

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64')
const b64url = (text: string) => Buffer.from(text, 'utf8').toString('base64url')

/** Every form of `secret` an endpoint may echo, by name. */
function forms(secret: string, user: string): [string, string][] {
  return [
    ['base64', b64(secret)],
    ['base64 without padding', b64(secret).replace(/=+$/, '')],
    ['URL-safe base64', b64url(secret)],
    ['URL-safe base64 with padding', b64url(secret) + '='.repeat((4 - (b64url(secret).length % 4)) % 4)],
    ['base64 of x-access-token:secret (HTTP Basic)', b64(`x-access-token:${secret}`)],
    ['base64 of oauth2:secret (HTTP Basic)', b64(`oauth2:${secret}`)],
    [`base64 of ${user}:secret (HTTP Basic)`, b64(`${user}:${secret}`)],
    ['URL-safe base64 of user:secret', b64url(`${user}:${secret}`)],
    ['URL-encoded', encodeURIComponent(secret)],
  ]
}

/** The secret, or a third of it, decoded from any base64 run of the text at any alignment. */
function decodesToSecret(text: string, secret: string): boolean {
  const piece = secret.slice(0, Math.ceil(secret.length / 3))
  for (const run of text.match(/[A-Za-z0-9+/_-]{4,}/g) ?? []) {
    for (let skip = 0; skip < 4; skip++) {
      const normal = run.slice(skip).replace(/-/g, '+').replace(/_/g, '/')
      if (Buffer.from(normal, 'base64').toString('latin1').includes(piece)) return true
    }
  }
  return text.includes(piece) || text.includes(encodeURIComponent(piece))
}

describe('redact: encoded forms of a known secret', () => {
  const secrets = secretsFromCredentials({ username: 'kollect-bot', token: TOKEN })
  for (const [name, form] of forms(TOKEN, 'kollect-bot')) {
    test(`${name}, alone and inside other text, is scrubbed`, () => {
      for (const text of [form, `echo: ${form}`, `Authorization: Basic ${form}.`, `${form}${form}`]) {
        const out = redact(text, secrets)
        assert.ok(!out.includes(form), `${name} kept in ${out}`)
        assert.ok(!decodesToSecret(out, TOKEN), `${name}: ${out} still decodes to the token`)
      }
    })
  }

  test('text without the secret is left as it is', () => {
    const text = 'AccessDenied: aGVsbG8gd29ybGQ= is not a key; see https://forge.example/org/repo'
    assert.equal(redact(text, secrets), text)
  })
})

describe('through a real server: endpoints echoing the encoded secret', () => {
  let server: HooksServer
  let s3: HostilePeer
  const echoed = forms(TOKEN, ACCESS_KEY).map(([, f]) => f)
  before(async () => {
    s3 = await deniedS3(`signature for ${echoed.join(' and ')} does not match`)
    server = await startHooksServer({
      KOLLECT_SECRET_TEAM_A__ECHO_KEYS__ACCESSKEYID: ACCESS_KEY,
      KOLLECT_SECRET_TEAM_A__ECHO_KEYS__SECRETACCESSKEY: TOKEN,
    })
  })
  after(async () => {
    await server?.close()
    await s3?.close()
  })

  test('an S3 endpoint: the sink status names the refusal and none of the forms', async () => {
    await exportTo(server, 'team-a', 'echo-inv', s3Sink('team-a', 'echo', s3.url))
    const message = (await failingSink(server, 'team-a', 'echo-inv')).message ?? ''
    assert.match(message, /AccessDenied \(HTTP 403\): signature for /)
    for (const form of echoed) assert.ok(!message.includes(form), `${form} in ${message}`)
    assert.ok(!decodesToSecret(message, TOKEN), message)
  })

  test('a forge: the review error names the status and none of the forms', async () => {
    const forge = await hostilePeer((_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ message: `bad credentials ${forms(TOKEN, 'kollect-bot').map(([, f]) => f).join(', ')}` }))
    })
    try {
      const endpoint = { apiUrl: `${forge.url}/api/v1`, project: 'org/repo', token: TOKEN, checkEndpoint: async () => null, timeoutMs: 5000 }
      const err = await forgeRequest(endpoint, { method: 'GET', path: '/repos/org/repo' }).then(() => undefined, (e: unknown) => e)
      assert.ok(err instanceof ReviewError, String(err))
      assert.match(err.message, /^GET \/repos\/org\/repo: answered 401: bad credentials /)
      assert.ok(!decodesToSecret(err.message, TOKEN), err.message)
    } finally {
      await forge.close()
    }
  })
})
