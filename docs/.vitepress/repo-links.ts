// Links from docs/ pages to repository files outside docs/ (../README.md, ../examples/crs/…)
// have no page on the site: they become links to the file on the repository host. VitePress's
// dead-link check skips them once they are absolute, so this plugin checks them instead: a link
// to a file that is not in the repository fails the build. Relative links to non-page files
// inside docs/ are checked the same way (VitePress only checks links to pages).
import { existsSync, statSync } from 'node:fs'
import path from 'node:path'
import type { MarkdownRenderer } from 'vitepress'

export interface RepoLinkOptions {
  repoRoot: string
  docsDir: string
  /** https://github.com/<owner>/<repo>, no trailing slash. */
  repoUrl: string
  branch: string
  /** VitePress rewrites (source file → served file, relative to docs/): links follow them. */
  rewrites: Record<string, string>
}

interface Env { path?: string; realPath?: string }

const PAGE = /\.(md|html)$/

/** A relative link to a non-page file, or to anything outside docs/: its repository path, or undefined. */
function repoTarget(href: string, fromFile: string, opts: Pick<RepoLinkOptions, 'repoRoot' | 'docsDir'>): { file: string; outside: boolean } | undefined {
  if (href === '' || href.startsWith('#') || href.startsWith('/') || /^[a-z][a-z0-9+.-]*:/i.test(href)) return undefined
  const target = href.replace(/[?#].*$/, '')
  if (target === '') return undefined
  const abs = path.resolve(path.dirname(fromFile), decodeURIComponent(target))
  const outside = path.relative(opts.docsDir, abs).startsWith('..')
  if (!outside && PAGE.test(target)) return undefined // VitePress checks links to pages
  return { file: path.relative(opts.repoRoot, abs).split(path.sep).join('/'), outside }
}

/** The repository host's address of a repository file or folder, keeping the link's anchor. */
function repoUrlFor(file: string, href: string, opts: RepoLinkOptions): string {
  const kind = existsSync(path.join(opts.repoRoot, file)) && statSync(path.join(opts.repoRoot, file)).isDirectory() ? 'tree' : 'blob'
  const hash = href.includes('#') ? href.slice(href.indexOf('#')) : ''
  return `${opts.repoUrl}/${kind}/${opts.branch}/${file}${hash}`
}

/** A link to a page that rewrites serve elsewhere (adr/README.md → adr/index.md), pointed there. */
function rewrittenHref(href: string, fromFile: string, opts: Pick<RepoLinkOptions, 'docsDir' | 'rewrites'>): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('#')) return undefined
  const target = href.replace(/[?#].*$/, '')
  if (!target.endsWith('.md')) return undefined
  const abs = target.startsWith('/') ? path.join(opts.docsDir, target) : path.resolve(path.dirname(fromFile), decodeURIComponent(target))
  const served = opts.rewrites[path.relative(opts.docsDir, abs).split(path.sep).join('/')]
  if (served === undefined) return undefined
  const rel = path.relative(path.dirname(fromFile), path.join(opts.docsDir, served)).split(path.sep).join('/')
  return (rel.startsWith('.') ? rel : `./${rel}`) + href.slice(target.length)
}

export function repoLinks(md: MarkdownRenderer, opts: RepoLinkOptions): void {
  md.core.ruler.push('kollect_repo_links', (state) => {
    const env = state.env as Env
    const from = env.realPath ?? env.path
    if (!from) return
    const visit = (tokens: typeof state.tokens): void => {
      for (const token of tokens) {
        if (token.children) visit(token.children)
        if (token.type !== 'link_open') continue
        const href = token.attrGet('href')
        if (href === null) continue
        const moved = rewrittenHref(href, from, opts)
        if (moved !== undefined) {
          token.attrSet('href', moved)
          continue
        }
        const target = repoTarget(href, from, opts)
        if (!target) continue
        if (target.file.startsWith('..') || !existsSync(path.join(opts.repoRoot, target.file))) {
          throw new Error(`${path.relative(opts.docsDir, from)}: link to ${href}: ${target.file} is not in the repository`)
        }
        if (target.outside) token.attrSet('href', repoUrlFor(target.file, href, opts))
      }
    }
    visit(state.tokens)
  })
}
