// The repository's address is set once, as package.json's repository.url; it is not published
// yet. The docs site derives its links from it; what cannot read package.json (the chart,
// SECURITY.md, the README's note) states it and is held to it here; no other file names it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { resolveConfig, type DefaultTheme } from 'vitepress'
import { parse } from 'yaml'
import { ROOT } from '../support/metacontroller.js'
import { repositoryUrl } from '../support/repository.js'

const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8')
const url = repositoryUrl()

test('package.json names the repository as https://github.com/<owner>/<name>, nothing appended', () => {
  assert.match(url, /^https:\/\/github\.com\/[\w.-]+\/[\w-]+$/)
})

test("the chart's home and sources are that address", () => {
  const chart = parse(read('charts/kollect/Chart.yaml')) as { home?: string; sources?: string[] }
  assert.equal(chart.home, url)
  assert.deepEqual(chart.sources, [url])
})

test('SECURITY.md reports through that repository, and the README and SECURITY.md say it is not published yet', () => {
  const security = read('SECURITY.md')
  assert.ok(security.includes(`<${url}/security/advisories/new>`), `SECURITY.md links ${url}/security/advisories/new`)
  assert.match(security, /not published yet/)
  const readme = read('README.md')
  assert.ok(readme.includes(url), `the README names ${url}`)
  assert.match(readme, /Not published yet/)
})

test("the docs site's edit links and GitHub icon derive from it", async () => {
  const site = await resolveConfig(path.join(ROOT, 'docs'), 'build', 'production')
  const theme = site.site.themeConfig as DefaultTheme.Config
  assert.equal(theme.editLink?.pattern, `${url}/edit/main/docs/:path`)
  assert.deepEqual(theme.socialLinks?.map((l) => l.link), [url])
})

test('no other file names the address: the rest derive it', () => {
  const address = url.replace(/^https:\/\//, '')
  const grep = ['grep', '--untracked', '-l', '-F', address, '--', '.']
  const named = execFileSync('git', grep, { cwd: ROOT, encoding: 'utf8' })
  const expected = ['README.md', 'SECURITY.md', 'charts/kollect/Chart.yaml', 'package.json']
  assert.deepEqual(named.split('\n').filter(Boolean).sort(), expected)
})
