// Every error the HTTP surface returns, in one place: a code, an HTTP status and a message
// template. docs/operations.md lists them all; test/cli/docs.test.ts keeps the two in step.
export const ERRORS = {
  KOLLECT_ERR_HOOK_BAD_JSON: { status: 400, message: 'request body is not valid JSON: %s' },
  KOLLECT_ERR_HOOK_BAD_REQUEST: { status: 400, message: 'request does not match the hook contract: %s' },
  KOLLECT_ERR_HOOK_BAD_CONTENT_TYPE: { status: 415, message: 'request body must be application/json' },
  KOLLECT_ERR_HOOK_BODY_TOO_LARGE: { status: 413, message: 'request body is larger than the limit of %s bytes' },
  KOLLECT_ERR_HOOK_TOO_DEEP: { status: 400, message: 'request body nests deeper than the limit of %s levels' },
  KOLLECT_ERR_HOOK_UNAUTHORIZED: { status: 401, message: 'unauthorized' },
  KOLLECT_ERR_HOOK_NOT_FOUND: { status: 404, message: 'no such endpoint: %s' },
  KOLLECT_ERR_HOOK_OVERLOADED: { status: 429, message: 'too much work in flight; retry after %s seconds' },
  KOLLECT_ERR_HOOK_QUEUE_TIMEOUT: {
    status: 429, message: 'the sync waited %s ms for an extraction process, too long to finish in time; retry after %s seconds',
  },
  KOLLECT_ERR_HOOK_BUSY: { status: 429, message: 'the extraction processes are too busy: %s; retry after %s seconds' },
  KOLLECT_ERR_HOOK_TIMEOUT: { status: 503, message: 'request timed out' },
  KOLLECT_ERR_EXPORTER_UNAVAILABLE: { status: 503, message: 'the exporter did not answer: %s' },
  KOLLECT_ERR_EXPORTER_BAD_REQUEST: { status: 400, message: 'request does not match the exporter API: %s' },
  KOLLECT_ERR_INTERNAL: { status: 500, message: 'internal error' },
} as const

export type ErrorCode = keyof typeof ERRORS

export class KollectError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  constructor(code: ErrorCode, ...args: string[]) {
    let i = 0
    super(ERRORS[code].message.replace(/%s/g, () => args[i++] ?? ''))
    this.code = code
    this.statusCode = ERRORS[code].status
  }
}

export function errorBody(err: KollectError): { code: string; message: string } {
  return { code: err.code, message: err.message }
}
