import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { ROOT } from '../support/metacontroller.js'

// npm test runs on the pinned Node and reaches every test file: Node 22+ reads --test arguments
// as globs (a directory argument is run as a module), so the script names *.test.js files only.

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  engines: { node: string }
  scripts: Record<string, string>
  devDependencies: Record<string, string>
}

function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f))
}

test('npm test runs the *.test.js globs of dist/test and dist/e2e on the pinned Node 24', () => {
  assert.match(pkg.scripts.test ?? '', / node --test --test-reporter=spec 'dist\/test\/\*\*\/\*\.test\.js' 'dist\/e2e\/\*\*\/\*\.test\.js'$/)
  assert.equal(pkg.engines.node, '>=22')
  const pinned = pkg.devDependencies.node ?? ''
  assert.match(pinned, /^24\.\d+\.\d+$/, 'the node devDependency is an exact 24.x version')
  assert.equal(process.version, `v${pinned}`, 'run the tests with npm test or npx node, which use node_modules/.bin/node')
})

test('only *.test.ts files register tests, so the globs miss none', () => {
  const files = [...sources('test'), ...sources('e2e')]
  assert.ok(files.filter((f) => f.endsWith('.test.ts')).length > 50, 'the test files were found')
  const registering = files.filter((f) => /^import (?!type )[^;'"]*from 'node:test'/m.test(readFileSync(path.join(ROOT, f), 'utf8')))
  assert.deepEqual(registering.filter((f) => !f.endsWith('.test.ts')), [], 'files that import node:test for values are named *.test.ts')
})
