// The site's sidebar, built from the files in docs/ when the config loads: a page written by
// another change (docs/upgrading.md, a new ADR) appears once its file exists, and a link to a
// missing one is never made. test/cli/site.test.ts checks that every docs page is listed.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import type { DefaultTheme } from 'vitepress'

interface Page { file: string; text: string }

// Sidebar groups in reading order: learn it, run it, understand why.
const GROUPS: { text: string; pages: Page[] }[] = [
  {
    text: 'Guide',
    pages: [
      { file: 'quick-start.md', text: 'Quick start' },
      { file: 'concepts.md', text: 'Concepts' },
      { file: 'walkthrough.md', text: 'Walkthrough: Deployment to Git' },
      { file: 'preview.md', text: 'Try a profile (preview)' },
    ],
  },
  {
    text: 'Reference',
    pages: [
      { file: 'crd-reference.md', text: 'CR reference' },
      { file: 'operations.md', text: 'Operations' },
      { file: 'security.md', text: 'Security' },
      { file: 'upgrading.md', text: 'Upgrading and uninstall' },
    ],
  },
  {
    text: 'Design',
    pages: [{ file: 'design.md', text: 'Design' }],
  },
]

/** The site path of a docs/ file: adr/README.md is the ADR section's index. */
function pageLink(file: string): string {
  return '/' + file.replace(/(^|\/)(README|index)\.md$/, '$1').replace(/\.md$/, '')
}

/** adr/README.md is served as adr/index.md, so /adr/ is the section's page. */
export function rewrites(docsDir: string): Record<string, string> {
  return existsSync(path.join(docsDir, 'adr', 'README.md')) ? { 'adr/README.md': 'adr/index.md' } : {}
}

/** A page's first level-one heading, else its file name. */
function pageTitle(file: string): string {
  const heading = /^# +(.+)$/m.exec(readFileSync(file, 'utf8'))
  return heading?.[1]?.trim() ?? path.basename(file, '.md')
}

function adrItems(docsDir: string): DefaultTheme.SidebarItem[] {
  const dir = path.join(docsDir, 'adr')
  if (!existsSync(dir)) return []
  const records = readdirSync(dir).filter((f) => f.endsWith('.md') && f !== 'README.md').sort()
  return records.map((f) => ({ text: pageTitle(path.join(dir, f)), link: pageLink(`adr/${f}`) }))
}

export function sidebar(docsDir: string): DefaultTheme.SidebarItem[] {
  const groups: DefaultTheme.SidebarItem[] = GROUPS.map((g) => ({
    text: g.text,
    items: g.pages.filter((p) => existsSync(path.join(docsDir, p.file))).map((p) => ({ text: p.text, link: pageLink(p.file) })),
  }))
  const adrs = adrItems(docsDir)
  const hasIndex = existsSync(path.join(docsDir, 'adr', 'README.md'))
  if (adrs.length > 0 || hasIndex) {
    groups.push({
      text: 'Architecture decisions',
      // Collapsed: the records, listed open, bury the guide on every page. VitePress opens it on
      // an ADR page itself (it holds the active link).
      collapsed: true,
      ...(hasIndex ? { link: pageLink('adr/README.md') } : {}),
      items: adrs,
    })
  }
  return groups.filter((g) => (g.items?.length ?? 0) > 0 || g.link !== undefined)
}
