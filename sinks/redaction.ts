// Redaction of text meant for a status message or a log line: what a sink's server, git or a
// forge said, which may echo the sink's credentials. That text comes from outside and may be
// megabytes long, so it is cut first, and everything after the cut is a single pass over the
// text: an automaton for the secrets' forms (literal-scan.ts) and scanners for user-info and user
// names, with no pattern that could backtrack.

import { LiteralMatcher, Masks } from './literal-scan.js'

/**
 * How much of a text from outside is kept: the start of a server's error message, git's
 * stderr or a forge's answer. Documented in docs/operations.md.
 */
export const EXTERNAL_TEXT_LIMIT = 1024

/** What must never reach a message: `values` anywhere (passwords, tokens, DSNs), `words` as whole words (user names). */
export interface Secrets {
  values: readonly string[]
  words?: readonly string[]
}

export const NO_SECRETS: Secrets = { values: [] }

const USER_KEYS = /^(user|username|login)$/i

/**
 * Every value of a sink's secret is treated as secret; user names are masked as whole words only,
 * so a user called "kollect" does not turn "kollect_items" into "***_items".
 */
export function secretsFromCredentials(credentials: Readonly<Record<string, string>>, extra: Secrets = NO_SECRETS): Secrets {
  const values = [...extra.values]
  const words = [...(extra.words ?? [])]
  for (const [key, value] of Object.entries(credentials)) {
    if (value === '') continue
    if (USER_KEYS.test(key)) words.push(value)
    else values.push(value)
  }
  return { values, words }
}

/**
 * Text from outside cut to EXTERNAL_TEXT_LIMIT characters, before anything reads it. Shown only
 * through redact(), which cuts at the same limit knowing the secrets, so a secret split here
 * leaves none of its start behind there.
 */
export function bounded(text: string): string {
  return text.length <= EXTERNAL_TEXT_LIMIT ? text : `${text.slice(0, EXTERNAL_TEXT_LIMIT)}…`
}

/**
 * Remove secrets, their encoded forms and any URL user-info from text meant for a status message
 * or a log line, keeping at most its first `limit` characters. A secret that the cut splits
 * leaves none of its start behind.
 */
export function redact(text: string, secrets: Secrets, limit = EXTERNAL_TEXT_LIMIT): string {
  const cut = text.length > limit
  const window = cut ? text.slice(0, limit) : text
  const masked = new Masks(window.length)
  const forms = matcherFor(secrets)
  const tail = forms.scan(window, masked)
  if (cut) masked.add(window.length - tail, window.length)
  for (const word of wordsOf(secrets)) markWord(window, word, masked, cut)
  markUserInfo(window, masked, cut)
  return masked.render(window) + (cut ? '…' : '')
}

// ---- the forms of a secret ----

/** HTTP Basic user names that forges accept with a token as the password. */
const TOKEN_USERS = ['x-access-token', 'oauth2']

/** Derived forms shorter than this would mask ordinary words. */
const MIN_DERIVED_LENGTH = 6

/**
 * The forms in which `value` can appear in a message: as it is, URL-encoded or decoded; in
 * base64 and base64url, with and without padding, alone or as HTTP Basic's `user:value`; and the
 * part of any base64 text that encodes the value whatever surrounds it, at each of the three
 * byte alignments.
 */
function secretForms(value: string, users: readonly string[] = []): string[] {
  const out = new Set<string>([value])
  try {
    out.add(encodeURIComponent(value))
    out.add(decodeURIComponent(value))
  } catch {
    // not decodable: the raw value is enough
  }
  const derived = new Set<string>()
  const bytes = Buffer.from(value, 'utf8')
  for (const form of base64Forms(bytes)) derived.add(form)
  for (const user of [...TOKEN_USERS, ...users]) for (const form of base64Forms(Buffer.from(`${user}:${value}`, 'utf8'))) derived.add(form)
  for (let k = 0; k < 3; k++) {
    // Base64 char i carries bits 6i..6i+5: only the chars wholly inside the value's bits are its own.
    const encoded = Buffer.concat([Buffer.alloc(k), bytes]).toString('base64')
    const own = encoded.slice(Math.ceil((8 * k) / 6), Math.floor((8 * (k + bytes.length)) / 6))
    derived.add(own).add(urlSafe(own))
  }
  for (const form of derived) if (form.length >= MIN_DERIVED_LENGTH) out.add(form)
  out.delete('')
  return [...out]
}

function base64Forms(bytes: Buffer): string[] {
  const std = bytes.toString('base64')
  const bare = std.replace(/=+$/, '')
  return [std, bare, urlSafe(std), urlSafe(bare)]
}

function urlSafe(base64: string): string {
  return base64.replaceAll('+', '-').replaceAll('/', '_')
}

function wordsOf(secrets: Secrets): string[] {
  const out = new Set<string>()
  for (const word of secrets.words ?? []) {
    out.add(word)
    out.add(encodeURIComponent(word))
  }
  out.delete('')
  return [...out]
}

// Built once per Secrets object: a sink keeps its own for its lifetime.
const matchers = new WeakMap<Secrets, LiteralMatcher>()

function matcherFor(secrets: Secrets): LiteralMatcher {
  let matcher = matchers.get(secrets)
  if (!matcher) {
    const users = secrets.words ?? []
    matcher = new LiteralMatcher(secrets.values.flatMap((v) => (v === '' ? [] : secretForms(v, users))))
    matchers.set(secrets, matcher)
  }
  return matcher
}

// ---- scanners ----

// Characters that may continue a user name: "kollect" is not masked in "kollect_items".
function isWordChar(code: number): boolean {
  return (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95 || code === 46 || code === 45
}

function markWord(text: string, word: string, masks: Masks, cut: boolean): void {
  for (let at = text.indexOf(word); at >= 0; at = text.indexOf(word, at + word.length)) {
    const end = at + word.length
    if ((at === 0 || !isWordChar(text.charCodeAt(at - 1))) && (end === text.length || !isWordChar(text.charCodeAt(end)))) masks.add(at, end)
  }
  if (!cut) return
  // The cut may have split the name.
  for (let k = Math.min(word.length - 1, text.length); k > 0; k--) {
    if (text.endsWith(word.slice(0, k))) {
      masks.add(text.length - k, text.length)
      return
    }
  }
}

/**
 * scheme://user:password@host: what lies between "://" and the last "@" before the path. Each
 * character is read about once: the part scanned after one "://" holds no "/", so the next "://"
 * starts at its last character at the earliest.
 */
function markUserInfo(text: string, masks: Masks, cut: boolean): void {
  for (let at = text.indexOf('://'); at >= 0;) {
    const start = at + 3
    let end = start
    let lastAt = -1
    for (; end < text.length; end++) {
      const code = text.charCodeAt(end)
      if (code === 47 || code <= 32) break
      if (code === 64) lastAt = end
    }
    if (lastAt >= 0) masks.add(start, lastAt)
    // Cut before its "@": what is left may be user-info.
    else if (cut && end === text.length) masks.add(start, end)
    at = text.indexOf('://', Math.max(end - 1, at + 1))
  }
}
