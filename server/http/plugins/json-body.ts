import type { Config } from '../../process/config.js'
import { jsonBodyParser } from '../../protocol/json-depth.js'
import fp from 'fastify-plugin'

// Metacontroller sends application/json; curl -d sends form encoding. Every content type is
// parsed as JSON, with bounded nesting and the secure parser that refuses __proto__ and constructor keys.
export const jsonBody = fp<{ config: Config }>(async (app, { config }) => {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'buffer' }, jsonBodyParser(config.limits.maxJsonDepth))
}, { name: 'kollect-json-body', fastify: '5.x' })
