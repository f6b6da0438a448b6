import type { Snapshot } from '../../../api/types.js'
import { sinkFailure, type SinkLabel } from '../../errors.js'
import { emptyResult, SinkError, type WriteResult } from '../../sink.js'
import { reviewBranch, reviewText, type GitSettings, type ReviewSettings, type ReviewSubject } from '../config.js'
import type { GitRepository } from '../service.js'
import { giteaProvider } from './gitea.js'
import { githubProvider } from './github.js'
import { createGitLabProvider } from './gitlab.js'
import { ReviewError, type ReviewProvider, type ReviewRequest } from './provider.js'

// Review mode of the git sink: an export that changes the record is committed on the target
// branch's tip, force-pushed to the inventory's review branch and proposed as one merge or pull
// request, which a later write of the same snapshot polls until the target branch holds it.

/** Per forge request; a forge slower than this is retried like any transient failure. */
const FORGE_TIMEOUT_MS = 10_000

const REASONS: Record<ReviewError['kind'], string> = {
  auth: 'the forge refused the token; check the token key of the sink secret',
  forbidden: 'the token may not do this: a protected branch, or a missing scope or permission',
  'not-found': 'the forge does not know the project or request; check review.project and review.apiUrl',
  invalid: 'the forge refused the request',
  transient: 'the forge did not answer; retrying',
}

export function createReviewProvider(review: ReviewSettings, checkEndpoint: (url: string) => Promise<string | null>): ReviewProvider {
  const endpoint = { apiUrl: review.apiUrl, project: review.project, token: review.token, checkEndpoint, timeoutMs: FORGE_TIMEOUT_MS }
  if (review.provider === 'gitlab') return createGitLabProvider(endpoint)
  return review.provider === 'github' ? githubProvider(endpoint) : giteaProvider(endpoint)
}

/** An export the sink staged on the target branch's tip, not committed yet. */
export interface StagedExport {
  message: string[]
  result: WriteResult
  /** Names the snapshot the files were rendered from. */
  rendered: string
}

/** A request this process opened or updated: which snapshot it proposes, and at which commit. */
interface Proposal {
  id: string
  rendered: string
  sha: string
}

export class ReviewFlow {
  // In memory only: after a restart a request closed without merging is replaced at once, as at a change.
  private readonly proposals = new Map<string, Proposal>()

  constructor(
    private readonly git: GitSettings,
    private readonly review: ReviewSettings,
    private readonly provider: ReviewProvider,
    private readonly repo: GitRepository,
    private readonly sink: SinkLabel,
  ) {}

  /**
   * Proposes `staged` (the working tree at the target's tip with the snapshot staged), or learns
   * what became of the request that proposes it. No `staged`: the target holds the snapshot.
   */
  async propose(snapshot: Snapshot, staged: StagedExport | undefined): Promise<WriteResult> {
    const branch = this.branchOf(subjectOf(snapshot))
    if (!staged) {
      this.proposals.delete(branch)
      return emptyResult()
    }
    const last = this.proposals.get(branch)
    if (last?.rendered === staged.rendered) {
      const req = await this.forge('read the request', () => this.provider.get(last.id))
      if (req.state === 'closed') {
        throw new SinkError(
          `${this.sink.kind} sink ${this.sink.id}: review request ${req.url} was closed without merging; the next change of the inventory opens a new one`,
          { retriable: false },
        )
      }
      if (req.state === 'open') return this.settle(branch, req, last, emptyResult())
      // Merged, yet the target lacks the snapshot: the target moved on since. Propose again on its tip.
    }
    const sha = await this.pushProposal(branch, staged.message)
    const text = reviewText(this.review, { ...subjectOf(snapshot), ...staged.result, checksum: snapshot.checksum })
    const { targetBranch } = this.review
    const req = await this.forge('open or update the request', async () => {
      const open = await this.provider.findOpen(branch, targetBranch)
      return open ? this.provider.update(open.id, text) : this.provider.open(branch, targetBranch, text)
    })
    const proposal: Proposal = { id: req.id, rendered: staged.rendered, sha }
    this.proposals.set(branch, proposal)
    const { added, changed, removed } = staged.result
    return this.settle(branch, req, proposal, { added, changed, removed })
  }

  /** deletionPolicy Delete: close the inventory's open request and delete its review branch. */
  async withdraw(subject: ReviewSubject): Promise<void> {
    const branch = this.branchOf(subject)
    await this.forge('close the request', async () => {
      const open = await this.provider.findOpen(branch, this.review.targetBranch)
      if (open) await this.provider.close(open.id)
      await this.provider.deleteBranch(branch)
    })
    this.proposals.delete(branch)
  }

  private branchOf(subject: ReviewSubject): string {
    return reviewBranch(this.review, subject, this.sink)
  }

  /** Commits the staged export on the target's tip and puts it on the review branch; its sha. */
  private async pushProposal(branch: string, message: string[]): Promise<string> {
    const [base, existing] = await Promise.all([this.repo.objectId('', 'HEAD'), this.repo.remoteBranch(branch)])
    await this.repo.commit(message)
    // The same files on the same base are proposed already (a restart, or an answer lost on the
    // way): keep that commit, so reviewers see no new push.
    if (existing !== '') {
      const [mine, theirs, theirBase] = await Promise.all([
        this.repo.objectId('', 'HEAD'), this.repo.objectId('', existing), this.repo.objectId('', `${existing}^`),
      ])
      if (mine === theirs && theirBase === base) return existing
    }
    // Forced: the review branch is the sink's own, rebuilt on the target's tip at every change.
    if ((await this.repo.push(`+HEAD:refs/heads/${branch}`)) === 'rejected') {
      throw new SinkError(`${this.sink.kind} sink ${this.sink.id}: push to review branch ${branch} lost a race; retrying`, { retriable: true })
    }
    return this.repo.head()
  }

  /** With autoMerge, merges if the forge allows it and the head is still ours; else the request stays open. */
  private async settle(branch: string, req: ReviewRequest, proposal: Proposal, result: WriteResult): Promise<WriteResult> {
    if (this.review.autoMerge === 'whenChecksPass') {
      const outcome = await this.forge('merge the request', () => this.provider.merge(req.id, proposal.sha))
      if (outcome === 'merged') {
        this.proposals.delete(branch)
        return result
      }
      // Someone else pushed to the review branch: the next poll proposes the snapshot again.
      if (outcome === 'stale') this.proposals.delete(branch)
    }
    return { ...result, review: { url: req.url, pollMs: this.review.pollMs } }
  }

  private async forge<T>(action: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      const kind = err instanceof ReviewError ? err.kind : 'transient'
      throw sinkFailure(this.sink, `review: ${action} (${REASONS[kind]})`, err, kind === 'transient', this.git.secrets)
    }
  }
}

function subjectOf(snapshot: Snapshot): ReviewSubject {
  return { cluster: snapshot.cluster, namespace: snapshot.inventory.namespace, name: snapshot.inventory.name }
}
