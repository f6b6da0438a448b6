import type { Config } from '../config.js'
import { jsonBodyParser } from '../json-depth.js'
import { shared } from './shared.js'

// Metacontroller sends application/json; curl -d sends form encoding. Every content type is
// parsed as JSON, with bounded nesting and the secure parser that refuses __proto__ and constructor keys.
export const jsonBody = shared<{ config: Config }>('kollect-json-body', async (app, { config }) => {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer' }, jsonBodyParser(config.limits.maxJsonDepth))
})
