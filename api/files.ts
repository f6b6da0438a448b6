import { randomBytes } from 'node:crypto'
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises'
import path from 'node:path'

// Whole files read and replaced atomically: the file sink's documents, the exporter's journal and
// the hub's store all need a crash to leave the old file or the new one, never a torn one.

export async function readTextIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}

/**
 * Readers see the old file or the new one, never a torn write: the text goes to a temporary
 * file in the same directory (same filesystem, so rename is atomic), is fsynced, then renamed
 * over the target, and the directory is fsynced so the rename itself survives a crash.
 */
export async function writeFileAtomic(file: string, text: string): Promise<void> {
  const dir = path.dirname(file)
  await mkdir(dir, { recursive: true })
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`)
  try {
    const handle = await open(tmp, 'wx', 0o644)
    try {
      await handle.writeFile(text, 'utf8')
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(tmp, file)
  } catch (err) {
    await rm(tmp, { force: true })
    throw err
  }
  await syncDirectory(dir)
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } catch {
    // Some filesystems refuse fsync on a directory; the rename is still atomic there.
  } finally {
    await handle.close()
  }
}
