import { readdirSync } from 'node:fs'
import path from 'node:path'
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

// The layers and facades, as import rules. Dependencies read server → exporter → sinks → api,
// with hooks/ beside sinks/ (pure, on api/ alone) and hub/ beside server/. One rule, so a later
// entry's options replace an earlier one's for the same file: each entry lists all of its folder's
// patterns. test/unit/lint-rules.test.ts checks that each refuses what it is for.

/** A folder must not import these top-level folders (or, in server/, these rooms). */
const never = (from, dirs) => ({
  regex: `^(\\.\\./)+(${dirs.join('|')})(/|$)`,
  message: `${from}/ must not import ${dirs.map((d) => `${d}/`).join(', ')}`,
})
/** Outside the exporter, its index.ts is its whole surface (unit tests of its parts and the benchmarks aside). */
const FACADE = { regex: '^(\\.\\./)+exporter/(?!index\\.js$)', message: 'import the exporter through exporter/index.js, never its parts' }
const restricted = (files, patterns, ignores) => ({ files, ...(ignores ? { ignores } : {}), rules: { 'no-restricted-imports': ['error', { patterns }] } })

const SINKS_NEVER = never('sinks', ['exporter', 'hub', 'server', 'hooks', 'cli'])
/** One folder per sink type: a new sink is covered by the sibling rule below as it is created. */
const SINK_FOLDERS = readdirSync(path.join(import.meta.dirname, 'sinks'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)
/**
 * server/'s rooms, lowest first: a room imports only rooms below it, and never an entry point
 * (server/main-*.ts, server/exporter-wiring.ts), which sit above them all.
 */
const SERVER_ROOMS = ['protocol', 'guards', 'process', 'cluster', 'extraction', 'http', 'exporter-api']

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'charts/**', '.cache/**', 'docs/.vitepress/dist/**', 'docs/.vitepress/cache/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // V8's linear-time engine flag ('l') is enabled at runtime in hooks/cel.ts.
  { rules: { 'no-invalid-regexp': ['error', { allowConstructorFlags: ['l'] }] } },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  restricted(['**/*.ts'], [FACADE], ['exporter/**', 'test/unit/**', 'bench/**']),
  restricted(['api/**/*.ts'], [never('api', ['hooks', 'sinks', 'exporter', 'hub', 'server', 'cli'])]),
  restricted(['hooks/**/*.ts'], [never('hooks', ['sinks', 'exporter', 'hub', 'server', 'cli'])]),
  restricted(['sinks/**/*.ts'], [SINKS_NEVER]),
  // A sink folder shares with its siblings only through sinks/ itself (events, documents, drift, ...).
  ...SINK_FOLDERS.map((sink) => restricted([`sinks/${sink}/**/*.ts`], [SINKS_NEVER, {
    regex: `^(\\.\\./)+(sinks/)?(${SINK_FOLDERS.filter((other) => other !== sink).join('|')})(/|$)`,
    message: `sinks/${sink}/ must not import another sink's folder; move what they share to a module of sinks/`,
  }])),
  restricted(['exporter/**/*.ts'], [never('exporter', ['server', 'hub', 'hooks', 'cli'])]),
  restricted(['hub/**/*.ts'], [FACADE, never('hub', ['server', 'cli', 'hooks'])]),
  ...SERVER_ROOMS.map((room, i) => restricted([`server/${room}/**/*.ts`], [FACADE, {
    regex: `^(\\.\\./)+(server/)?(${[...SERVER_ROOMS.slice(i + 1), 'main-[a-z-]+\\.js$', 'exporter-wiring\\.js$'].join('|')})`,
    message: `server/${room}/ imports only the rooms below it (${SERVER_ROOMS.slice(0, i).join(', ') || 'none'}), never an entry point`,
  }])),
)
