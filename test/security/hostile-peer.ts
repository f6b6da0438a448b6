// A hostile peer on a real loopback socket (an S3 endpoint answering 403 with a huge message, a git
// host that redirects, a forge echoing what it was sent), and an export through the hooks server
// to a sink that fails, for the tests of what external text may do to status, logs and the loop.
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { KubeObject, SinkExportState } from '../../api/types.js'
import type { HooksServer } from '../support/hooks-server.js'
import { deployment, targetSyncRequest } from '../support/metacontroller.js'
import { ROUTES, exampleProfile, inventorySync, send, sleep, targetWith } from './support.js'

export interface HostilePeer {
  /** http://127.0.0.1:<port> */
  url: string
  port: number
  /** Method and path of every request answered. */
  requests: { method: string; path: string; authorization: string | undefined }[]
  close(): Promise<void>
}

/** A real HTTP listener on 127.0.0.1 answering every request with `answer`. */
export async function hostilePeer(answer: (req: IncomingMessage, res: ServerResponse) => void): Promise<HostilePeer> {
  const requests: HostilePeer['requests'] = []
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization })
    req.resume()
    req.on('end', () => answer(req, res))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

/** An S3 error document, as S3 answers a refused request. */
export function s3ErrorXml(code: string, message: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><RequestId>r1</RequestId></Error>`
}

/** An S3 endpoint that refuses every request with 403 and an S3 error document carrying `message`. */
export function deniedS3(message: string): Promise<HostilePeer> {
  // Encoded once: the peer shares the machine with the server it attacks.
  const body = Buffer.from(s3ErrorXml('AccessDenied', message))
  return hostilePeer((_req, res) => {
    res.writeHead(403, { 'content-type': 'application/xml', 'content-length': body.length })
    res.end(body)
  })
}

export function s3Sink(namespace: string, name: string, endpoint: string): KubeObject {
  return {
    apiVersion: 'kollect.dev/v1alpha1', kind: 'KollectSink',
    metadata: { name, namespace, uid: `uid-sink-${namespace}-${name}` },
    spec: { type: 's3', cluster: 'lab', secretRef: { name: `${name}-keys` }, s3: { bucket: 'inventory', endpoint, pathStyle: true } },
  }
}

/** Report the example target in `namespace`, then name `sink` in an inventory with a 1 ms debounce. */
export async function exportTo(server: HooksServer, namespace: string, inventory: string, sink: KubeObject): Promise<void> {
  const target = targetWith({}, 'prod-deploys', namespace)
  const report = await send(server.url, ROUTES.targetSync, { body: JSON.stringify(targetSyncRequest([deployment(1, { namespace })], { target, profile: exampleProfile(namespace) })) })
  if (report.status !== 200) throw new Error(`target sync answered ${report.status}: ${report.text}`)
  const spec = { targetRefs: [{ name: 'prod-deploys' }], sinkRefs: [{ name: sink.metadata?.name }], debounce: '1ms', maxWait: '1ms' }
  const res = await send(server.url, ROUTES.inventorySync, { body: JSON.stringify(inventorySync({ name: inventory, namespace, spec, sinks: [sink], targets: [target] })) })
  if (res.status !== 200) throw new Error(`inventory sync answered ${res.status}: ${res.text}`)
}

/** The inventory's sink state once it is Failing (or fails the test after `timeoutMs`). */
export async function failingSink(server: HooksServer, namespace: string, inventory: string, timeoutMs = 20_000): Promise<SinkExportState> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    server.exporter.flush()
    const sink = server.exporter.inventoryState({ namespace, name: inventory })?.sinks[0]
    if (sink?.state === 'Failing') return sink
    if (Date.now() > deadline) throw new Error(`the sink never failed: ${JSON.stringify(sink)}`)
    await sleep(20)
  }
}
