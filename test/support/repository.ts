import { readFileSync } from 'node:fs'
import path from 'node:path'
import { ROOT } from './metacontroller.js'

/** The repository's address: package.json's repository.url, the one place it is set. */
export function repositoryUrl(): string {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { repository?: { url?: string } }
  const url = pkg.repository?.url
  if (!url) throw new Error('package.json names no repository.url')
  return url
}
