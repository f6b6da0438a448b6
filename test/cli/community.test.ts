// The community files and the architecture decision records stay present, well-formed and in
// step: the license is the one package.json declares, every ADR has its sections and a status,
// the index lists every ADR, and every link in an ADR reaches a file (and heading) that exists.
import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { ROOT } from '../support/metacontroller.js'
import { repositoryUrl } from '../support/repository.js'

const read = (file: string): string => readFileSync(path.join(ROOT, file), 'utf8')
const ADR_DIR = path.join('docs', 'adr')
const adrFiles = readdirSync(path.join(ROOT, ADR_DIR)).filter((f) => /^\d{4}-.*\.md$/.test(f)).sort()
const pkg = JSON.parse(read('package.json')) as { license: string; version: string }

/** A heading's anchor as VitePress (and GitHub) make it: lower case, punctuation dropped, spaces to dashes. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[`*]/g, '').replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-')
}

function anchors(markdown: string): Set<string> {
  return new Set(markdown.split('\n').filter((l) => /^#{1,6} /.test(l)).map((l) => slug(l.replace(/^#+ /, ''))))
}

function links(markdown: string): string[] {
  return [...markdown.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1] ?? '')
}

describe('community files', () => {
  test('exist and are not empty', () => {
    for (const file of ['LICENSE', 'CODE_OF_CONDUCT.md', 'SECURITY.md', 'GOVERNANCE.md', 'CHANGELOG.md']) {
      assert.ok(existsSync(path.join(ROOT, file)), `${file} is missing`)
      assert.ok(read(file).trim().length > 500, `${file} is (nearly) empty`)
    }
  })

  test('LICENSE is the MIT license package.json declares, held by The Kollect Authors', () => {
    assert.equal(pkg.license, 'MIT')
    const license = read('LICENSE')
    assert.match(license, /^MIT License\n\nCopyright \(c\) \d{4} The Kollect Authors\n/)
    assert.match(license, /THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND/)
  })

  test('the code of conduct is the Contributor Covenant 2.1 with its enforcement ladder and a contact', () => {
    const coc = read('CODE_OF_CONDUCT.md')
    assert.match(coc, /Contributor Covenant\]\[homepage\],\nversion 2\.1/)
    for (const step of ['1. Correction', '2. Warning', '3. Temporary Ban', '4. Permanent Ban']) assert.ok(coc.includes(`### ${step}`), step)
    assert.match(coc, /\[SECURITY\.md\]\(SECURITY\.md\)/)
  })

  test('the security policy reports privately, supports the current version and names what is in scope', () => {
    const security = read('SECURITY.md')
    assert.match(security, /private vulnerability\s+reporting/)
    const minor = pkg.version.split('.').slice(0, 2).join('.')
    assert.ok(security.includes(`| ${minor}.x | yes |`), `the supported versions table names ${minor}.x`)
    for (const area of ['Hook and exporter authentication', 'Secret handling', 'The SSRF guard', 'Tenant isolation']) {
      assert.ok(security.includes(`**${area}.**`), area)
    }
  })

  test('the changelog keeps an Unreleased section first, in Keep a Changelog form', () => {
    const changelog = read('CHANGELOG.md')
    assert.match(changelog, /keepachangelog\.com\/en\/1\.1\.0/)
    const sections = changelog.split('\n').filter((l) => l.startsWith('## '))
    assert.equal(sections[0], '## [Unreleased]')
    for (const s of sections.slice(1)) assert.match(s, /^## \[\d+\.\d+\.\d+(-[\w.]+)?\] - \d{4}-\d{2}-\d{2}$/)
  })
})

describe('architecture decision records', () => {
  test('are numbered from 0001 without gaps, each titled with its number', () => {
    assert.ok(adrFiles.length >= 15, `only ${adrFiles.length} ADRs`)
    adrFiles.forEach((file, i) => {
      const number = String(i + 1).padStart(4, '0')
      assert.ok(file.startsWith(`${number}-`), `${file}: expected number ${number}`)
      assert.match(read(path.join(ADR_DIR, file)).split('\n')[0] ?? '', new RegExp(`^# ADR-${number}: \\S`))
    })
  })

  test('each has Status, Context, Decision and Consequences in that order, a known status, and stays short', () => {
    for (const file of adrFiles) {
      const text = read(path.join(ADR_DIR, file))
      const headings = text.split('\n').filter((l) => l.startsWith('## '))
      assert.deepEqual(headings.slice(0, 4), ['## Status', '## Context', '## Decision', '## Consequences'], file)
      const status = /## Status\n\n(.*)/.exec(text)?.[1] ?? ''
      assert.match(status, /^(Proposed|Accepted|Deprecated|Superseded by ADR-\d{4})\b/, `${file}: status`)
      for (const section of ['Context', 'Decision', 'Consequences']) {
        const body = text.split(`## ${section}\n`)[1]?.split('\n## ')[0] ?? ''
        assert.ok(body.trim().length > 100, `${file}: ${section} is empty`)
      }
      assert.ok(text.split('\n').length <= 80, `${file} is over 80 lines`)
    }
  })

  test('the index lists every ADR, and nothing else', () => {
    const index = read(path.join(ADR_DIR, 'README.md'))
    const listed = [...index.matchAll(/^\| \[ADR-(\d{4})\]\(([^)]+)\) \|/gm)].map((m) => m[2])
    assert.deepEqual(listed, adrFiles)
    for (const file of adrFiles) {
      const title = read(path.join(ADR_DIR, file)).split('\n')[0]?.replace(/^# ADR-\d{4}: /, '') ?? ''
      assert.ok(index.includes(`| ${title} |`), `the index carries ${file}'s title`)
    }
  })

  test('every link reaches a docs page and heading, or a repository file by its relative path', () => {
    for (const file of ['README.md', ...adrFiles]) {
      const from = path.join(ADR_DIR, file)
      for (const link of links(read(from))) {
        if (/^https?:\/\//.test(link)) {
          // The site turns a relative link into one to the repository: its address lives in package.json only.
          assert.ok(!link.startsWith(repositoryUrl()), `${file}: ${link}: link the file by its path relative to the ADR`)
          continue
        }
        const [target = '', anchor] = link.split('#')
        const resolved = path.normalize(path.join(path.dirname(from), target))
        assert.ok(!resolved.startsWith('..'), `${file}: ${link} leaves the repository`)
        assert.ok(existsSync(path.join(ROOT, resolved)), `${file}: ${link} names no file in the repository`)
        if (anchor) assert.ok(anchors(read(resolved)).has(anchor), `${file}: ${link}: no heading #${anchor}`)
      }
    }
  })
})
