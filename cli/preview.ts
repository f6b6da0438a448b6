import { specProblems } from '../api/crd-schemas.js'
import { API_VERSION, type Condition, type Item, type KollectProfileSpec, type KollectTargetSpec, type KubeObject, type ResourceSpec } from '../api/types.js'
import { DEFAULT_LIMITS } from '../hooks/limits.js'
import { isClusterScoped, type PluralResolution } from '../hooks/plural.js'
import { compileProfile, describeProblem } from '../hooks/profile.js'
import { namespacesToRead } from '../hooks/selection.js'
import { formatItems } from './format.js'
import { EXIT_INVALID, EXIT_OK, Progress, readInput, UsageError, type Io } from './io.js'
import { describeSyntaxProblem, isObject, objectsOf, parseDocuments, type ParsedDocument } from './objects.js'
import { explain, notSelectedLine } from './preview-explain.js'
import { parsePreviewArgs, PREVIEW_USAGE, type PreviewOptions } from './preview-options.js'
import { describeType, offlinePlural, previewSync } from './preview-sync.js'

/** A problem with the user's Kollect files that makes the preview meaningless: exit 1. */
class InvalidInput extends Error {
  constructor(readonly lines: string[]) {
    super(lines[0])
  }
}

/** A file's documents; a YAML syntax error is an invalid input (exit 1, as in validate), not a usage error. */
function parseOrRefuse(label: string, text: string): ParsedDocument[] {
  const docs = parseDocuments(text)
  const broken = docs.filter((d) => d.error)
  if (broken.length > 0) throw new InvalidInput(broken.map((d) => `${label}: document ${d.index}: ${describeSyntaxProblem(d.error as { message: string })}`))
  return docs
}

/** The Kollect resources of one kind in a file. */
async function kollectResources(file: string, kind: string, io: Io): Promise<KubeObject[]> {
  const docs = parseOrRefuse(file, await readInput(file, io))
  const { objects } = objectsOf(docs.map((d) => d.value))
  return objects.filter((o) => o.apiVersion === API_VERSION && o.kind === kind)
}

const nameOf = (o: KubeObject) => o.metadata?.name ?? ''

export async function runPreview(argv: string[], io: Io): Promise<number> {
  const opts = parsePreviewArgs(argv)
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
    else {
      throw new UsageError(`${opts.profile} holds several KollectProfiles (${profiles.map(nameOf).join(', ')}) ` +
        `and none is named ${wanted || '(no profileRef)'}`)
    }
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
    if (scopes.length < all.length) {
      note(`${count(all.length - scopes.length, 'KollectScope')} of other namespaces ignored; only those of namespace ${namespace} apply to its targets`)
    }
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
    const docs = parseOrRefuse(opts.objects === '-' ? 'stdin' : opts.objects, await readInput(opts.objects, io))
    const found = objectsOf(docs.map((d) => d.value))
    objects = found.objects
    read = `${count(objects.length, 'object')} read from ${opts.objects === '-' ? 'stdin' : opts.objects}`
    if (found.ignored > 0) note(`${count(found.ignored, 'document')} that ${found.ignored === 1 ? 'is' : 'are'} not an object ignored`)
    plural = offlinePlural(res)
    if (resourceKnown && plural.source === 'unresolved') {
      note(`the plural of ${res?.kind} is not known offline; in the cluster it is discovered (or set spec.resource.plural)`)
    }
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

  // ---- the hook itself, on the request Metacontroller would send ----
  const { response, report, outcomes, otherKinds, duplicates } = previewSync({
    target: targetObject, profile: profileObject, scopes, objects, plural,
    progress: (done, total) => progress.update(done, 'checked', total),
  })
  progress.done()
  if (otherKinds > 0) {
    note(`${count(otherKinds, 'object')} that ${otherKinds === 1 ? 'is' : 'are'} not ${res ? describeType(res) : 'the target\'s kind'} skipped`)
  }
  if (duplicates > 0) note(`${count(duplicates, 'object')} appear more than once; the last copy of each is used`)
  const status = response.status as { matchedCount: number; extractedCount: number; failedCount: number; conditions: Condition[] }
  const ready = status.conditions.find((c) => c.type === 'Ready')
  const typeLabel = res && resourceKnown ? describeType(res) : 'no resource'
  const summary: string[] = [`${targetLabel} (${typeLabel}) with KollectProfile ${namespace}/${nameOf(profileObject)}`, read]
  if (!ready || ready.status !== 'True') {
    const lines = [...summary, `${targetLabel} is not ready: ${ready?.reason ?? 'Unknown'}: ${ready?.message ?? ''}`, ...notes]
    for (const line of lines) io.stderr.write(line + '\n')
    return EXIT_INVALID
  }

  const detail = explain(outcomes, compiled)
  const items: Item[] = report?.items ?? []
  io.stdout.write(formatItems(items, compiled.attributes.map((a) => a.name), opts.output))

  if (opts.scope === undefined && asksBeyondOwnNamespace(targetSpec, namespace)) {
    note(`no --scope: like a namespace without a KollectScope, the target sees only its own namespace (${namespace}); ` +
      'pass --scope with the namespace\'s KollectScopes')
  }
  const notSelected = notSelectedLine(detail)
  if (notSelected !== null) summary.push(notSelected)
  summary.push(`matched ${status.matchedCount}, extracted ${status.extractedCount}, failed ${status.failedCount}`)
  if (detail.errors.size > 0) {
    const optional = new Set(compiled.attributes.filter((a) => a.optional).map((a) => a.name))
    summary.push('errors by attribute:')
    for (const [name, e] of detail.errors) {
      summary.push(`  ${name}${optional.has(name) ? ' (optional: the key is left out)' : ''}: ${count(e.count, 'object')}; first: ${e.first}`)
    }
  }
  summary.push(`items: ${items.length}`)
  // Ready first, then any other condition that holds (Degraded).
  for (const c of [ready, ...status.conditions.filter((c) => c.type !== 'Ready' && c.status === 'True')]) {
    summary.push(`${c.type}=${c.status} ${c.reason}: ${c.message}`)
  }
  for (const line of [...summary, ...notes]) io.stderr.write(line + '\n')
  return status.failedCount > 0 ? EXIT_INVALID : EXIT_OK
}

/** The namespaces Metacontroller would list for the target, as customize asks: '' means all. */
async function liveNamespaces(
  spec: KollectTargetSpec, own: string, clusterScoped: boolean,
  bySelector: (s: NonNullable<KollectTargetSpec['namespaceSelector']>) => Promise<string[]>,
): Promise<string[]> {
  const read = namespacesToRead(spec, own, clusterScoped)
  if ('selector' in read) return bySelector(read.selector)
  return 'names' in read ? read.names : ['']
}

function asksBeyondOwnNamespace(spec: KollectTargetSpec, own: string): boolean {
  if (spec.namespaceSelector) return true
  return Array.isArray(spec.namespaces) && spec.namespaces.some((ns) => ns !== own)
}

function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`
}
