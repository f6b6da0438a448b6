import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { kinds, validateSpec, type KollectKind } from '../api/crd-schemas.js'
import { isNamespaceName, isObjectName } from '../api/names.js'
import { API_VERSION, GROUP, type KollectProfileSpec, type KollectSinkSpec } from '../api/types.js'
import { DEFAULT_LIMITS } from '../hooks/limits.js'
import { compileProfile, describeProblem } from '../hooks/profile.js'
import { matchPolicyProblem } from '../hooks/selection.js'
import { sinkProblems } from '../hooks/sink-sync.js'
import { ruleFindings, type Finding } from './crd-rules.js'
import { describeFsError, EXIT_INVALID, EXIT_OK, EXIT_USAGE, readInput, UsageError, type Io } from './io.js'
import { describeObject, describeSyntaxProblem, isList, isObject, parseDocuments } from './objects.js'

export const VALIDATE_USAGE = `Usage: kollect validate [options] FILE|DIR|- ...

Checks every Kollect resource (apiVersion ${API_VERSION}) in the files against its CRD schema,
as \`kubectl apply\` with strict field validation would (unknown fields are errors, and the CRD's
x-kubernetes-validations rules are evaluated), and compiles every expression as the hooks do:
profile attributes, a target's matchPolicy, a sink's settings. Files may hold several YAML
documents or a List; other documents are skipped with a note. A directory stands for its
*.yaml, *.yml and *.json files; - reads stdin.

Options:
  -q, --quiet   print only errors and the summary
  -h, --help    show this help

Exit status: 0 every resource valid; 1 a resource is invalid, or a file is empty or not valid YAML;
2 usage error (no files, a file that cannot be read).
`

interface Counts {
  valid: number
  invalid: number
  skipped: number
}

export async function runValidate(argv: string[], io: Io): Promise<number> {
  let parsed: { values: { quiet?: boolean; help?: boolean }; positionals: string[] }
  try {
    parsed = parseArgs({
      args: argv, options: { quiet: { type: 'boolean', short: 'q' }, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true,
    })
  } catch (err) {
    throw new UsageError((err as Error).message, true)
  }
  if (parsed.values.help) {
    io.stdout.write(VALIDATE_USAGE)
    return EXIT_OK
  }
  if (parsed.positionals.length === 0) throw new UsageError('no files given', true)
  const quiet = parsed.values.quiet === true
  const counts: Counts = { valid: 0, invalid: 0, skipped: 0 }
  let unreadable = false
  for (const file of expand(parsed.positionals)) {
    let text: string
    try {
      text = await readInput(file.path, io)
    } catch (err) {
      io.stderr.write(`kollect validate: ${(err as Error).message}\n`)
      unreadable = true
      continue
    }
    validateText(file.label, text, counts, io, quiet)
  }
  io.stdout.write(`${counts.valid} valid, ${counts.invalid} invalid, ${counts.skipped} skipped\n`)
  if (unreadable) return EXIT_USAGE
  return counts.invalid > 0 ? EXIT_INVALID : EXIT_OK
}

/** Directories become their YAML and JSON files, sorted; anything else is kept as given. */
function expand(args: string[]): { path: string; label: string }[] {
  const out: { path: string; label: string }[] = []
  for (const arg of args) {
    if (arg === '-') {
      out.push({ path: arg, label: 'stdin' })
      continue
    }
    let isDir = false
    try {
      isDir = statSync(arg).isDirectory()
    } catch {
      // reported when it is read
    }
    if (!isDir) {
      out.push({ path: arg, label: arg })
      continue
    }
    let names: string[]
    try {
      names = readdirSync(arg)
    } catch (err) {
      throw new UsageError(`cannot read ${arg}: ${describeFsError(err)}`)
    }
    for (const name of names.filter((n) => /\.(ya?ml|json)$/.test(n)).sort()) {
      const path = join(arg, name)
      out.push({ path, label: path })
    }
  }
  return out
}

function validateText(file: string, text: string, counts: Counts, io: Io, quiet: boolean): void {
  const docs = parseDocuments(text)
  // An empty file (or only comments) is a mistake, never a pass with 0 resources.
  if (docs.every((d) => !d.error && (d.value === null || d.value === undefined))) {
    counts.invalid++
    io.stderr.write(`${file}: empty: no YAML document in it\n`)
    return
  }
  for (const doc of docs) {
    const where = `${file}: document ${doc.index}`
    if (doc.error) {
      counts.invalid++
      io.stderr.write(`${where}: ${describeSyntaxProblem(doc.error)}\n`)
      continue
    }
    if (doc.value === null || doc.value === undefined) continue
    if (isList(doc.value)) {
      doc.value.items.forEach((item, i) => validateDocument(`${where} item ${i + 1}`, item, counts, io, quiet))
      continue
    }
    validateDocument(where, doc.value, counts, io, quiet)
  }
}

function validateDocument(where: string, value: unknown, counts: Counts, io: Io, quiet: boolean): void {
  const label = `${where} (${describeObject(value)})`
  const apiVersion = isObject(value) && typeof value.apiVersion === 'string' ? value.apiVersion : ''
  if (!isObject(value) || !apiVersion.startsWith(`${GROUP}/`)) {
    counts.skipped++
    if (!quiet) io.stdout.write(`${label}: skipped, not a Kollect resource\n`)
    return
  }
  const findings = checkResource(value)
  if (findings.length === 0) {
    counts.valid++
    if (!quiet) io.stdout.write(`${label}: valid\n`)
    return
  }
  counts.invalid++
  for (const f of findings) io.stderr.write(`${label}: ${f.text}\n`)
}

const TOP_LEVEL = new Set(['apiVersion', 'kind', 'metadata', 'spec', 'status'])

/** Every problem of one Kollect resource, most specific first, one per field path and source. */
function checkResource(doc: Record<string, unknown>): Finding[] {
  const at = (path: string, message: string): Finding => ({ path, text: `${path}: ${message}` })
  if (doc.apiVersion !== API_VERSION) return [at('apiVersion', `${String(doc.apiVersion)} is not served; use ${API_VERSION}`)]
  const kind = doc.kind
  if (typeof kind !== 'string' || !(kinds as readonly string[]).includes(kind)) {
    return [at('kind', `${kind === undefined ? 'required field is missing' : `unknown kind ${JSON.stringify(kind)}`}; ${GROUP} kinds are ${kinds.join(', ')}`)]
  }
  const k = kind as KollectKind
  const spec = doc.spec

  const basics: Finding[] = Object.keys(doc).filter((key) => !TOP_LEVEL.has(key)).sort().map((key) => at(key, 'unknown field'))
  const meta = doc.metadata
  if (!isObject(meta)) basics.push(at('metadata', 'required field is missing'))
  else {
    if (typeof meta.name !== 'string' || meta.name === '') {
      if (typeof meta.generateName !== 'string') basics.push(at('metadata.name', 'required field is missing'))
    } else if (!isObjectName(meta.name)) {
      basics.push(at('metadata.name', `${JSON.stringify(meta.name)} must be a lowercase RFC 1123 subdomain`))
    }
    if (meta.namespace !== undefined && !isNamespaceName(meta.namespace)) {
      basics.push(at('metadata.namespace', `${JSON.stringify(meta.namespace)} must be a lowercase RFC 1123 label`))
    }
  }

  // The hooks' own compile and semantic checks first: their messages name the attribute and
  // carry positions. A schema or CRD-rule error at the same field says the same thing less well.
  const compiled: Finding[] = []
  const semantic: Finding[] = []
  if (k === 'KollectProfile' && isObject(spec)) {
    for (const p of compileProfile(spec as unknown as KollectProfileSpec, DEFAULT_LIMITS).problems) {
      compiled.push({ path: p.field === 'attributes' ? 'spec.attributes' : `spec.attributes[${p.index}].${p.field}`, text: describeProblem(p) })
    }
  }
  if (k === 'KollectTarget' && isObject(spec) && typeof spec.matchPolicy === 'string') {
    const problem = matchPolicyProblem(spec.matchPolicy, DEFAULT_LIMITS)
    if (problem !== null) compiled.push(at('spec.matchPolicy', problem))
  }
  if (k === 'KollectSink' && isObject(spec)) {
    // Every endpoint is allowed here: the SSRF guard depends on where the exporter runs.
    for (const problem of sinkProblems(spec as unknown as KollectSinkSpec, { checkEndpoint: () => null })) {
      const colon = problem.indexOf(': ')
      semantic.push({ path: colon > 0 ? problem.slice(0, colon) : 'spec', text: problem })
    }
  }

  const result = validateSpec(k, spec, { rejectUnknownFields: true })
  const schema = result.valid ? [] : result.errors.map((e) => at(e.path, explainSchemaError(e.message, valueAt(doc, e.path))))
  const rules = ruleFindings(k, spec)

  const out: Finding[] = [...basics]
  const seen = new Set<string>()
  // A rule's finding on a field yields to any finding already made below it.
  const coveredBelow = (f: Finding): boolean => [...seen].some((p) => p.startsWith(f.path + '.') || p.startsWith(f.path + '['))
  for (const source of [compiled, schema, rules, semantic]) {
    const kept = source.filter((f) => !seen.has(f.path) && !(source === rules && f.path !== 'spec' && coveredBelow(f)))
    out.push(...kept)
    for (const f of source) seen.add(f.path)
  }
  return out
}

const DURATION_PATTERN = 'must match pattern "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"'

/** Schema messages with the offending value, and durations said in words. */
function explainSchemaError(message: string, value: unknown): string {
  const text = message === DURATION_PATTERN ? 'must be a duration such as 500ms, 10s, 2m or 1h30m' : message
  if (message === 'unknown field' || message === 'required field is missing') return text
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
    const shown = JSON.stringify(value)
    return `${text} (got ${shown.length > 60 ? shown.slice(0, 59) + '…' : shown})`
  }
  return text
}

/** The value at a path as crd-schemas.ts prints them: `spec.attributes[0]["odd key"].cel`. */
function valueAt(root: unknown, path: string): unknown {
  const token = /\.([A-Za-z_$][A-Za-z0-9_$]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]|^([A-Za-z_$][A-Za-z0-9_$]*)/y
  let node: unknown = root
  let pos = 0
  while (pos < path.length) {
    token.lastIndex = pos
    const m = token.exec(path)
    if (!m) return undefined
    pos = token.lastIndex
    const key = m[1] ?? m[4] ?? (m[3] !== undefined ? (JSON.parse(m[3]) as string) : undefined)
    if (key !== undefined) node = isObject(node) ? node[key] : undefined
    else node = Array.isArray(node) ? node[Number(m[2])] : undefined
  }
  return node
}
