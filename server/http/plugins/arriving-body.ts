import type { FastifyRequest } from 'fastify'
import fastify from 'fastify'
import { Arrival } from '../../extraction/arrival.js'

const { FST_ERR_CTP_BODY_TOO_LARGE, FST_ERR_CTP_INVALID_CONTENT_LENGTH } = fastify.errorCodes

/**
 * A content-type parser that gives the route the body's raw bytes, as Fastify's parseAs
 * 'buffer' does (the route's body limit, a Content-Length that must match), and gives started
 * the body's Arrival before its first byte, so that the route's work on it can begin while the
 * rest comes. onChunk sees each chunk as it comes.
 */
export function arrivingBody(started: (request: FastifyRequest, arrival: Arrival) => void, onChunk?: (request: FastifyRequest, chunk: Buffer) => void) {
  return (request: FastifyRequest, payload: NodeJS.ReadableStream, done: (err: Error | null, body?: Buffer) => void): void => {
    const limit = request.routeOptions.bodyLimit ?? Infinity
    const declared = Number(request.headers['content-length'])
    const expected = Number.isNaN(declared) ? undefined : declared
    if (expected !== undefined && expected > limit) return done(new FST_ERR_CTP_BODY_TOO_LARGE())
    // A declared length the process cannot reserve (a strict overcommit policy) is read as one undeclared.
    let arrival: Arrival
    try {
      arrival = new Arrival(expected)
    } catch {
      arrival = new Arrival()
    }
    started(request, arrival)
    const stop = (err: Error) => {
      payload.removeListener('data', onData)
      payload.removeListener('end', onEnd)
      payload.removeListener('error', onEnd)
      arrival.fail()
      done(err)
    }
    const onData = (chunk: Buffer | string) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
      if (arrival.length + bytes.length > limit) return stop(new FST_ERR_CTP_BODY_TOO_LARGE())
      onChunk?.(request, bytes)
      arrival.push(bytes)
    }
    const onEnd = (err?: Error & { statusCode?: number }) => {
      if (err) {
        if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400
        return stop(err)
      }
      if (expected !== undefined && arrival.length !== expected) return stop(new FST_ERR_CTP_INVALID_CONTENT_LENGTH())
      payload.removeListener('data', onData)
      payload.removeListener('error', onEnd)
      arrival.end()
      done(null, arrival.bytes)
    }
    payload.on('data', onData)
    payload.on('end', onEnd)
    // A connection gone without an error still ends what waits on the arrival.
    payload.once('close', () => arrival.fail())
    payload.on('error', onEnd)
    payload.resume()
  }
}
