import { createServer, type Server } from 'node:http'
import { readFile, stat } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import path from 'node:path'

// A built static site served on a loopback port the way a static host (GitHub Pages) serves it:
// a file, a folder's index.html, or a page without its .html; anything else is a 404.

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.svg': 'image/svg+xml', '.ico': 'image/x-icon', '.png': 'image/png', '.woff2': 'font/woff2',
}

async function isFile(file: string): Promise<boolean> {
  return (await stat(file).catch(() => undefined))?.isFile() ?? false
}

export interface StaticSite { origin: string; close(): Promise<void> }

export async function serveStatic(root: string): Promise<StaticSite> {
  const server: Server = createServer((req, res) => {
    void (async () => {
      const pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)
      const file = path.join(root, path.normalize(pathname))
      const candidates = [file, path.join(file, 'index.html'), `${file}.html`]
      const found = file.startsWith(root) ? await firstFile(candidates) : undefined
      if (!found) {
        res.writeHead(404, { 'content-type': TYPES['.html'] }).end('not found')
        return
      }
      const type = TYPES[path.extname(found)] ?? 'application/octet-stream'
      res.writeHead(200, { 'content-type': type }).end(await readFile(found))
    })().catch((err: Error) => res.writeHead(500).end(err.message))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    }),
  }
}

async function firstFile(candidates: string[]): Promise<string | undefined> {
  for (const f of candidates) if (await isFile(f)) return f
  return undefined
}
