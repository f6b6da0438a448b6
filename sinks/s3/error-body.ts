import { Readable } from 'node:stream'
import type { S3Client } from '@aws-sdk/client-s3'
import { EXTERNAL_TEXT_LIMIT } from '../errors.js'

// The SDK reads an error answer whole and parses it in the event loop every tenant shares: an
// endpoint answering 403 with megabytes of <Message> held the loop for a quarter of a second per
// request (issue 24 F3), and a larger one would hold memory too. So an error body is read up to
// ERROR_BODY_LIMIT only; a longer one becomes an error document with its Code and the start of
// its Message, which is all that a status message shows.

/** Far above any error document an S3 server writes (a few hundred bytes). */
const ERROR_BODY_LIMIT = 64 * 1024

/** Install the bound on `client`: innermost in the deserialize step, so before the SDK's parser. */
export function boundErrorBodies(client: S3Client): void {
  client.middlewareStack.add((next) => async (args) => {
    const out = await next(args)
    const response = out.response as { statusCode?: number; body?: unknown }
    if ((response.statusCode ?? 0) >= 300 && response.body instanceof Readable) response.body = await boundedBody(response.body)
    return out
  }, { step: 'deserialize', priority: 'low', name: 'kollectBoundedErrorBody' })
}

async function boundedBody(body: Readable): Promise<Uint8Array> {
  const chunks: Buffer[] = []
  let size = 0
  // Leaving the loop early destroys the stream: the rest is never read.
  for await (const chunk of body as AsyncIterable<Buffer>) {
    chunks.push(chunk)
    size += chunk.length
    if (size > ERROR_BODY_LIMIT) break
  }
  const head = Buffer.concat(chunks)
  if (size <= ERROR_BODY_LIMIT) return head
  const xml = head.subarray(0, ERROR_BODY_LIMIT).toString('utf8')
  const code = element(xml, 'Code', 256)
  const message = element(xml, 'Message', EXTERNAL_TEXT_LIMIT)
  return Buffer.from(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`)
}

/** The start of an element's text, still XML-escaped, without an entity the cut would break; "…" when cut. */
function element(xml: string, name: string, limit: number): string {
  const open = xml.indexOf(`<${name}>`)
  if (open < 0) return ''
  const from = open + name.length + 2
  const close = xml.indexOf(`</${name}>`, from)
  const end = close < 0 ? xml.length : close
  let text = xml.slice(from, Math.min(end, from + limit))
  const amp = text.lastIndexOf('&')
  if (amp >= 0 && !text.includes(';', amp)) text = text.slice(0, amp)
  // Text only: a nested element or a cut tag would make the document unparsable.
  const lt = text.indexOf('<')
  if (lt >= 0) text = text.slice(0, lt)
  return text.length < end - from ? `${text}…` : text
}
