import js from '@eslint/js'
import tseslint from 'typescript-eslint'

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
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['**/exporter/**'], message: 'sinks/ must not import exporter/' }],
      }],
    },
    files: ['sinks/**/*.ts'],
  },
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
