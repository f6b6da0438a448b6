import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { createMarkdownRenderer, resolveConfig, type DefaultTheme } from 'vitepress'
import { ROOT } from '../support/metacontroller.js'
import { repositoryUrl } from '../support/repository.js'

// The documentation site's config, as VitePress resolves it (no build: CI's docs:build does that).
// Every page in docs/ is reachable from the sidebar, so a new page is never orphaned.

const docsDir = path.join(ROOT, 'docs')

function links(items: DefaultTheme.SidebarItem[]): string[] {
  return items.flatMap((i) => [...(i.link ? [i.link] : []), ...links(i.items ?? [])])
}

function markdownFiles(dir: string): string[] {
  if (!existsSync(path.join(docsDir, dir))) return []
  return readdirSync(path.join(docsDir, dir)).filter((f) => f.endsWith('.md')).map((f) => (dir ? `${dir}/${f}` : f))
}

test('the site sidebar links every docs/*.md and docs/adr/*.md page, and only pages that exist', async () => {
  const site = await resolveConfig(docsDir, 'build', 'production')
  const sidebar = (site.site.themeConfig as DefaultTheme.Config).sidebar as DefaultTheme.SidebarItem[]
  const linked = links(sidebar)
  const served = (file: string): string => site.rewrites.map[file] ?? file
  const link = (file: string): string => '/' + served(file).replace(/(^|\/)index\.md$/, '$1').replace(/\.md$/, '')

  const pages = [...markdownFiles(''), ...markdownFiles('adr')].filter((f) => f !== 'index.md')
  assert.ok(pages.includes('walkthrough.md') && pages.includes('crd-reference.md'), `docs pages found: ${pages.join(', ')}`)
  for (const file of pages) {
    assert.ok(linked.includes(link(file)), `docs/${file} is not in the sidebar of docs/.vitepress/sidebar.ts (linked: ${linked.join(', ')})`)
  }
  for (const l of linked) {
    const candidates = [`${l.slice(1)}.md`, `${l.slice(1)}index.md`]
    const sources = candidates.map((c) => site.rewrites.inv[c] ?? c)
    assert.ok(sources.some((s) => existsSync(path.join(docsDir, s))), `the sidebar links ${l}, which has no page in docs/`)
  }
  if (existsSync(path.join(docsDir, 'adr', 'README.md'))) assert.equal(site.rewrites.map['adr/README.md'], 'adr/index.md', 'docs/adr/README.md is the ADR section index')
})

test('the site builds into docs/.vitepress/dist with the dead-link check on', async () => {
  const site = await resolveConfig(docsDir, 'build', 'production')
  assert.equal(site.outDir, path.join(docsDir, '.vitepress', 'dist'))
  assert.ok(!site.ignoreDeadLinks, 'dead internal links must fail docs:build')
})

test('links from docs pages to repository files point at the repository, and a link to a missing file fails the build', async () => {
  const site = await resolveConfig(docsDir, 'build', 'production')
  const md = await createMarkdownRenderer(site.srcDir, site.markdown, site.site.base, site.logger)
  const render = (src: string, page = 'concepts.md'): string => {
    const file = path.join(docsDir, page)
    return md.render(src, { path: file, realPath: file, relativePath: page, cleanUrls: false })
  }
  const repo = /href="(https:\/\/[^"]+)\/blob\/main\/README\.md#settings"/.exec(render('[settings](../README.md#settings)'))
  assert.ok(repo, 'a link to ../README.md becomes the README on the repository host, anchor kept')
  assert.equal(repo[1], repositoryUrl(), "the host's address is package.json's repository.url")
  assert.match(render('[crs](../examples/crs)'), new RegExp(`href="${repo[1]}/tree/main/examples/crs"`), 'a folder is a tree link')
  assert.throws(() => render('[gone](../examples/crs/no-such-file.yaml)'), /examples\/crs\/no-such-file\.yaml is not in the repository/)
  assert.throws(() => render('[gone](no-such-asset.svg)'), /docs\/no-such-asset\.svg is not in the repository/)
  // Links between pages are VitePress's own dead-link check; they stay relative.
  assert.match(render('[ops](operations.md#metrics)'), /href="\.\/operations\.html#metrics"/)
})

test('links on docs pages read as titles, not as file names or addresses', () => {
  const pages = [...markdownFiles(''), ...markdownFiles('adr')]
  for (const page of pages) {
    const text = readFileSync(path.join(docsDir, page), 'utf8')
    for (const [, label = ''] of text.matchAll(/\[([^\]]+)\]\([^)\s]+\)/g)) {
      assert.doesNotMatch(label, /\.md\b|^<?https?:\/\//, `docs/${page}: link text "${label}": name the page by its title`)
    }
  }
})
