import { specProblems } from '../api/crd-schemas.js'
import { MAX_DURATION_MS, MAX_RETENTION_MS, durationProblem } from '../api/duration.js'
import { BROKER_RULE, parseBroker } from '../api/kafka-brokers.js'
import { reviewApiUrlProblem, reviewProjectProblem } from '../api/review-checks.js'
import { API_VERSION, type KollectSinkSpec, type SinkCheck, type SinkStatus } from '../api/types.js'
import { condition } from './conditions.js'
import { parentGeneration, parentRef, parentSpec, type CustomizeRequest, type CustomizeResponse, type SyncRequest, type SyncResponse } from './request.js'
import { effectiveScope, scopesOf, secretDenial } from './scope.js'

export interface SinkPolicy {
  /** Checks an endpoint URL against the SSRF guard; returns a reason when refused. */
  checkEndpoint(url: string): string | null
}

const PLACEHOLDER = /\{([^}]*)\}/g
const PATH_PLACEHOLDERS = new Set(['cluster', 'namespace', 'name'])

/** Static checks of a sink's configuration; reachability shows in the inventories that use it. */
export function sinkProblems(spec: KollectSinkSpec, policy: SinkPolicy): string[] {
  const invalid = specProblems('KollectSink', spec)
  if (invalid.length > 0) return invalid
  const problems: string[] = []
  // CRD CEL rules, re-checked for clusters whose admission was bypassed.
  for (const block of ['file', 'git', 'postgres', 'nats', 's3', 'kafka'] as const) {
    if (block !== spec.type && spec[block] !== undefined) problems.push(`spec.${block}: only the settings of type ${spec.type} may be set`)
  }
  if (spec.type === 'nats' && !spec.nats?.url) problems.push('spec.nats.url: a nats sink needs a url')
  if (spec.type === 'kafka') problems.push(...kafkaProblems(spec, policy))
  const template = spec.type === 'git' ? spec.git?.path : spec.type === 'file' ? spec.file?.path : undefined
  if (template !== undefined) {
    for (const m of template.matchAll(PLACEHOLDER)) {
      if (!PATH_PLACEHOLDERS.has(m[1] as string)) problems.push(`spec.${spec.type}.path: unknown placeholder {${m[1]}}`)
    }
    if (template.startsWith('/') || template.split(/[\\/]/).includes('..')) problems.push(`spec.${spec.type}.path: must be relative and must not contain ".."`)
    if (template.includes('\0')) problems.push(`spec.${spec.type}.path: must not contain NUL`)
  }
  if (spec.type === 'postgres' && !spec.secretRef) problems.push('spec.secretRef: a postgres sink reads its DSN from a Secret')
  const endpoints = spec.type === 'git' ? { 'git.url': spec.git?.url, 'git.review.apiUrl': spec.git?.review?.apiUrl }
    : spec.type === 'nats' ? { 'nats.url': spec.nats?.url } : {}
  for (const [field, url] of Object.entries(endpoints)) {
    const refused = url ? policy.checkEndpoint(url) : null
    if (refused) problems.push(`spec.${field}: ${refused}`)
  }
  problems.push(...s3Problems(spec, policy))
  problems.push(...durationProblems(spec))
  problems.push(...reviewProblems(spec))
  return problems
}

/** The CRD's maxima on durations: a week for what the exporter waits, ten years for retention. */
function durationProblems(spec: KollectSinkSpec): string[] {
  const fields: [string, unknown, number][] = [
    ['spec.drift.interval', spec.drift?.interval, MAX_DURATION_MS],
    ['spec.git.review.pollInterval', spec.git?.review?.pollInterval, MAX_DURATION_MS],
    ['spec.postgres.snapshotMaxAge', spec.postgres?.snapshotMaxAge, MAX_RETENTION_MS],
    ['spec.nats.maxAge', spec.nats?.maxAge, MAX_RETENTION_MS],
  ]
  return fields.flatMap(([field, text, max]) => {
    const problem = text === undefined ? null : durationProblem(field, text, max)
    return problem ? [problem] : []
  })
}

/** What the exporter would refuse in git.review anyway: said here, before the sink is called Valid. */
function reviewProblems(spec: KollectSinkSpec): string[] {
  const review = spec.type === 'git' ? spec.git?.review : undefined
  if (!review) return []
  const apiUrl = reviewApiUrlProblem((review.apiUrl ?? '').trim())
  const project = reviewProjectProblem(review.provider, (review.project ?? '').trim())
  return [...(apiUrl ? [`spec.git.review.apiUrl: ${apiUrl}`] : []), ...(project ? [`spec.git.review.project: ${project}`] : [])]
}

/** The s3 sink's own rules: the CRD's CEL rules again, and the SSRF guard on the endpoint. */
function s3Problems(spec: KollectSinkSpec, policy: SinkPolicy): string[] {
  if (spec.type !== 's3') return []
  const problems: string[] = []
  if (!spec.s3?.bucket) problems.push('spec.s3.bucket: an s3 sink needs a bucket')
  if (!spec.secretRef) problems.push('spec.secretRef: an s3 sink reads its access keys from a Secret')
  const prefix = spec.s3?.prefix
  if (prefix !== undefined) {
    for (const m of prefix.matchAll(PLACEHOLDER)) {
      if (!PATH_PLACEHOLDERS.has(m[1] as string)) problems.push(`spec.s3.prefix: unknown placeholder {${m[1]}}`)
    }
    if (prefix.startsWith('/') || prefix.split('/').includes('..')) problems.push('spec.s3.prefix: must be relative and must not contain ".."')
  }
  const refused = spec.s3?.endpoint ? policy.checkEndpoint(spec.s3.endpoint) : null
  if (refused) problems.push(`spec.s3.endpoint: ${refused}`)
  return problems
}

/** Each bootstrap broker must be host:port, and pass the SSRF guard. */
function kafkaProblems(spec: KollectSinkSpec, policy: SinkPolicy): string[] {
  const brokers = (spec.kafka?.brokers ?? '').split(',').map((b) => b.trim()).filter((b) => b !== '')
  if (brokers.length === 0) return ['spec.kafka.brokers: a kafka sink needs at least one broker']
  const problems: string[] = []
  for (const broker of brokers) {
    if (!parseBroker(broker)) {
      problems.push(`spec.kafka.brokers: "${broker}" ${BROKER_RULE}`)
      continue
    }
    const refused = policy.checkEndpoint(`kafka://${broker}/`)
    if (refused) problems.push(`spec.kafka.brokers: ${refused}`)
  }
  if (spec.kafka?.stateTopic !== undefined && spec.kafka.stateTopic === (spec.kafka.topic ?? 'kollect')) {
    problems.push('spec.kafka.stateTopic: must differ from the topic')
  }
  return problems
}

/** The sink's own namespace's scopes: they decide whether its secretRef may leave the namespace. */
export function customizeSink(req: CustomizeRequest): CustomizeResponse {
  const { namespace } = parentRef(req.parent)
  return { relatedResources: [{ apiVersion: API_VERSION, resource: 'kollectscopes', namespace, labelSelector: {} }] }
}

export interface SinkReview {
  /** Configuration problems (InvalidConfig). */
  problems: string[]
  /** Why the sink may not use its Secret (ScopeSecretDenied), or null. */
  secretDenied: string | null
}

/** Everything the sink sync decides before anything is contacted or read. */
export function reviewSink(req: SyncRequest, policy: SinkPolicy): SinkReview {
  const sink = parentRef(req.parent)
  const spec = parentSpec<KollectSinkSpec>(req.parent)
  const scope = effectiveScope(sink.namespace, scopesOf(req, sink.namespace))
  return { problems: sinkProblems(spec, policy), secretDenied: secretDenial(sink, spec.secretRef, scope) }
}

/** Only a valid sink that may use its Secret is checked for reachability. */
export function mayCheck(review: SinkReview): boolean {
  return review.problems.length === 0 && review.secretDenied === null
}

/**
 * Ready says whether the configuration is valid and its Secret allowed; Reachable, when the
 * server checked, whether the sink answered its healthcheck. An unreachable sink is still Ready:
 * exports wait and retry.
 */
export function syncSink(req: SyncRequest, policy: SinkPolicy, check?: SinkCheck): SyncResponse<SinkStatus> {
  return sinkSyncResponse(req, reviewSink(req, policy), check)
}

/** The same, for a caller that already reviewed the sink (to decide whether to check). */
export function sinkSyncResponse(req: SyncRequest, review: SinkReview, check?: SinkCheck): SyncResponse<SinkStatus> {
  const generation = parentGeneration(req.parent)
  const { problems, secretDenied } = review
  const conditions = [secretDenied !== null
    ? condition('Ready', false, 'ScopeSecretDenied', [secretDenied, ...problems].join('; '), generation)
    : problems.length === 0
      ? condition('Ready', true, 'Valid', 'configuration is valid', generation)
      : condition('Ready', false, 'InvalidConfig', problems.join('; '), generation)]
  if (check) {
    conditions.push(check.reachable
      ? condition('Reachable', true, 'Reachable', 'the sink answered its healthcheck', generation)
      : condition('Reachable', false, 'Unreachable', check.message, generation))
  }
  // Ready first, then Reachable: a fixed order, so the status stays byte-identical.
  return { status: { observedGeneration: generation, conditions }, children: [] }
}
