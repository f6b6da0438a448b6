import { describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { Arrival, ArrivalControl, ArrivalPhase } from '../../../server/extraction/arrival.js'

// A target sync's body as it arrives (server/extraction/arrival.ts): one buffer whose offsets never move.

describe('Arrival', () => {
  test('the bytes so far, in order, whether the length was declared or not', () => {
    for (const declared of [11, undefined]) {
      const a = new Arrival(declared)
      a.push(Buffer.from('{"a":'))
      assert.equal(a.bytes.toString(), '{"a":')
      a.push(Buffer.from('[1,2]}'))
      a.end()
      assert.equal(a.bytes.toString(), '{"a":[1,2]}')
      assert.equal(a.state, 'complete')
    }
  })

  test('undeclared, the buffer doubles: a large body is whole, and what came first stays where it was', () => {
    const a = new Arrival()
    const chunk = Buffer.alloc(300 * 1024, 0x61)
    for (let i = 0; i < 10; i++) a.push(chunk)
    assert.equal(a.length, 3000 * 1024)
    assert.ok(a.bytes.every((c) => c === 0x61))
  })

  test('more(n) waits for n more bytes, or the end; ended() tells a body that came whole from one that failed', async () => {
    const a = new Arrival(10)
    let woke = false
    const waiting = a.more(4).then(() => { woke = true })
    a.push(Buffer.from('ab'))
    await Promise.resolve()
    assert.equal(woke, false, 'two bytes are not four')
    a.push(Buffer.from('cd'))
    await waiting
    assert.equal(woke, true)
    const ending = a.ended()
    a.fail()
    assert.equal(await ending, false)
    a.end()
    assert.equal(a.state, 'failed', 'a failed body stays failed')
    await a.more()
    assert.equal(await Arrival.of(Buffer.from('{}')).ended(), true)
  })
  test('share(): what came is copied to shared memory, later bytes land there, and the control words tell a reader', () => {
    const a = new Arrival(11)
    a.push(Buffer.from('{"a":'))
    const shared = a.share()
    assert.ok(shared)
    assert.equal(a.share()?.buffer, shared.buffer, 'shared once')
    const view = Buffer.from(shared.buffer)
    const control = new Int32Array(shared.control)
    assert.equal(view.subarray(0, 5).toString(), '{"a":')
    assert.equal(Atomics.load(control, ArrivalControl.Filled), 5)
    const seq = Atomics.load(control, ArrivalControl.Seq)
    a.push(Buffer.from('[1,2]}'))
    assert.equal(view.toString(), '{"a":[1,2]}')
    assert.equal(a.bytes.toString(), '{"a":[1,2]}', 'the arrival reads the shared buffer too')
    assert.equal(Atomics.load(control, ArrivalControl.Filled), 11)
    assert.ok(Atomics.load(control, ArrivalControl.Seq) > seq)
    assert.equal(Atomics.load(control, ArrivalControl.Phase), ArrivalPhase.Arriving)
    a.end()
    assert.equal(Atomics.load(control, ArrivalControl.Phase), ArrivalPhase.Complete)
    const failed = new Arrival(4)
    const control2 = new Int32Array(failed.share()?.control as SharedArrayBuffer)
    failed.fail()
    assert.equal(Atomics.load(control2, ArrivalControl.Phase), ArrivalPhase.Failed)
  })

  test('share(): not for a body of undeclared length, nor one that has ended', () => {
    assert.equal(new Arrival().share(), undefined)
    const a = new Arrival(2)
    a.push(Buffer.from('{}'))
    a.end()
    assert.equal(a.share(), undefined)
  })
})
