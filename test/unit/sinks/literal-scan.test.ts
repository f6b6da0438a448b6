import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { LiteralMatcher, Masks } from '../../../sinks/literal-scan.js'
import { redact } from '../../../sinks/redaction.js'

// The one-pass matcher against the obvious quadratic one, on small alphabets where literals
// overlap, share prefixes and nest: the same characters masked, the same partial literal at the end.

function naive(text: string, literals: readonly string[]): { masked: boolean[]; tail: number } {
  const masked = Array.from({ length: text.length }, () => false)
  for (const l of literals) {
    if (l === '') continue
    for (let at = text.indexOf(l); at >= 0; at = text.indexOf(l, at + 1)) for (let i = at; i < at + l.length; i++) masked[i] = true
  }
  let tail = 0
  for (const l of literals) for (let k = Math.min(l.length, text.length); k > tail; k--) if (text.endsWith(l.slice(0, k))) tail = k
  return { masked, tail }
}

describe('LiteralMatcher', () => {
  test('finds what indexOf finds, overlaps and nesting included, and the same partial literal at the end', () => {
    const text = fc.string({ unit: fc.constantFrom('a', 'b', 'c'), maxLength: 60 })
    const literals = fc.array(fc.string({ unit: fc.constantFrom('a', 'b', 'c'), minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 6 })
    fc.assert(fc.property(text, literals, (t, ls) => {
      const want = naive(t, ls)
      const masks = new Masks(t.length)
      const tail = new LiteralMatcher(ls).scan(t, masks)
      assert.equal(tail, want.tail)
      // Rendered with each unmasked character kept and each masked run as "***".
      let expected = ''
      for (let i = 0; i < t.length; i++) {
        if (!want.masked[i]) expected += t[i]
        else if (i === 0 || !want.masked[i - 1]) expected += '***'
      }
      assert.equal(masks.render(t), expected)
    }), { numRuns: 2000 })
  })

  test('a literal with no match leaves the text as it is', () => {
    const masks = new Masks(5)
    assert.equal(new LiteralMatcher(['xyz']).scan('hello', masks), 0)
    assert.equal(masks.render('hello'), 'hello')
  })
})

describe('redact', () => {
  test('no secret survives, wherever it sits in the text and wherever the cut falls', () => {
    const secret = fc.string({ unit: fc.constantFrom('a', 'b', 'Z', '9', '/', '+', '%'), minLength: 4, maxLength: 24 })
    const filler = fc.string({ unit: fc.constantFrom('a', 'b', 'Z', ' ', ':', '/', '@'), maxLength: 40 })
    fc.assert(fc.property(secret, fc.array(filler, { minLength: 1, maxLength: 6 }), fc.integer({ min: 8, max: 200 }), (s, parts, limit) => {
      const text = parts.join(s)
      const out = redact(text, { values: [s] }, limit)
      assert.ok(!out.includes(s), `${JSON.stringify(s)} in ${JSON.stringify(out)}`)
      assert.ok(!out.includes(Buffer.from(s).toString('base64')), `base64 of ${JSON.stringify(s)} in ${JSON.stringify(out)}`)
      if (text.length > limit) {
        // Nothing at the cut starts the secret (beyond one character, which starts anything).
        const kept = out.slice(0, -1)
        for (let k = 2; k < s.length; k++) assert.ok(!kept.endsWith(s.slice(0, k)), `the start ${JSON.stringify(s.slice(0, k))} is left at the cut: ${JSON.stringify(out)}`)
      }
    }), { numRuns: 2000 })
  })
})
