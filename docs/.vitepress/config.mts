// The documentation site: `npm run docs:build` (VitePress, dead internal links fail the build).
// KOLLECT_DOCS_BASE sets the base path (GitHub Pages serves a project site under /<repo>/);
// KOLLECT_DOCS_REPO overrides package.json's repository address, which links to non-docs files use.
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitepress'
import { repoLinks } from './repo-links'
import { rewrites, sidebar } from './sidebar'

const docsDir = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '..')
const repoRoot = path.resolve(docsDir, '..')

// The repository's address is package.json's `repository.url` and nowhere else: the edit links,
// the source links and the GitHub icon derive from it (test/cli/repository.test.ts holds the
// chart and SECURITY.md to it). It is not published yet; KOLLECT_DOCS_REPO builds a fork's site.
function repositoryUrl(): string {
  const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { repository?: { url?: string } }
  const url = process.env.KOLLECT_DOCS_REPO ?? pkg.repository?.url
  if (!url) throw new Error('package.json names no repository.url, which the site links to')
  return url.replace(/^git\+/, '').replace(/\.git$/, '').replace(/\/+$/, '')
}

function basePath(): string {
  const base = process.env.KOLLECT_DOCS_BASE ?? '/'
  return `/${base}/`.replace(/\/+/g, '/')
}

const repoUrl = repositoryUrl()
const siteRewrites = rewrites(docsDir)
const base = basePath()

export default defineConfig({
  title: 'Kollect',
  description: 'Live Kubernetes state as a durable, queryable, diffable inventory: Metacontroller hooks plus an exporter.',
  base,
  // head links are not prefixed with the base: without them a browser asks the host's root for
  // /favicon.ico, which is not the site's under a project base (GitHub Pages) and 404s.
  head: [
    ['link', { rel: 'icon', href: `${base}favicon.ico`, sizes: '16x16 32x32 48x48' }],
    ['link', { rel: 'icon', href: `${base}favicon.svg`, type: 'image/svg+xml' }],
  ],
  srcDir: '.',
  outDir: '.vitepress/dist',
  cacheDir: '.vitepress/cache',
  rewrites: siteRewrites,
  lastUpdated: false,
  markdown: {
    config: (md) => repoLinks(md, { repoRoot, docsDir, repoUrl, branch: 'main', rewrites: siteRewrites }),
  },
  themeConfig: {
    nav: [
      { text: 'Quick start', link: '/quick-start' },
      { text: 'Concepts', link: '/concepts' },
      { text: 'Walkthrough', link: '/walkthrough' },
      { text: 'Reference', link: '/crd-reference' },
      { text: 'Operations', link: '/operations' },
      ...(existsSync(path.join(docsDir, 'adr', 'README.md')) ? [{ text: 'ADRs', link: '/adr/' }] : []),
    ],
    sidebar: sidebar(docsDir),
    outline: [2, 3],
    search: { provider: 'local' },
    socialLinks: [{ icon: 'github', link: repoUrl }],
    editLink: { pattern: `${repoUrl}/edit/main/docs/:path`, text: 'Edit this page' },
    footer: { message: 'MIT licensed. API kollect.dev/v1alpha1 (pre-beta).' },
  },
})
