import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Admin } from '@platformatic/kafka'
import { freePort } from './ports.js'
import { pollUntil, run, startServerProcess, waitForExit, type ServerProcess } from './process.js'
import { toolPaths } from './tools.js'

export interface KafkaBroker {
  /** 127.0.0.1:port of the PLAINTEXT listener. */
  readonly bootstrap: string
  /** 127.0.0.1:port of the SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-256). */
  readonly saslBootstrap: string
  /** 127.0.0.1:port of the SSL listener (server certificate for IP 127.0.0.1, signed by `ca`). */
  readonly tlsBootstrap: string
  /** PEM of the CA that signed the broker's certificate. */
  readonly ca: string
  /** The user both SASL mechanisms accept, and its password. */
  readonly user: string
  readonly password: string
  /** Graceful shutdown (SIGTERM); the log directory stays. */
  stop(): Promise<void>
  /** Kill at once (SIGKILL), as after a crash. */
  kill(): Promise<void>
  /** Start again on the same ports and log directory. */
  start(): Promise<void>
  /** Stop and delete the log directory. */
  destroy(): Promise<void>
}

/** The jar directory scripts/install-kafka.sh fills; missing jars fail with the command that fetches them. */
function kafkaLib(): string {
  const lib = toolPaths('install-kafka.sh').KOLLECT_KAFKA_LIB
  if (!lib || !existsSync(lib)) {
    throw new Error(`no Kafka jars at ${lib ?? '(unset)'}: fetch them with \`bash scripts/install-kafka.sh\` (needs Java 17 and Maven)`)
  }
  return lib
}

// Ready means the broker answers metadata with itself as a live broker, not just a TCP accept:
// in KRaft the socket opens before the broker has registered with its controller.
async function answers(bootstrap: string): Promise<boolean> {
  const admin = new Admin({ clientId: 'kollect-test-probe', bootstrapBrokers: [bootstrap], retries: 0, timeout: 1000 })
  try {
    const metadata = await admin.metadata({ topics: [] })
    return metadata.brokers.size > 0
  } catch {
    return false
  } finally {
    await admin.close().catch(() => undefined)
  }
}

/** A throwaway CA and a server certificate for 127.0.0.1, as the PEM keystore Kafka reads (PKCS#8 key, then the certificate). */
async function makeKeystore(root: string): Promise<{ file: string; ca: string }> {
  const at = (name: string): string => path.join(root, name)
  const openssl = (args: string[]): Promise<void> => run('openssl', args, `openssl ${args[0]}`)
  await openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('ca.key'), '-out', at('ca.crt'), '-subj', '/CN=kollect-test-ca', '-days', '2'])
  await openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=127.0.0.1'])
  writeFileSync(at('san.ext'), 'subjectAltName=IP:127.0.0.1\n')
  await openssl(['x509', '-req', '-in', at('server.csr'), '-CA', at('ca.crt'), '-CAkey', at('ca.key'), '-CAcreateserial', '-out', at('server.crt'), '-days', '2', '-extfile', at('san.ext')])
  await openssl(['pkcs8', '-topk8', '-nocrypt', '-in', at('server.key'), '-out', at('server.pk8')])
  const file = at('keystore.pem')
  writeFileSync(file, readFileSync(at('server.pk8'), 'utf8') + readFileSync(at('server.crt'), 'utf8'))
  return { file, ca: readFileSync(at('ca.crt'), 'utf8') }
}

/**
 * One Apache Kafka node in KRaft mode (broker and controller in one process, no ZooKeeper), from
 * the Maven Central jars of test/kafka/pom.xml, on loopback ports.
 */
export async function startKafka(): Promise<KafkaBroker> {
  const lib = kafkaLib()
  const root = mkdtempSync(path.join(os.tmpdir(), 'kollect-kafka-'))
  const logDir = path.join(root, 'data')
  const logFile = path.join(root, 'kafka.log')
  const [port, saslPort, tlsPort, controllerPort] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const keystore = await makeKeystore(root)
  const user = 'kollect'
  const password = 'kafka-test-secret-9f3b'
  const jaas = `org.apache.kafka.common.security.plain.PlainLoginModule required user_${user}="${password}";`
  const properties = path.join(root, 'server.properties')
  writeFileSync(
    properties,
    [
      'process.roles=broker,controller',
      'node.id=1',
      `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
      `listeners=PLAINTEXT://127.0.0.1:${port},SASL_PLAINTEXT://127.0.0.1:${saslPort},SSL://127.0.0.1:${tlsPort},CONTROLLER://127.0.0.1:${controllerPort}`,
      `advertised.listeners=PLAINTEXT://127.0.0.1:${port},SASL_PLAINTEXT://127.0.0.1:${saslPort},SSL://127.0.0.1:${tlsPort}`,
      'controller.listener.names=CONTROLLER',
      'inter.broker.listener.name=PLAINTEXT',
      'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT',
      'listener.name.ssl.ssl.keystore.type=PEM',
      `listener.name.ssl.ssl.keystore.location=${keystore.file}`,
      'sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256',
      `listener.name.sasl_plaintext.plain.sasl.jaas.config=${jaas}`,
      'listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
      `log.dirs=${logDir}`,
      'num.partitions=1',
      'auto.create.topics.enable=false',
      'offsets.topic.replication.factor=1',
      'transaction.state.log.replication.factor=1',
      'transaction.state.log.min.isr=1',
      'group.initial.rebalance.delay.ms=0',
      // Small segments and a fast cleaner, so tests see compaction-friendly topics behave.
      'log.cleaner.backoff.ms=1000',
      '',
    ].join('\n'),
  )
  const java = process.env.JAVA ?? 'java'
  const classpath = `${lib}/*`
  const jvm = ['-Xmx512m', '-Xms128m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1', '-Djava.awt.headless=true', '-cp', classpath]
  await run(
    java,
    [...jvm, 'kafka.tools.StorageTool', 'format', '-t', 'kollect-test-cluster-0001', '-c', properties,
      '--add-scram', `SCRAM-SHA-256=[name=${user},password=${password}]`],
    'kafka StorageTool format',
  )
  const bootstrap = `127.0.0.1:${port}`
  let proc: ServerProcess | undefined

  const start = async (): Promise<void> => {
    if (proc && !proc.hasExited()) throw new Error('kafka is already running')
    proc = startServerProcess(java, [...jvm, 'kafka.Kafka', properties], logFile)
    await pollUntil(`kafka on port ${port}`, () => answers(bootstrap), { timeoutMs: 60_000, proc })
  }
  const halt = async (signal: NodeJS.Signals): Promise<void> => {
    if (!proc || proc.hasExited()) return
    proc.signalGroup(signal)
    await waitForExit(proc, 20_000)
  }

  try {
    await start()
  } catch (err) {
    await halt('SIGKILL')
    rmSync(root, { recursive: true, force: true })
    throw err
  }
  return {
    bootstrap,
    saslBootstrap: `127.0.0.1:${saslPort}`,
    tlsBootstrap: `127.0.0.1:${tlsPort}`,
    ca: keystore.ca,
    user,
    password,
    start,
    stop: () => halt('SIGTERM'),
    kill: () => halt('SIGKILL'),
    async destroy(): Promise<void> {
      await halt('SIGTERM')
      rmSync(root, { recursive: true, force: true })
    },
  }
}
