import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseAllDocuments } from 'yaml'
import { ROOT } from '../support/metacontroller.js'

// Traps a newcomer met on a fresh clone (issue 14): each stays gone.

function trackedFiles(): string[] {
  const r = spawnSync('git', ['-C', ROOT, 'ls-files', '-z'], { encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  return r.stdout.split('\0').filter((f) => f !== '')
}

test('no doc, chart note or script passes a list to --set unquoted (bash brace-expands name={a,b})', () => {
  // Outside test/: the tests hand helm its arguments without a shell.
  const files = trackedFiles().filter((f) => /\.(md|txt|ya?ml|sh|tpl)$/.test(f) && !f.startsWith('test/'))
  assert.ok(files.includes('README.md') && files.includes('charts/kollect/templates/NOTES.txt'), 'the scan sees the docs')
  const unquoted = /(^|[^'"\w.-])[\w.-]+=\{[^}\s]*,[^}\s]*\}/
  const found: string[] = []
  let quoted = 0
  for (const file of files) {
    readFileSync(path.join(ROOT, file), 'utf8').split('\n').forEach((line, i) => {
      if (unquoted.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`)
      if (line.includes(`'watchNamespaces={team-a,team-b}'`)) quoted++
    })
  }
  assert.deepEqual(found, [], 'quote it: --set \'watchNamespaces={team-a,team-b}\'')
  assert.ok(quoted >= 2, 'the README and the chart show the quoted form')
  assert.equal(unquoted.test("--set watchNamespaces={team-a,team-b}"), true, 'the pattern finds the trap')
})

interface Resource {
  kind?: string
  metadata?: { name?: string; namespace?: string }
}

/** Every resource a kustomization applies, following directory entries (no kubectl needed). */
function kustomize(dir: string): Resource[] {
  const k = parseAllDocuments(readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8'))[0]!.toJS() as { resources: string[] }
  return k.resources.flatMap((entry) => {
    const file = path.join(dir, entry)
    if (!/\.ya?ml$/.test(entry)) return kustomize(file)
    return parseAllDocuments(readFileSync(file, 'utf8')).map((d) => d.toJS() as Resource)
  })
}

test('kubectl apply -k examples/quickstart creates every namespace its resources use', () => {
  const resources = kustomize(path.join(ROOT, 'examples', 'quickstart'))
  const created = new Set(resources.filter((r) => r.kind === 'Namespace').map((r) => r.metadata?.name))
  const used = new Set(resources.map((r) => r.metadata?.namespace).filter((n) => n !== undefined))
  assert.ok(used.has('team-a') && resources.some((r) => r.kind === 'KollectInventory'), 'it applies the examples in team-a')
  for (const ns of used) assert.ok(created.has(ns), `namespace ${ns} is used but not created`)
  // And every example CR is in it: the quick start is examples/crs plus its namespace and workloads.
  const workloads = resources.filter((r) => r.kind === 'Deployment')
  assert.equal(resources.length, kustomize(path.join(ROOT, 'examples', 'crs')).length + created.size + workloads.length)
  // Only sinks that need no server and no Secret: the first `kubectl get kollect` shows them Ready.
  assert.deepEqual(resources.filter((r) => r.kind === 'KollectSink').map((r) => r.metadata?.name), ['git-demo'])
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  assert.match(readme, /^kubectl apply -k examples\/quickstart$/m)
})

test('the quick start\'s first inventory exports its sample workloads: kollect preview selects web and checkout', () => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'dist', 'cli', 'main.js'), 'preview', '--output', 'json',
    '--profile', 'examples/crs/profile-deployments.yaml', '--target', 'examples/crs/target-deployments.yaml',
    '--objects', 'examples/quickstart/workloads.yaml'], { cwd: ROOT, encoding: 'utf8' })
  assert.equal(r.status, 0, r.stderr)
  const items = JSON.parse(r.stdout) as { name: string; attributes: Record<string, unknown> }[]
  assert.deepEqual(items.map((i) => i.name).sort(), ['checkout', 'web'])
  assert.deepEqual(items.find((i) => i.name === 'web')?.attributes['images'], ['registry.k8s.io/pause:3.10'])
  // tmp-canary is left out by the matchPolicy, worker by the label selector, and the summary says so.
  assert.match(r.stderr, /^not selected: 2 \(labels do not match labelSelector: 1, matchPolicy is false: 1\)$/m)
})

/** A fake tool: an executable that does nothing. */
function fake(file: string): string {
  mkdirSync(path.dirname(file), { recursive: true })
  writeFileSync(file, '#!/bin/sh\n')
  chmodSync(file, 0o755)
  return file
}

/** install-deps.sh --check with only `env` (PATH holds no tool: nothing is found by accident). */
function check(env: Record<string, string>) {
  const r = spawnSync('/bin/bash', [path.join(ROOT, 'scripts', 'install-deps.sh'), '--check'], { encoding: 'utf8', env: { PATH: '/nonexistent', ...env } })
  const would = /^would install: (.*)$/m.exec(r.stdout)?.[1]
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, would: would === undefined ? undefined : would.split(' ') }
}

test('install-deps.sh installs nothing an environment variable already points at, and refuses one that points at nothing', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-deps-'))
  try {
    const pgBin = path.join(dir, 'pg')
    for (const tool of ['initdb', 'pg_ctl', 'postgres']) fake(path.join(pgBin, tool))
    mkdirSync(path.join(dir, 'kafka-lib'))
    mkdirSync(path.join(dir, 'gitea-src'))
    const prebuilt: Record<string, string> = {
      PG_BIN: pgBin,
      NATS_SERVER: fake(path.join(dir, 'bin', 'nats-server')),
      JAVA: fake(path.join(dir, 'bin', 'java')),
      CHROMIUM: fake(path.join(dir, 'bin', 'chromium')),
      KOLLECT_KAFKA_LIB: path.join(dir, 'kafka-lib'),
      HELM: fake(path.join(dir, 'bin', 'helm')),
      KOLLECT_KUBE_APISERVER: fake(path.join(dir, 'bin', 'kube-apiserver')),
      KOLLECT_ETCD: fake(path.join(dir, 'bin', 'etcd')),
      VERSITYGW: fake(path.join(dir, 'bin', 'versitygw')),
      ACTIONLINT: fake(path.join(dir, 'bin', 'actionlint')),
      PROMTOOL: fake(path.join(dir, 'bin', 'promtool')),
      GITEA: fake(path.join(dir, 'bin', 'gitea')),
      GITEA_STATIC_ROOT: path.join(dir, 'gitea-src'),
    }

    const none = check({ PG_BIN: pgBin })
    assert.equal(none.status, 0, none.stderr)
    for (const pkg of ['git', 'nats-server', 'openjdk-17-jre-headless', 'maven', 'openssl', 'chromium', 'golang-go']) assert.ok(none.would?.includes(pkg), `${pkg}: ${none.stdout}`)

    const all = check(prebuilt)
    assert.equal(all.status, 0, all.stderr)
    // Only what no variable stands for; each variable is reported as used.
    assert.deepEqual(all.would, ['git', 'openssl'], all.stdout)
    for (const [name, value] of Object.entries(prebuilt)) assert.ok(all.stdout.includes(`using ${name}=${value}\n`), `${name}: ${all.stdout}`)

    // Go builds any Go tool not given: all but one still need it.
    const { VERSITYGW: _versitygw, ...allButOne } = prebuilt
    assert.ok(check(allButOne).would?.includes('golang-go'))
    // A Gitea binary without its static root still needs Go to fetch the source.
    const { GITEA_STATIC_ROOT: _root, ...noStaticRoot } = prebuilt
    assert.ok(check(noStaticRoot).would?.includes('golang-go'))

    const badVariables = [
      ['PG_BIN', dir], ['NATS_SERVER', path.join(dir, 'missing')], ['KOLLECT_KAFKA_LIB', path.join(dir, 'missing')],
      ['HELM', path.join(dir, 'kafka-lib')], ['KOLLECT_ETCD', path.join(dir, 'missing')],
    ] as const
    for (const [name, value] of badVariables) {
      const r = check({ ...prebuilt, [name]: value })
      assert.equal(r.status, 1, `${name}=${value}: ${r.stdout}`)
      assert.match(r.stderr, new RegExp(`install-deps: ${name}=${value.replaceAll('/', '\\/')}: `), name)
      assert.equal(r.would, undefined, 'nothing is installed after a bad variable')
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('npm ci has no install script left unreviewed: allowScripts names each package that has one', () => {
  const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { hasInstallScript?: boolean }> }
  const withScripts = Object.entries(lock.packages).filter(([, p]) => p.hasInstallScript).map(([at]) => at.replace(/^.*node_modules\//, '')).sort()
  assert.ok(withScripts.includes('node'), 'the pinned Node 24 comes from an install script')
  const { allowScripts } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { allowScripts: Record<string, boolean> }
  // npm warns "install scripts not yet covered by allowScripts" for any other: approve or deny it.
  assert.deepEqual(Object.keys(allowScripts).sort(), withScripts)
  assert.equal(allowScripts['node'], true)
})

test('npm start builds only when a source changed, and says which it does', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-build-'))
  try {
    mkdirSync(path.join(dir, 'src'))
    writeFileSync(path.join(dir, 'src', 'a.ts'), 'export const a = 1\n')
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ include: ['src'] }))
    // A stand-in for tsc that counts its runs and writes the build info, as tsc --incremental does.
    const build = "const fs = require('fs'); fs.mkdirSync('dist', { recursive: true }); fs.writeFileSync('dist/.tsbuildinfo', '{}'); fs.appendFileSync('builds', 'x')"
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'b', scripts: { build: `node -e "${build}"` } }))
    const run = () => spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'build-if-changed.mjs')], { cwd: dir, encoding: 'utf8' })
    const builds = () => readFileSync(path.join(dir, 'builds'), 'utf8').length

    let r = run()
    assert.equal(r.status, 0, r.stderr)
    assert.match(r.stderr, /compiling the TypeScript sources into dist\/ \(a first build takes about a minute/)
    assert.match(r.stderr, /built in \d+\.\d s/)
    assert.equal(builds(), 1)

    r = run()
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stderr, 'kollect: dist/ is up to date with the sources; not building\n')
    assert.equal(builds(), 1, 'nothing changed: no build')

    const later = new Date(Date.now() + 5_000)
    utimesSync(path.join(dir, 'src', 'a.ts'), later, later)
    r = run()
    assert.match(r.stderr, /^kollect: 1 source file changed since the last build; compiling into dist\/$/m)
    assert.equal(builds(), 2)

    // A failing build stops the start with tsc's exit status.
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'b', scripts: { build: 'exit 3' } }))
    r = run()
    assert.equal(r.status, 3)
    assert.match(r.stderr, /the build failed \(exit 3\)/)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
