// A private certificate authority for TLS tests, made with the openssl command line: a CA, a
// server certificate it signed for 127.0.0.1 and localhost, and the CA as a Kubernetes Secret
// volume lays it out (the chart's extraCACerts mount: ca.crt -> ..data/ca.crt).
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'

export interface PrivateCa {
  dir: string
  /** The CA certificate (PEM). */
  caCert: string
  serverCert: string
  serverKey: string
  /** A directory shaped like a mounted Secret holding only ca.crt, as the chart mounts it. */
  secretDir: string
  remove(): void
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] })
}

export function makePrivateCa(): PrivateCa {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kollect-ca-'))
  openssl(dir, 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2',
    '-subj', '/CN=Kollect test private CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign')
  openssl(dir, 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1')
  writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n')
  openssl(dir, 'x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext')
  // The kubelet's layout: a timestamped directory, ..data pointing at it, each key a link through ..data.
  const secretDir = path.join(dir, 'secret')
  mkdirSync(path.join(secretDir, '..2025_01_01_00_00_00.000000000'), { recursive: true })
  execFileSync('cp', [path.join(dir, 'ca.crt'), path.join(secretDir, '..2025_01_01_00_00_00.000000000', 'ca.crt')])
  symlinkSync('..2025_01_01_00_00_00.000000000', path.join(secretDir, '..data'))
  symlinkSync('..data/ca.crt', path.join(secretDir, 'ca.crt'))
  return {
    dir,
    caCert: path.join(dir, 'ca.crt'),
    serverCert: path.join(dir, 'server.crt'),
    serverKey: path.join(dir, 'server.key'),
    secretDir,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  }
}
