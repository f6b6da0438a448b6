// A sink behind a private CA (issue 27): the chart's extraCACerts mounts the CA bundle from a
// Secret and sets NODE_EXTRA_CA_CERTS (Node's TLS: pg, NATS, Kafka, the AWS SDK, fetch) and
// GIT_SSL_CAINFO (git, which reads no Node setting) for the exporter and the hub. Debian's git
// (the image's, and this machine's) uses libcurl-gnutls with the CA path /etc/ssl/certs and no CA
// file, so GIT_SSL_CAINFO adds to the system's CAs; GIT_SSL_CAPATH would replace them. A DSN's
// sslrootcert stays refused: the guard does not let a sink's settings name a local file.
//
// Against a real PostgreSQL with ssl=on and a server certificate of a CA made here, and a git
// smart-HTTP server (git http-backend) over https with a certificate of the same CA: a write from
// a process started with the CA trusted succeeds with full verification, and without it fails
// with a certificate error.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import https from 'node:https'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { checkResolvedEndpoint } from '../../server/guards/ssrf.js'
import { createSinkFactory } from '../../sinks/registry.js'
import { createBareRemote, git } from '../support/git.js'
import { ROOT } from '../support/metacontroller.js'
import { startPostgres, type PgServer } from '../support/postgres.js'
import { makePrivateCa, type PrivateCa } from '../support/private-ca.js'

const CHILD = path.join(ROOT, 'dist', 'test', 'support', 'sink-write-child.js')

/**
 * A sink write from a process of its own, with exactly these extra variables in its environment.
 * Asynchronous: the git server answering it runs in this process.
 */
async function writeFromChild(spec: unknown, credentials: Record<string, string>, env: Record<string, string>): Promise<{ ok: boolean; message?: string }> {
  const base = { ...process.env }
  for (const k of ['NODE_EXTRA_CA_CERTS', 'GIT_SSL_CAPATH', 'GIT_SSL_CAINFO', 'SSL_CERT_FILE', 'SSL_CERT_DIR']) delete base[k]
  const child = spawn(process.execPath, [CHILD, JSON.stringify(spec), JSON.stringify(credentials)], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (b: Buffer) => { stdout += b.toString() })
  child.stderr.on('data', (b: Buffer) => { stderr += b.toString() })
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  assert.equal(code, 0, `the child failed:\n${stderr}`)
  return JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as { ok: boolean; message?: string }
}

const CERTIFICATE_ERROR = /self[- ]signed certificate|unable to (get local issuer|verify)|certificate verif/i

let ca: PrivateCa
before(() => { ca = makePrivateCa() })
after(() => ca?.remove())

describe('PostgreSQL behind a private CA', () => {
  let pg: PgServer
  before(async () => { pg = await startPostgres({ tls: { certFile: ca.serverCert, keyFile: ca.serverKey } }) })
  after(async () => { await pg?.destroy() })
  const spec = { type: 'postgres', postgres: { table: 'kollect_items' } }
  const dsn = () => `postgres://${pg.user}:${pg.password}@127.0.0.1:${pg.port}/postgres?sslmode=verify-full`

  test('with NODE_EXTRA_CA_CERTS the write succeeds over TLS, the server verified', async () => {
    const out = await writeFromChild(spec, { dsn: dsn() }, { NODE_EXTRA_CA_CERTS: ca.caCert })
    assert.equal(out.ok, true, out.message)
    const rows = await pg.query<{ n: number }>('SELECT count(*)::int AS n FROM kollect_items WHERE inventory_name = $1', ['inv'])
    assert.equal(rows[0]?.n, 3)
  })

  test('the mounted Secret\'s file as the chart mounts it (ca.crt through ..data) works the same', async () => {
    const out = await writeFromChild(spec, { dsn: dsn() }, { NODE_EXTRA_CA_CERTS: path.join(ca.secretDir, 'ca.crt') })
    assert.equal(out.ok, true, out.message)
  })

  test('without it the same write fails with a certificate error', async () => {
    const out = await writeFromChild(spec, { dsn: dsn() }, {})
    assert.equal(out.ok, false)
    assert.match(out.message ?? '', CERTIFICATE_ERROR)
  })

  test('a DSN naming sslrootcert is still refused before any connection', async () => {
    const create = createSinkFactory({
      dataDir: mkdtempSync(path.join(os.tmpdir(), 'kollect-ca-guard-')),
      credentials: async () => ({ dsn: `${dsn()}&sslrootcert=${ca.caCert}` }),
      checkEndpoint: (url) => checkResolvedEndpoint(url, false),
    })
    await assert.rejects(create({ namespace: 'team-a', name: 'db', spec: { type: 'postgres', secretRef: { name: 'db' } } }), /DSN parameter sslrootcert: local paths are not allowed/)
  })
})

/** git http-backend (smart HTTP, push allowed) behind an https server with the CA's certificate. */
async function gitOverHttps(projectRoot: string): Promise<{ port: number; close(): Promise<void> }> {
  const server = https.createServer({ key: readFileSync(ca.serverKey), cert: readFileSync(ca.serverCert) }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://127.0.0.1')
    const child = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH ?? '', HOME: projectRoot, GIT_CONFIG_NOSYSTEM: '1', GIT_PROJECT_ROOT: projectRoot, GIT_HTTP_EXPORT_ALL: '1',
        // A REMOTE_USER enables receive-pack (push).
        REMOTE_USER: 'kollect', REMOTE_ADDR: '127.0.0.1', REQUEST_METHOD: req.method ?? 'GET', PATH_INFO: url.pathname, QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers['content-type'] ?? '', HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
        ...(req.headers['content-length'] ? { CONTENT_LENGTH: req.headers['content-length'] } : {}),
        GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      },
    })
    req.pipe(child.stdin)
    const out: Buffer[] = []
    child.stdout.on('data', (b: Buffer) => out.push(b))
    child.on('close', () => {
      const all = Buffer.concat(out)
      const end = all.indexOf('\r\n\r\n')
      const head = all.subarray(0, end).toString('latin1').split('\r\n')
      const headers: Record<string, string> = {}
      let status = 200
      for (const line of head) {
        const i = line.indexOf(':')
        const [k, v] = [line.slice(0, i).trim(), line.slice(i + 1).trim()]
        if (k.toLowerCase() === 'status') status = Number(v.split(' ')[0])
        else if (k) headers[k] = v
      }
      res.writeHead(status, headers)
      res.end(all.subarray(end + 4))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { port: (server.address() as AddressInfo).port, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

describe('git over https behind a private CA', () => {
  let root = ''
  let remote: { port: number; close(): Promise<void> }
  before(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), 'kollect-ca-git-'))
    await createBareRemote(root, 'fleet.git')
    remote = await gitOverHttps(root)
  })
  after(async () => {
    await remote?.close()
    rmSync(root, { recursive: true, force: true })
  })
  const spec = () => ({ type: 'git', git: { url: `https://127.0.0.1:${remote.port}/fleet.git`, branch: 'main' } })

  test('with GIT_SSL_CAINFO on the mounted Secret\'s file the push succeeds, and git still reads the system\'s CAs', async () => {
    const caFile = path.join(ca.secretDir, 'ca.crt')
    const out = await writeFromChild(spec(), {}, { GIT_SSL_CAINFO: caFile, NODE_EXTRA_CA_CERTS: caFile })
    assert.equal(out.ok, true, out.message)
    assert.match(await git(path.join(root, 'fleet.git'), 'log', '--oneline', 'main'), /\S/)
    // The file is added to the system's CAs, not put in their place: public hosts stay trusted.
    const verbose = spawn('git', ['ls-remote', `https://127.0.0.1:${remote.port}/fleet.git`], {
      env: { PATH: process.env.PATH ?? '', HOME: root, GIT_CONFIG_NOSYSTEM: '1', GIT_SSL_CAINFO: caFile, GIT_CURL_VERBOSE: '1', GIT_TERMINAL_PROMPT: '0' },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let trace = ''
    verbose.stderr.on('data', (b: Buffer) => { trace += b.toString() })
    assert.equal(await new Promise((resolve) => verbose.on('close', resolve)), 0, trace)
    assert.ok(trace.includes(`found 1 certificates in ${caFile}`), trace)
    const system = /found (\d+) certificates in \/etc\/ssl\/certs\b/.exec(trace)
    assert.ok(system && Number(system[1]) > 10, `the system's CAs are read too:\n${trace}`)
  })

  test('without it the push fails with a certificate error (NODE_EXTRA_CA_CERTS alone is not read by git)', async () => {
    const out = await writeFromChild(spec(), {}, { NODE_EXTRA_CA_CERTS: ca.caCert })
    assert.equal(out.ok, false)
    assert.match(out.message ?? '', /server certificate verification failed|SSL certificate problem/)
  })
})
