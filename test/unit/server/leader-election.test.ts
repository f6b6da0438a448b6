import { test } from 'node:test'
import assert from 'node:assert/strict'
import type * as k8s from '@kubernetes/client-node'
import { LeaderElector, type LeaseApi } from '../../../server/cluster/leader.js'
import type { LeaseSettings } from '../../../server/process/config.js'
import type { FencingToken } from '../../../sinks/fence.js'
import { createLogger } from '../../../server/process/logger.js'

// The elector's timing against a Lease held in memory with the API server's one rule that matters
// here: a write carrying a stale resourceVersion is refused. Lease times are on a clock the test
// moves, so a "pause" is a jump of that clock in the middle of a request.

class LeaseStore implements LeaseApi {
  lease: k8s.V1Lease | null = null
  reads = 0
  /** Runs inside the next read, before it answers: what happens while the reader is paused. */
  duringRead: (() => void) | null = null
  private version = 0

  async read(): Promise<k8s.V1Lease | null> {
    this.reads++
    const during = this.duringRead
    this.duringRead = null
    during?.()
    return this.lease ? structuredClone(this.lease) : null
  }

  async create(lease: k8s.V1Lease): Promise<k8s.V1Lease | null> {
    if (this.lease) return null
    return this.store(lease)
  }

  async replace(lease: k8s.V1Lease): Promise<k8s.V1Lease | null> {
    if (lease.metadata?.resourceVersion !== this.lease?.metadata?.resourceVersion) return null
    return this.store(lease)
  }

  /** Another holder renews, as its own elector would. */
  renewBy(holder: string): void {
    this.store({ metadata: this.lease?.metadata ?? {}, spec: { holderIdentity: holder, leaseDurationSeconds: 4, renewTime: `renewal ${this.version}` as unknown as Date } })
  }

  get holder(): string | undefined {
    return this.lease?.spec?.holderIdentity
  }

  private store(lease: k8s.V1Lease): k8s.V1Lease {
    this.lease = { ...structuredClone(lease), metadata: { ...lease.metadata, name: 'kollect-exporter', uid: 'lease-uid', resourceVersion: String(++this.version) } }
    return structuredClone(this.lease)
  }
}

/** A 4 s lease; retries every 5 real ms, so rounds come quickly while the lease clock stands still. */
const SETTINGS: LeaseSettings = { name: 'kollect-exporter', namespace: 'kollect-system', identity: 'exporter-b', durationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 5 }

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((r) => setTimeout(r, 1))
  }
}

test('a candidate paused inside its Lease read does not take a Lease its holder renewed during the pause', { timeout: 20_000 }, async (t) => {
  const store = new LeaseStore()
  store.renewBy('exporter-a')
  let now = 0
  const elector = new LeaderElector(store, SETTINGS, { onStartedLeading: () => undefined, onStoppedLeading: () => undefined }, createLogger('silent', 'test'), () => now)
  t.after(() => elector.stop())
  elector.start()
  await until(() => store.reads >= 2, 'the candidate has seen the record')

  // The candidate asks, then is stopped for 10 s; meanwhile the holder renews, so the answer is
  // a record renewed just now.
  store.duringRead = () => {
    now += 10_000
    store.renewBy('exporter-a')
  }
  await until(() => store.duringRead === null, 'the paused read')
  const readsAfterPause = store.reads
  await until(() => store.reads >= readsAfterPause + 5, 'five rounds after the pause')
  assert.equal(store.holder, 'exporter-a', 'the Lease stays with the holder that renewed 0 ms ago on the candidate clock')
  assert.equal(elector.isLeader, false)

  // The same candidate does take it once the holder really stops renewing for the lease duration.
  now += 4_001
  await until(() => elector.isLeader, 'the candidate takes the expired Lease')
  assert.equal(store.holder, 'exporter-b')
})

test('a renewal reports when its round began, so a round paused in flight proves nothing later', { timeout: 20_000 }, async (t) => {
  const store = new LeaseStore()
  let now = 1_000
  const renewals: number[] = []
  const elector = new LeaderElector(store, SETTINGS, {
    onStartedLeading: () => undefined, onStoppedLeading: () => undefined, onRenewed: (at) => renewals.push(at),
  }, createLogger('silent', 'test'), () => now)
  t.after(() => elector.stop())
  elector.start()
  await until(() => renewals.length >= 1, 'the acquisition')
  assert.equal(renewals[0], 1_000)

  // The next round begins at 2000 and its read takes until 4500.
  const before = renewals.length
  now = 2_000
  store.duringRead = () => { now += 2_500 }
  await until(() => renewals.length > before, 'the paused renewal')
  assert.equal(renewals[before], 2_000, 'the paused round counts from when it began')
})

test('the fencing token is the Lease uid and its transition count: a takeover counts one more, renewals keep it', { timeout: 20_000 }, async (t) => {
  const store = new LeaseStore()
  store.renewBy('exporter-a')
  store.lease!.spec!.leaseTransitions = 4
  let now = 0
  const tokens: (FencingToken | undefined)[] = []
  const elector = new LeaderElector(store, SETTINGS, {
    onStartedLeading: () => undefined, onStoppedLeading: () => undefined, onRenewed: (_at, token) => tokens.push(token),
  }, createLogger('silent', 'test'), () => now)
  t.after(() => elector.stop())
  elector.start()
  await until(() => store.reads >= 2, 'the candidate has seen the record')
  now += 4_001
  await until(() => tokens.length >= 3, 'the takeover and two renewals')
  assert.deepEqual(tokens.slice(0, 3), [{ lease: 'lease-uid', epoch: 5 }, { lease: 'lease-uid', epoch: 5 }, { lease: 'lease-uid', epoch: 5 }])
  assert.equal(store.lease?.spec?.leaseTransitions, 5)
})
