import v8 from 'node:v8'

/**
 * cel-js implements matches() with the process-wide RegExp. These V8 flags make every regex that
 * backtracks too much fall back to V8's linear-time engine, and let hooks/cel.ts test patterns for
 * linear-time compatibility up front (backreferences and lookarounds are refused, as in RE2).
 * They are process-wide, so every entry point that compiles or evaluates CEL calls this first.
 */
export function enableLinearRegExps(): void {
  v8.setFlagsFromString('--enable-experimental-regexp-engine')
  v8.setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks')
  v8.setFlagsFromString('--regexp-backtracks-before-fallback=10000')
}
