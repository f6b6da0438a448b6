import type { FastifyPluginAsync, FastifyPluginOptions } from 'fastify'

/**
 * What fastify-plugin does, without the dependency: the plugin's hooks, handlers and decorations
 * apply to the context that registers it rather than to a child context of its own.
 */
export function shared<Options extends FastifyPluginOptions>(name: string, plugin: FastifyPluginAsync<Options>): FastifyPluginAsync<Options> {
  return Object.assign(plugin, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: name })
}
