import { parseArgs } from 'node:util'
import { specProblems } from '../api/crd-schemas.js'
import {
  API_VERSION, type Item, type KollectProfileSpec, type KollectTargetSpec, type KubeObject, type ResourceSpec,
} from '../api/types.js'
import { compileCel, type CelProgram } from '../hooks/cel.js'
import { expressionInput, extractObject } from '../hooks/extract.js'
import { DEFAULT_LIMITS } from '../hooks/limits.js'
import { isClusterScoped, wellKnownNamespaced, wellKnownPlural, type PluralResolution } from '../hooks/plural.js'
import { compileProfile, describeProblem, type CompiledProfile } from '../hooks/profile.js'
import { related, typeKey, type ObjectMap, type SyncRequest } from '../hooks/request.js'
import { effectiveScope } from '../hooks/scope.js'
import { describeRejection, select, splitApiVersion } from '../hooks/select.js'
import { PROFILE_KEY, SCOPE_KEY, scopesOf, syncTarget, targetPredicates } from '../hooks/target.js'
import { formatItems, OUTPUTS, type Output } from './format.js'
import { EXIT_INVALID, EXIT_OK, Progress, readInput, UsageError, type Io } from './io.js'
import { describeSyntaxProblem, isObject, objectsOf, parseDocuments } from './objects.js'

export const PREVIEW_USAGE = `Usage: kollect preview --profile FILE --target FILE --objects FILE|-  [options]
       kollect preview --profile FILE --target FILE --kubeconfig FILE [--context NAME]  [options]

Runs a KollectTarget's selection and its KollectProfile's extraction over objects, exactly as
the target sync hook does in the cluster, and prints the items it would export. Nothing is
written anywhere.

Options:
  --profile FILE        YAML or JSON holding the KollectProfile (several documents allowed;
                        the one the target's profileRef names is used)
  --target FILE         YAML or JSON holding the KollectTarget (may be the profile's file)
  --target-name NAME    which KollectTarget, when the file holds several
  --objects FILE|-      the objects, as \`kubectl get -o json\` or \`-o yaml\` prints them (a List,
                        or single objects); - reads stdin
  --kubeconfig FILE     read the objects from the cluster instead, in every namespace the
                        target names (default: its own)
  --context NAME        the kubeconfig context to use (default: the current one)
  --scope FILE          KollectScopes of the target's namespace. Without it the target sees
                        only its own namespace, as in a namespace with no KollectScope
  -o, --output FORMAT   table (default), json or yaml; the summary goes to stderr
  --progress            a progress line on stderr every 1,000 objects (default: when stderr
                        is a terminal)
  -h, --help            show this help

Exit status: 0 every selected object extracted; 1 the profile or target is invalid, or an
object failed extraction; 2 usage error.
`

interface PreviewOptions {
  profile: string
  target: string
  targetName?: string
  objects?: string
  kubeconfig?: string
  context?: string
  scope?: string
  output: Output
  progress?: boolean
}

function parse(argv: string[]): PreviewOptions | 'help' {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: argv,
      options: {
        profile: { type: 'string' },
        target: { type: 'string' },
        'target-name': { type: 'string' },
        objects: { type: 'string' },
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        scope: { type: 'string' },
        output: { type: 'string', short: 'o', default: 'table' },
        progress: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: false,
      strict: true,
    }).values
  } catch (err) {
    throw new UsageError((err as Error).message, true)
  }
  if (values.help) return 'help'
  const str = (k: string) => (typeof values[k] === 'string' ? (values[k] as string) : undefined)
  const profile = str('profile')
  const target = str('target')
  if (!profile) throw new UsageError('--profile FILE is required', true)
  if (!target) throw new UsageError('--target FILE is required', true)
  const output = str('output') as Output
  if (!OUTPUTS.includes(output)) throw new UsageError(`--output must be one of ${OUTPUTS.join(', ')}, got ${JSON.stringify(output)}`, true)
  const objects = str('objects')
  const live = str('kubeconfig') !== undefined || str('context') !== undefined
  if (objects !== undefined && live) throw new UsageError('give --objects, or --kubeconfig/--context to read a cluster, not both', true)
  if (objects === undefined && !live) throw new UsageError('give --objects FILE (- for stdin), or --kubeconfig/--context to read a cluster', true)
  return {
    profile,
    target,
    targetName: str('target-name'),
    objects,
    kubeconfig: str('kubeconfig'),
    context: str('context'),
    scope: str('scope'),
    output,
    progress: values.progress === true ? true : undefined,
  }
}

/** A problem with the user's Kollect files that makes the preview meaningless: exit 1. */
class InvalidInput extends Error {
  constructor(readonly lines: string[]) {
    super(lines[0])
  }
}

/** The Kollect resources of one kind in a file; a YAML syntax error is an invalid input. */
async function kollectResources(file: string, kind: string, io: Io): Promise<KubeObject[]> {
  const text = await readInput(file, io)
  const docs = parseDocuments(text)
  const broken = docs.filter((d) => d.error)
  if (broken.length > 0) throw new InvalidInput(broken.map((d) => `${file}: document ${d.index}: ${describeSyntaxProblem(d.error as { message: string })}`))
  const { objects } = objectsOf(docs.map((d) => d.value))
  return objects.filter((o) => o.apiVersion === API_VERSION && o.kind === kind)
}

const nameOf = (o: KubeObject) => o.metadata?.name ?? ''

export async function runPreview(argv: string[], io: Io): Promise<number> {
  const opts = parse(argv)
  if (opts === 'help') {
    io.stdout.write(PREVIEW_USAGE)
    return EXIT_OK
  }
  try {
    return await preview(opts, io)
  } catch (err) {
    if (!(err instanceof InvalidInput)) throw err
    for (const line of err.lines) io.stderr.write(line + '\n')
    return EXIT_INVALID
  }
}

async function preview(opts: PreviewOptions, io: Io): Promise<number> {
  const notes: string[] = []
  const note = (text: string) => notes.push(`note: ${text}`)

  // ---- the target and its profile ----
  let targets = await kollectResources(opts.target, 'KollectTarget', io)
  if (opts.targetName !== undefined) targets = targets.filter((t) => nameOf(t) === opts.targetName)
  if (targets.length === 0) throw new UsageError(`${opts.target} holds no KollectTarget${opts.targetName !== undefined ? ` named ${opts.targetName}` : ''}`)
  if (targets.length > 1) throw new UsageError(`${opts.target} holds several KollectTargets (${targets.map(nameOf).join(', ')}); pick one with --target-name`)
  const targetObject = structuredClone(targets[0] as KubeObject)
  const namespace = targetObject.metadata?.namespace || 'default'
  if (!targetObject.metadata?.namespace) note(`the KollectTarget has no namespace; previewing it in namespace ${namespace}`)
  targetObject.metadata = { ...targetObject.metadata, namespace, generation: targetObject.metadata?.generation ?? 1 }
  const targetSpec = (isObject(targetObject['spec']) ? targetObject['spec'] : {}) as unknown as KollectTargetSpec
  if (targetSpec.suspend === true) {
    note('the KollectTarget is suspended; previewing it as if it were not')
    delete targetSpec.suspend
  }
  const targetLabel = `KollectTarget ${namespace}/${nameOf(targetObject)}`

  const profiles = await kollectResources(opts.profile, 'KollectProfile', io)
  const wanted = typeof targetSpec.profileRef?.name === 'string' ? targetSpec.profileRef.name : ''
  let profileObject = profiles.find((p) => nameOf(p) === wanted)
  if (!profileObject) {
    if (profiles.length === 1) {
      profileObject = profiles[0] as KubeObject
      note(`the KollectTarget names KollectProfile ${wanted || '(none)'}; previewing with ${nameOf(profileObject)} from ${opts.profile}`)
    } else if (profiles.length === 0) throw new UsageError(`${opts.profile} holds no KollectProfile`)
    else throw new UsageError(`${opts.profile} holds several KollectProfiles (${profiles.map(nameOf).join(', ')}) and none is named ${wanted || '(no profileRef)'}`)
  }
  const profileNamespace = profileObject.metadata?.namespace
  if (profileNamespace && profileNamespace !== namespace) {
    note(`KollectProfile ${nameOf(profileObject)} is in namespace ${profileNamespace}; in the cluster the target looks for it in ${namespace}`)
  }
  const profileSpec = (isObject(profileObject['spec']) ? profileObject['spec'] : {}) as unknown as KollectProfileSpec

  // The profile hook's checks: the schema, then every expression compiled.
  const compiled = compileProfile(profileSpec, DEFAULT_LIMITS)
  const profileProblems = [...specProblems('KollectProfile', profileObject['spec']), ...compiled.problems.map(describeProblem)]
  if (profileProblems.length > 0) {
    throw new InvalidInput([`KollectProfile ${namespace}/${nameOf(profileObject)} is invalid:`, ...[...new Set(profileProblems)].map((p) => `  ${p}`)])
  }

  // ---- scopes ----
  let scopes: KubeObject[] = []
  if (opts.scope !== undefined) {
    const all = await kollectResources(opts.scope, 'KollectScope', io)
    scopes = all.filter((s) => (s.metadata?.namespace || namespace) === namespace)
    if (scopes.length < all.length) note(`${count(all.length - scopes.length, 'KollectScope')} of other namespaces ignored; only those of namespace ${namespace} apply to its targets`)
    if (scopes.length === 0) note(`${opts.scope} holds no KollectScope of namespace ${namespace}`)
  }

  // ---- the objects ----
  const res: ResourceSpec | undefined = isObject(targetSpec.resource) ? targetSpec.resource : undefined
  const resourceKnown = typeof res?.kind === 'string' && typeof res.version === 'string'
  const progress = new Progress(io, opts.progress ?? io.stderrIsTTY)
  let plural: PluralResolution
  let objects: KubeObject[]
  let read: string
  if (opts.objects !== undefined) {
    const text = await readInput(opts.objects, io)
    const docs = parseDocuments(text)
    const broken = docs.find((d) => d.error)
    if (broken) throw new UsageError(`${opts.objects === '-' ? 'stdin' : opts.objects}: document ${broken.index}: ${describeSyntaxProblem(broken.error as { message: string })}`)
    const found = objectsOf(docs.map((d) => d.value))
    objects = found.objects
    read = `${count(objects.length, 'object')} read from ${opts.objects === '-' ? 'stdin' : opts.objects}`
    if (found.ignored > 0) note(`${count(found.ignored, 'document')} that ${found.ignored === 1 ? 'is' : 'are'} not an object ignored`)
    plural = offlinePlural(res)
    if (resourceKnown && plural.source === 'unresolved') note(`the plural of ${res?.kind} is not known offline; in the cluster it is discovered (or set spec.resource.plural)`)
    if (targetSpec.namespaceSelector) note('namespaceSelector is not checked offline: every object read is taken to be in a selected namespace')
  } else {
    const { connect } = await import('./cluster.js')
    const cluster = connect({ kubeconfig: opts.kubeconfig, context: opts.context })
    objects = []
    let where = ''
    if (resourceKnown && res) {
      plural = await cluster.plural(res)
      const namespaces = await liveNamespaces(targetSpec, namespace, isClusterScoped(res, plural), (sel) => cluster.namespaces(sel))
      where = namespaces.length === 1 && namespaces[0] === '' ? 'all namespaces' : `namespaces ${namespaces.join(', ')}`
      for (const ns of namespaces) {
        const before = objects.length
        const page = await cluster.list(res, ns, targetSpec.labelSelector, (n) => progress.update(before + n, 'read'))
        objects.push(...page)
      }
      progress.done()
    } else plural = { plural: null, source: 'unresolved', message: 'spec.resource needs version and kind' }
    read = `${count(objects.length, 'object')} read from the cluster${where ? ` (${where})` : ''}`
  }

  // ---- the request Metacontroller would send ----
  const key = resourceKnown && res ? typeKey(res.group, res.version, res.kind) : ''
  const selected: ObjectMap = {}
  let otherKinds = 0
  let duplicates = 0
  const clusterScoped = res ? isClusterScoped(res, plural) : false
  for (const object of objects) {
    if (!res || !sameType(object, res)) {
      otherKinds++
      continue
    }
    const name = object.metadata?.name ?? ''
    // v2 keys: a bare name for an object without a namespace, whatever the kind resolved as.
    const objectKey = clusterScoped || !object.metadata?.namespace ? name : `${object.metadata.namespace}/${name}`
    if (Object.hasOwn(selected, objectKey)) duplicates++
    selected[objectKey] = object
  }
  if (otherKinds > 0) note(`${count(otherKinds, 'object')} that ${otherKinds === 1 ? 'is' : 'are'} not ${res ? describeType(res) : 'the target\'s kind'} skipped`)
  if (duplicates > 0) note(`${count(duplicates, 'object')} appear more than once; the last copy of each is used`)
  const profileKey = `${namespace}/${wanted || nameOf(profileObject)}`
  const req: SyncRequest = {
    controller: {},
    parent: targetObject,
    children: {},
    related: {
      [PROFILE_KEY]: { [profileKey]: { ...profileObject, metadata: { ...profileObject.metadata, namespace, name: wanted || nameOf(profileObject) } } },
      [SCOPE_KEY]: Object.fromEntries(scopes.map((s) => [`${namespace}/${nameOf(s)}`, { ...s, metadata: { ...s.metadata, namespace } }])),
      ...(key ? { [key]: selected } : {}),
    },
    finalizing: false,
  }

  // ---- the hook itself ----
  const { response, report } = syncTarget(req, { plural, limits: DEFAULT_LIMITS })
  const status = response.status
  const ready = status.conditions?.find((c) => c.type === 'Ready')
  const summary: string[] = [`${targetLabel} (${res && resourceKnown ? describeType(res) : 'no resource'}) with KollectProfile ${namespace}/${nameOf(profileObject)}`, read]
  if (!ready || ready.status !== 'True') {
    const lines = [...summary, `${targetLabel} is not ready: ${ready?.reason ?? 'Unknown'}: ${ready?.message ?? ''}`, ...notes]
    for (const line of lines) io.stderr.write(line + '\n')
    return EXIT_INVALID
  }

  // ---- per attribute: the same objects, extracted one attribute error at a time ----
  const detail = explain(req, targetSpec, namespace, compiled, plural, progress)
  progress.done()
  const items: Item[] = report?.items ?? []
  io.stdout.write(formatItems(items, compiled.attributes.map((a) => a.name), opts.output))

  if (opts.scope === undefined && asksBeyondOwnNamespace(targetSpec, namespace)) {
    note(`no --scope: like a namespace without a KollectScope, the target sees only its own namespace (${namespace}); pass --scope with the namespace's KollectScopes`)
  }
  if (detail.matched !== status.matchedCount) note(`the per-attribute pass matched ${detail.matched} objects, the hook ${status.matchedCount}; please report this`)
  const notSelected = [...detail.notSelected.entries()].sort((a, b) => b[1].count - a[1].count || (a[0] < b[0] ? -1 : 1))
  if (notSelected.length > 0) {
    const total = notSelected.reduce((n, [, b]) => n + b.count, 0)
    summary.push(`not selected: ${total} (${notSelected.map(([why, b]) => `${why}${listNamespaces(b.namespaces)}: ${b.count}`).join(', ')})`)
  }
  summary.push(`matched ${status.matchedCount}, extracted ${status.extractedCount}, failed ${status.failedCount}`)
  if (detail.errors.size > 0) {
    const optional = new Set(compiled.attributes.filter((a) => a.optional).map((a) => a.name))
    summary.push('errors by attribute:')
    for (const [name, e] of detail.errors) summary.push(`  ${name}${optional.has(name) ? ' (optional: the key is left out)' : ''}: ${count(e.count, 'object')}; first: ${e.first}`)
  }
  summary.push(`items: ${items.length}`)
  // Ready first, then any other condition that holds (Degraded).
  for (const c of [ready, ...(status.conditions ?? []).filter((c) => c.type !== 'Ready' && c.status === 'True')]) {
    summary.push(`${c.type}=${c.status} ${c.reason}: ${c.message}`)
  }
  for (const line of [...summary, ...notes]) io.stderr.write(line + '\n')
  return (status.failedCount ?? 0) > 0 ? EXIT_INVALID : EXIT_OK
}

interface Explained {
  matched: number
  /** Why objects were not selected; namespace reasons name the namespaces. */
  notSelected: Map<string, { count: number; namespaces: Set<string> }>
  /** By attribute (profile order), then `matchPolicy` and `item size`. */
  errors: Map<string, { count: number; first: string }>
}

/**
 * The hook reports one joined message per object; a team trying a profile wants each
 * attribute's errors counted. This walks the objects in the hook's order with the hook's own
 * predicates and extractObject, and groups the errors by attribute.
 */
function explain(req: SyncRequest, spec: KollectTargetSpec, namespace: string, profile: CompiledProfile, plural: PluralResolution, progress: Progress): Explained {
  const res = spec.resource
  const scope = effectiveScope(namespace, scopesOf(req, namespace))
  let policy: CelProgram | undefined
  if (spec.matchPolicy !== undefined) {
    const c = compileCel(spec.matchPolicy, DEFAULT_LIMITS)
    if (c.ok) policy = c.program
  }
  const { predicates } = targetPredicates(spec, namespace, scope, isClusterScoped(res, plural), policy)
  const names = new Set(profile.attributes.map((a) => a.name))
  const buckets = new Map<string, { count: number; first: string }>(profile.attributes.map((a) => [a.name, { count: 0, first: '' }]))
  const record = (bucket: string, first: string) => {
    const b = buckets.get(bucket) ?? { count: 0, first: '' }
    if (b.count === 0) b.first = first
    b.count++
    buckets.set(bucket, b)
  }
  const out: Explained = { matched: 0, notSelected: new Map(), errors: new Map() }
  const objects = related(req, typeKey(res.group, res.version, res.kind))
  objects.forEach(({ key, object }, i) => {
    progress.update(i + 1, 'checked', objects.length)
    const input = expressionInput(object, profile.redactor)
    const rejection = select(input, predicates)
    if (rejection !== null) {
      if (rejection.type === 'matchPolicyFailed') record('matchPolicy', `${key}: ${rejection.error}`)
      else {
        const namespace = rejection.type === 'namespaceDenied' || rejection.type === 'namespaceNotSelected' ? rejection.namespace : null
        const bucket = rejection.type === 'namespaceDenied' ? 'namespace is denied by scope' : rejection.type === 'namespaceNotSelected' ? 'namespace is not selected' : describeRejection(rejection)
        const b = out.notSelected.get(bucket) ?? { count: 0, namespaces: new Set<string>() }
        b.count++
        if (namespace !== null) b.namespaces.add(namespace)
        out.notSelected.set(bucket, b)
      }
      return
    }
    out.matched++
    const result = extractObject(input, profile, DEFAULT_LIMITS.maxItemBytes)
    for (const error of result.errors) {
      const colon = error.indexOf(': ')
      const name = colon > 0 ? error.slice(0, colon) : ''
      if (names.has(name)) record(name, `${key}: ${error.slice(colon + 2)}`)
      else record('item size', `${key}: ${error}`)
    }
  })
  for (const [name, b] of buckets) if (b.count > 0) out.errors.set(name, b)
  return out
}

/** Offline there is no discovery: the spec's plural, or the well-known one. */
function offlinePlural(res: ResourceSpec | undefined): PluralResolution {
  if (!res || typeof res.kind !== 'string' || typeof res.version !== 'string') return { plural: null, source: 'unresolved', message: 'spec.resource needs version and kind' }
  if (res.plural) return { plural: res.plural, source: 'spec', namespaced: wellKnownNamespaced(res) }
  const known = wellKnownPlural(res)
  if (known) return { plural: known, source: 'well-known', namespaced: wellKnownNamespaced(res) }
  // Only listing needs the plural, and offline the objects are already listed.
  return { plural: `${res.kind.toLowerCase()}s`, source: 'unresolved' }
}

/** The namespaces Metacontroller would list for the target: '' means all (or cluster-scoped). */
async function liveNamespaces(spec: KollectTargetSpec, own: string, clusterScoped: boolean, bySelector: (s: NonNullable<KollectTargetSpec['namespaceSelector']>) => Promise<string[]>): Promise<string[]> {
  if (clusterScoped) return ['']
  if (spec.namespaceSelector) return bySelector(spec.namespaceSelector)
  const requested = Array.isArray(spec.namespaces) && spec.namespaces.length > 0 ? [...new Set(spec.namespaces)].sort() : [own]
  return requested.includes('*') ? [''] : requested
}

function asksBeyondOwnNamespace(spec: KollectTargetSpec, own: string): boolean {
  if (spec.namespaceSelector) return true
  return Array.isArray(spec.namespaces) && spec.namespaces.some((ns) => ns !== own)
}

function sameType(object: KubeObject, res: ResourceSpec): boolean {
  const [group, version] = splitApiVersion(object.apiVersion ?? '')
  return object.kind === res.kind && group === (res.group ?? '') && version === res.version
}

function describeType(res: ResourceSpec): string {
  return `${res.group ? `${res.group}/` : ''}${res.version} ${res.kind}`
}

function listNamespaces(namespaces: Set<string>): string {
  if (namespaces.size === 0) return ''
  const sorted = [...namespaces].sort()
  return ` (${sorted.slice(0, 3).join(', ')}${sorted.length > 3 ? `, ${sorted.length - 3} more` : ''})`
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`
}
