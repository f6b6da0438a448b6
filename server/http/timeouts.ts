// The HTTP timeouts of both servers (hooks and exporter API), as Fastify options. Node enforces
// headersTimeout and requestTimeout only when it sweeps its connections, every
// connectionsCheckingInterval (30 s by default): a 10 s header limit would then cut a slow
// sender off after 30-40 s. Sweeping every second keeps the limits to what docs/security.md says.
export const HTTP_TIMEOUTS = {
  http: { headersTimeout: 10_000, connectionsCheckingInterval: 1_000 },
  requestTimeout: 60_000,
  connectionTimeout: 120_000,
  keepAliveTimeout: 15_000,
}
