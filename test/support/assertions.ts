import assert from 'node:assert/strict'
import { SinkError } from '../../sinks/sink.js'

/** The SinkError a promise rejects with; fails the test when it resolves or rejects with anything else. */
export async function rejection(promise: Promise<unknown>): Promise<SinkError> {
  try {
    await promise
  } catch (err) {
    assert.ok(err instanceof SinkError, `expected a SinkError, got ${String(err)}`)
    return err
  }
  assert.fail('expected a rejection')
}
