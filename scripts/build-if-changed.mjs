// Runs `npm run build` (an incremental tsc into dist/) only when a source changed since the last
// build, and says so: `npm start` and `npm run demo` then start at once on an unchanged clone,
// and a first run says what it waits for instead of showing a bare `tsc -p .` for a minute.
// Run from the package root (npm runs scripts there). Plain JavaScript: it runs before any build.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync, utimesSync } from 'node:fs'
import path from 'node:path'
import process from 'node:process'

const STAMP = 'dist/.tsbuildinfo'
const say = (line) => process.stderr.write(`kollect: ${line}\n`)

/** Files under dir whose names end in .ts or .json, skipping dist and node_modules. */
function* sources(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name)
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules' && entry.name !== 'dist') yield* sources(file)
    } else if (/\.(ts|json)$/.test(entry.name)) {
      yield file
    }
  }
}

const { include = [] } = JSON.parse(readFileSync('tsconfig.json', 'utf8'))
const built = existsSync(STAMP) ? statSync(STAMP).mtimeMs : -1
let changed = 0
for (const file of ['tsconfig.json', 'package.json', ...include.filter((d) => existsSync(d)).flatMap((d) => [...sources(d)])]) {
  if (statSync(file).mtimeMs > built) changed++
}

if (changed === 0) {
  say('dist/ is up to date with the sources; not building')
} else {
  say(built < 0
    ? 'compiling the TypeScript sources into dist/ (a first build takes about a minute; later ones only what changed)'
    : `${changed} source file${changed === 1 ? '' : 's'} changed since the last build; compiling into dist/`)
  const start = Date.now()
  const r = spawnSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' })
  if (r.status !== 0) {
    say(`the build failed (${r.error?.message ?? `exit ${r.status}`}); see tsc's messages above`)
    process.exit(r.status || 1)
  }
  // tsc leaves its build info alone when no output changed (a touched but unchanged file): mark
  // the build done anyway, or every later start would build again.
  const now = new Date()
  utimesSync(STAMP, now, now)
  say(`built in ${((Date.now() - start) / 1000).toFixed(1)} s`)
}
