// spec.kafka.brokers, parsed once for the sink hook and for the sink: a broker the sink would
// refuse must never be reported Ready=True Valid.

const BROKER = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/

export interface KafkaBroker {
  host: string
  port: number
}

/** What a broker of spec.kafka.brokers must be, as both say it. */
export const BROKER_RULE = 'must be host:port, with a port from 1 to 65535'

/** One "host:port" (an IPv6 host in brackets, which the result drops), or undefined when it is not one. */
export function parseBroker(text: string): KafkaBroker | undefined {
  const m = BROKER.exec(text)
  const port = m ? Number(m[2]) : 0
  if (!m || port < 1 || port > 65535) return undefined
  return { host: (m[1] as string).replace(/^\[|\]$/g, ''), port }
}
