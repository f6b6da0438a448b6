import { readdirSync } from 'node:fs'
import path from 'node:path'
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

const SINKS_NOT_EXPORTER = { group: ['**/exporter/**'], message: 'sinks/ must not import exporter/' }
/** One folder per sink type: a new sink is covered by the sibling rule below as it is created. */
const SINK_FOLDERS = readdirSync(path.join(import.meta.dirname, 'sinks'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'charts/**', '.cache/**', 'docs/.vitepress/dist/**', 'docs/.vitepress/cache/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // V8's linear-time engine flag ('l') is enabled at runtime in hooks/cel.ts.
  { rules: { 'no-invalid-regexp': ['error', { allowConstructorFlags: ['l'] }] } },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['**/sinks/**'], message: 'hooks/ must not import sinks/' },
          { group: ['**/exporter/**'], message: 'hooks/ must not import exporter/' },
        ],
      }],
    },
    files: ['hooks/**/*.ts'],
  },
  // Dependencies read server → exporter → sinks → api: sinks are the exporter's plugins.
  {
    rules: { 'no-restricted-imports': ['error', { patterns: [SINKS_NOT_EXPORTER] }] },
    files: ['sinks/**/*.ts'],
  },
  // A sink folder shares with its siblings only through sinks/ itself (events, documents, drift, ...).
  // The same rule's options replace, not extend, those above: each folder's list repeats them.
  ...SINK_FOLDERS.map((sink) => ({
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [SINKS_NOT_EXPORTER, {
          regex: `^(\\.\\./)+(sinks/)?(${SINK_FOLDERS.filter((other) => other !== sink).join('|')})(/|$)`,
          message: `sinks/${sink}/ must not import another sink's folder; move what they share to a module of sinks/`,
        }],
      }],
    },
    files: [`sinks/${sink}/**/*.ts`],
  })),
  {
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['**/server/**'], message: 'exporter/ must not import server/' }],
      }],
    },
    files: ['exporter/**/*.ts'],
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
)
