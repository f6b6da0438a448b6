import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'charts/**', '.cache/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // V8's linear-time engine flag ('l') is enabled at runtime in hooks/cel.ts.
  { rules: { 'no-invalid-regexp': ['error', { allowConstructorFlags: ['l'] }] } },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['**/sinks/**'], message: 'hooks/ must not import sinks/' }],
      }],
    },
    files: ['hooks/**/*.ts'],
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
)
