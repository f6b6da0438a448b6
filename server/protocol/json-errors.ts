/**
 * A JSON parse error without the piece of the body V8 quotes in its message (Node 20:
 * `Unexpected token 'x', "…body…" is not valid JSON`): bodies carry cluster data, and this
 * message reaches the response and the logs.
 */
export function jsonErrorSummary(message: string): string {
  if (/forbidden prototype property/i.test(message)) return 'object contains a forbidden prototype property (__proto__ or constructor.prototype)'
  if (/unexpected end|cannot be empty|empty/i.test(message)) return 'body is empty or ends too early'
  const token = /Unexpected token '(.{1,4}?)'/.exec(message)
  const at = /position (\d+)/.exec(message)
  if (token) return `unexpected token '${token[1]}'${at ? ` at position ${at[1]}` : ''}`
  if (/Bad control character/i.test(message)) return `bad control character in a string${at ? ` at position ${at[1]}` : ''}`
  return at ? `syntax error at position ${at[1]}` : 'not valid JSON'
}
