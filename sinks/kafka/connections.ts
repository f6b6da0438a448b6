import { UserError, type Broker, type CallbackWithPromise, type Connection, type ConnectionPool } from '@platformatic/kafka'
import { brokerUrls, type KafkaBroker } from './config.js'

/** A broker the SSRF guard refused: permanent, so neither the client nor the sink retries it. */
export class BrokerRefused extends UserError {
  constructor(message: string) {
    super(message, { canRetry: false })
    this.name = 'BrokerRefused'
  }
}

/**
 * Guards every connection a Kafka client opens, through its connection pool (the one door to
 * the network of the Admin, Producer and Consumer calls the sink makes):
 *
 * - The cluster decides where the client goes next: each metadata answer, at any time, may
 *   advertise other brokers, and the client connects to them. So every new connection passes the
 *   SSRF guard when it opens, not only the bootstrap list once.
 * - A connection that fails mid-handshake (a reset during SASL) emits 'error' more than once,
 *   after the listeners of the call that opened it are gone; an 'error' event nobody listens to
 *   ends the process. The failure itself reaches the caller through the call's callback.
 */
export function guardConnections(pool: ConnectionPool, bootstrap: readonly KafkaBroker[], checkEndpoint: (url: string) => Promise<string | null>): void {
  const bootstrapKeys = new Set(bootstrap.map((b) => `${b.host}:${b.port}`))
  pool.on('connecting', ({ connection }: { connection: Connection }) => {
    connection.on('error', () => undefined)
  })
  const open = pool.get.bind(pool) as (broker: Broker, callback: CallbackWithPromise<Connection>) => void
  const refusal = async (broker: Broker): Promise<string | null> => {
    const host = broker.host.replace(/^\[|\]$/g, '')
    const refused = await checkEndpoint(brokerUrls([{ host, port: broker.port }])[0] as string)
    if (!refused) return null
    const advertised = bootstrapKeys.has(`${host}:${broker.port}`) ? '' : ' advertised by the cluster'
    return `broker ${broker.host}:${broker.port}${advertised}: ${refused}`
  }
  const guarded = (broker: Broker, callback: CallbackWithPromise<Connection>): void => {
    // No broker (stale metadata) is the library's own error; an open connection passed when it opened.
    if (broker?.host == null || broker.port == null || pool.has(broker)) return open(broker, callback)
    refusal(broker).then(
      (refused) => (refused ? callback(new BrokerRefused(refused)) : open(broker, callback)),
      (err: unknown) => callback(err instanceof Error ? err : new Error(String(err))),
    )
  }
  pool.get = ((broker: Broker, callback?: CallbackWithPromise<Connection>) => {
    if (callback) return guarded(broker, callback)
    return new Promise<Connection>((resolve, reject) => guarded(broker, (err, connection) => (err ? reject(err) : resolve(connection as Connection))))
  }) as ConnectionPool['get']
}
