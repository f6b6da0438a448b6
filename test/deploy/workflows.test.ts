// The GitHub workflows cannot run here, so they are checked as far as a machine can: actionlint
// (expressions, contexts, action inputs, job graph; shellcheck over `run:` scripts when a
// shellcheck is on PATH, which this machine lacks, so that part is skipped by actionlint itself),
// the release contract read from the YAML, pinned actions, and the changelog script run on a
// real git repository.
//
// actionlint: $ACTIONLINT, else the pinned build in the tools cache
// (scripts/install-actionlint.sh --print-paths). No actionlint is a failure, not a skip.
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseDocs, readRepoFile, repoRoot } from './k8s.js'
import { requireTool } from '../support/tools.js'

const WORKFLOWS = join(repoRoot, '.github', 'workflows')
const CHANGELOG_SCRIPT = join(repoRoot, '.github', 'scripts', 'changelog.sh')

interface Step { uses?: string; run?: string; with?: Record<string, unknown> }
interface Job { permissions?: Record<string, string>; needs?: string | string[]; steps: Step[] }
interface Workflow { on: Record<string, unknown>; permissions?: unknown; jobs: Record<string, Job> }

function workflow(file: string): Workflow {
  return parseDocs(readRepoFile(`.github/workflows/${file}`), file)[0] as Workflow
}

function actionlint(cwd: string, ...args: string[]): { status: number | null; out: string } {
  const r = spawnSync(requireTool('install-actionlint.sh', 'ACTIONLINT'), ['-no-color', '-oneline', ...args], { cwd, encoding: 'utf8', timeout: 60_000 })
  return { status: r.status, out: `${r.stdout}${r.stderr}` }
}

describe('actionlint', () => {
  test('finds nothing in .github/workflows', () => {
    const files = readdirSync(WORKFLOWS).filter((f) => /\.ya?ml$/.test(f))
    assert.deepEqual(files.sort(), ['ci.yml', 'release.yml'])
    const r = actionlint(repoRoot)
    assert.equal(r.out, '', 'actionlint findings')
    assert.equal(r.status, 0)
  })

  test('fails on a workflow with a finding, so the check above can fail', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kollect-actionlint-'))
    try {
      mkdirSync(join(dir, '.github', 'workflows'), { recursive: true })
      writeFileSync(join(dir, '.github', 'workflows', 'bad.yml'),
        'on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo "${{ github.no_such_property }}"\n')
      const r = actionlint(dir, join('.github', 'workflows', 'bad.yml'))
      assert.equal(r.status, 1, r.out)
      assert.match(r.out, /bad\.yml:6:\d+: property "no_such_property" is not defined/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('workflows', () => {
  test('every action is pinned to a full commit, with the release it is in a comment', () => {
    for (const file of readdirSync(WORKFLOWS)) {
      for (const line of readFileSync(join(WORKFLOWS, file), 'utf8').split('\n')) {
        const m = /^\s*(?:- )?uses:\s*(\S+)(.*)$/.exec(line)
        if (!m) continue
        const [, action = '', comment = ''] = m
        assert.match(action, /^[\w.-]+\/[\w.-]+@[0-9a-f]{40}$/, `${file}: ${action} is not pinned by commit`)
        assert.match(comment, /^ # v\d+\.\d+\.\d+$/, `${file}: ${action} names no release`)
      }
    }
  })

  test('CI runs .ci/run on pushes and pull requests, reading the repository only', () => {
    const ci = workflow('ci.yml')
    assert.ok('push' in ci.on && 'pull_request' in ci.on)
    assert.deepEqual(ci.permissions, { contents: 'read' })
    const runs = Object.values(ci.jobs).flatMap((j) => j.steps).map((s) => s.run).filter(Boolean)
    assert.deepEqual(runs, ['bash .ci/run'])
  })

  test('a v* tag publishes a two-architecture image, the chart as an OCI artifact, and a release', () => {
    const rel = workflow('release.yml')
    assert.deepEqual(Object.keys(rel.on), ['push'])
    assert.deepEqual(rel.on.push, { tags: ['v*'] })
    // Nothing by default; each job asks for what it needs.
    assert.deepEqual(rel.permissions, {})
    const job = (name: string): Job => {
      const j = rel.jobs[name]
      assert.ok(j, `no job ${name}`)
      return j
    }
    const [image, chart, release] = [job('image'), job('chart'), job('release')]
    assert.deepEqual(image.permissions, { contents: 'read', packages: 'write' })
    assert.deepEqual(chart.permissions, { contents: 'read', packages: 'write' })
    assert.deepEqual(release.permissions, { contents: 'write', 'pull-requests': 'write' })
    assert.deepEqual(release.needs, ['image', 'chart'])

    const build = image.steps.find((s) => s.uses?.startsWith('docker/build-push-action@'))
    assert.ok(build?.with)
    assert.equal(build.with.platforms, 'linux/amd64,linux/arm64')
    assert.equal(build.with.file, 'Dockerfile')
    assert.equal(build.with.push, true)
    for (const action of ['docker/setup-qemu-action@', 'docker/setup-buildx-action@', 'docker/login-action@']) {
      assert.ok(image.steps.some((s) => s.uses?.startsWith(action)), action)
    }

    const helm = chart.steps.map((s) => s.run ?? '').join('\n')
    // The packaged chart's default image is the one published beside it: the substitution
    // must find values.yaml's one image repository line.
    assert.match(helm, /sed -i "s\|\^ {2}repository: \\"\\"\\\$\| {2}repository: \$image\|" charts\/kollect\/values\.yaml/)
    assert.equal(readRepoFile('charts/kollect/values.yaml').match(/^ {2}repository: ""$/gm)?.length, 1)
    assert.match(helm, /helm package charts\/kollect --version "\$version" --app-version "\$version"/)
    assert.match(helm, /helm push "dist-chart\/kollect-\$version\.tgz" "oci:\/\/ghcr\.io\/\$\{OWNER,,\}\/charts"/)
    // The helm the tests are run with.
    const setupHelm = chart.steps.find((s) => s.uses?.startsWith('azure/setup-helm@'))
    assert.match(readRepoFile('scripts/install-helm.sh'), new RegExp(`^HELM_VERSION=${String(setupHelm?.with?.version)}$`, 'm'))

    const notes = release.steps.map((s) => s.run ?? '').join('\n')
    assert.match(notes, /changelog\.sh "\$TAG" >release-notes\.md/)
    assert.match(notes, /gh release create "\$TAG" --verify-tag .*--notes-file release-notes\.md/)
  })
})

describe('changelog.sh', () => {
  let repo = ''
  const git = (...args: string[]): string => {
    const r = spawnSync('git', args, { cwd: repo, encoding: 'utf8' })
    assert.equal(r.status, 0, r.stderr)
    return r.stdout.trim()
  }
  const changelog = (...args: string[]): { status: number | null; stdout: string; stderr: string } =>
    spawnSync('bash', [CHANGELOG_SCRIPT, ...args], { cwd: repo, encoding: 'utf8' })
  const commit = (subject: string, date: string): void => {
    const r = spawnSync('git', ['commit', '-q', '--allow-empty', '-m', subject],
      { cwd: repo, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date } })
    assert.equal(r.status, 0, r.stderr)
  }

  before(() => {
    repo = mkdtempSync(join(tmpdir(), 'kollect-changelog-'))
    git('init', '-q', '-b', 'main')
    git('config', 'user.email', 'test@kollect.invalid')
    git('config', 'user.name', 'test')
    commit('First sink', '2026-01-02T10:00:00Z')
    git('tag', 'v0.1.0')
    commit('Add the S3 sink', '2026-02-03T10:00:00Z')
    git('merge', '--no-ff', '-q', '-m', 'Merge branch s3', 'HEAD')
    git('tag', 'not-a-release')
    commit('Fix the Kafka fencing regex', '2026-02-04T10:00:00Z')
    git('tag', 'v0.2.0')
    writeFileSync(join(repo, 'CHANGELOG.md'), '# Changelog\n\n## [Unreleased]\n\n- Work in progress.\n')
  })
  after(() => rmSync(repo, { recursive: true, force: true }))

  test('a tag lists its commits since the previous v* tag, dated by the tagged commit', () => {
    const hash = (rev: string): string => git('rev-parse', '--short', rev)
    const r = changelog('v0.2.0')
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, [
      '## [0.2.0] - 2026-02-04', '', 'Changes since v0.1.0:', '',
      `- Fix the Kafka fencing regex (${hash('v0.2.0')})`,
      `- Add the S3 sink (${hash('v0.2.0~1')})`, '',
    ].join('\n'))
    const first = changelog('v0.1.0')
    assert.equal(first.stdout, `## [0.1.0] - 2026-01-02\n\nFirst release.\n\n- First sink (${hash('v0.1.0')})\n`)
  })

  test('--insert puts each release under Unreleased, newest first, once', () => {
    for (const tag of ['v0.1.0', 'v0.2.0', 'v0.2.0']) assert.equal(changelog(tag, '--insert', 'CHANGELOG.md').status, 0)
    const text = readFileSync(join(repo, 'CHANGELOG.md'), 'utf8')
    const headings = text.split('\n').filter((l) => l.startsWith('## '))
    assert.deepEqual(headings, ['## [Unreleased]', '## [0.2.0] - 2026-02-04', '## [0.1.0] - 2026-01-02'])
    assert.match(text, /- Work in progress\.\n\n## \[0\.2\.0\]/)
  })

  test('refuses a tag that does not exist', () => {
    const r = changelog('v9.9.9')
    assert.equal(r.status, 1)
    assert.match(r.stderr, /no tag v9\.9\.9/)
  })
})
