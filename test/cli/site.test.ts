import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { createMarkdownRenderer, resolveConfig, type DefaultTheme } from 'vitepress'
import { ROOT } from '../support/metacontroller.js'
import { repositoryUrl } from '../support/repository.js'
import { launchChromium, type Browser, type Page } from '../support/chromium.js'
import { serveStatic, type StaticSite } from '../support/static-site.js'

const run = promisify(execFile)

// The documentation site's config, as VitePress resolves it, then the built site in Chromium.
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

// The built site in a real browser, served the way a static host serves it: what a reader sees.
describe('the built site, in Chromium', () => {
  let outDir = ''
  let site: StaticSite | undefined
  let browser: Browser | undefined

  before(async () => {
    outDir = mkdtempSync(path.join(tmpdir(), 'kollect-site-'))
    const vitepress = path.join(ROOT, 'node_modules', 'vitepress', 'bin', 'vitepress.js')
    const env = { ...process.env, KOLLECT_DOCS_BASE: '/' }
    await run(process.execPath, [vitepress, 'build', 'docs', '--outDir', outDir], { cwd: ROOT, env })
    site = await serveStatic(outDir)
    browser = await launchChromium()
  })
  after(async () => {
    await browser?.close()
    await site?.close()
    rmSync(outDir, { recursive: true, force: true })
  })

  async function open(page: string): Promise<Page> {
    assert.ok(browser && site)
    const tab = await browser.newPage()
    await tab.goto(`${site.origin}${page}`)
    return tab
  }

  /** In the page: "<status> <content-type>" of a GET. */
  const statusOf = (url: string): string =>
    `fetch(${JSON.stringify(url)}).then((r) => r.status + ' ' + r.headers.get('content-type'))`

  test('a page load fetches nothing that is missing, and /favicon.ico and the linked icons answer 200', async () => {
    assert.ok(site)
    const favicon = `${site.origin}/favicon.ico`
    for (const page of ['/', '/operations.html', '/adr/0001-targets-as-metacontroller-parents.html']) {
      const tab = await open(page)
      const icons = await tab.evaluate<string[]>(
        `[...document.querySelectorAll('link[rel~="icon"]')].map((l) => l.href)`)
      assert.ok(icons.includes(favicon), `${page} links /favicon.ico: ${icons.join(', ')}`)
      for (const icon of new Set([...icons, favicon])) {
        assert.match(await tab.evaluate<string>(statusOf(icon)), /^200 image\//, `${page}: ${icon}`)
      }
      assert.deepEqual(tab.fetched.filter((f) => f.status === 0 || f.status >= 400), [], `${page}: failed requests`)
    }
  })

  test("links on a page read as the linked pages' titles, not as file names", async () => {
    const tab = await open('/operations.html')
    const links = await tab.evaluate<{ text: string; href: string }[]>(`
      [...document.querySelectorAll('.vp-doc a:not(.header-anchor)')]
        .map((a) => ({ text: a.textContent.trim(), href: a.getAttribute('href') }))`)
    assert.ok(links.length > 20, `links on /operations.html: ${links.length}`)
    assert.deepEqual(links.filter((l) => /\.md\b/.test(l.text)), [], 'link texts that are file names')
    const title = /^# +(.+)$/m.exec(readFileSync(path.join(docsDir, 'crd-reference.md'), 'utf8'))?.[1]
    const toReference = links.filter((l) => l.href === './crd-reference.html')
    assert.ok(toReference.some((l) => l.text === title), `a link to the CRD reference reads "${title}"`)
  })

  test('the table of kinds on the CRD reference fits its column', async () => {
    const tab = await open('/crd-reference.html')
    type Measured = Record<'scrollWidth' | 'clientWidth' | 'right' | 'column', number> & { head: string }
    const table = await tab.evaluate<Measured>(`
      (() => {
        const t = document.querySelector('.vp-doc table')
        const column = document.querySelector('.vp-doc').getBoundingClientRect().right
        const { scrollWidth, clientWidth } = t, right = t.getBoundingClientRect().right
        return { head: t.querySelector('th').textContent, scrollWidth, clientWidth, right, column }
      })()`)
    assert.equal(table.head, 'Kind')
    const { scrollWidth, clientWidth, right, column } = table
    assert.ok(scrollWidth <= clientWidth, `the table scrolls: ${scrollWidth} px in ${clientWidth} px`)
    assert.ok(right <= column, `the table ends at ${right} px, past its column's end at ${column} px`)
  })

  test('the architecture decisions group of the sidebar is collapsed, and open on an ADR page', async () => {
    const state = `
      (() => {
        const group = [...document.querySelectorAll('.VPSidebarItem.level-0')]
          .find((g) => g.querySelector('.text')?.textContent === 'Architecture decisions')
        const recordShown = group.querySelector('.items a').checkVisibility()
        return { collapsed: group.classList.contains('collapsed'), recordShown }
      })()`
    assert.deepEqual(await (await open('/operations.html')).evaluate(state), { collapsed: true, recordShown: false })
    const adr = await open('/adr/0001-targets-as-metacontroller-parents.html')
    assert.deepEqual(await adr.evaluate(state), { collapsed: false, recordShown: true })
  })
})
