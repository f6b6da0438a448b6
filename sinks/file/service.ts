import { mkdir, rmdir, unlink } from 'node:fs/promises'
import path from 'node:path'
import { readTextIfExists, writeFileAtomic } from '../../api/files.js'
import { errorCode, NO_SECRETS, sinkFailure, type SinkLabel } from '../errors.js'

// File I/O only. Errors an operator must fix by changing the layout (a directory where the
// document should be) are permanent; the rest (a full disk, a transient EIO) may pass.
const PERMANENT_CODES = new Set(['EISDIR', 'ENOTDIR', 'ENAMETOOLONG', 'EINVAL'])

export class FileService {
  constructor(
    private readonly sink: SinkLabel,
    private readonly root: string,
  ) {}

  read(file: string): Promise<string | undefined> {
    return this.io(`read ${file}`, () => readTextIfExists(file))
  }

  write(file: string, text: string): Promise<void> {
    return this.io(`write ${file}`, () => writeFileAtomic(file, text))
  }

  /** Deletes the document (a missing one is fine) and the directories it leaves empty. */
  remove(file: string): Promise<void> {
    return this.io(`remove ${file}`, async () => {
      try {
        await unlink(file)
      } catch (err) {
        if (errorCode(err) !== 'ENOENT') throw err
      }
      const base = path.resolve(this.root)
      for (let dir = path.dirname(file); dir.startsWith(base + path.sep); dir = path.dirname(dir)) {
        try {
          await rmdir(dir)
        } catch {
          break
        }
      }
    })
  }

  checkWritable(): Promise<void> {
    return this.io(`write in ${this.root}`, async () => {
      await mkdir(this.root, { recursive: true })
      const probe = path.join(this.root, '.kollect-healthcheck')
      await writeFileAtomic(probe, 'ok\n')
      await unlink(probe)
    })
  }

  private async io<T>(action: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      throw sinkFailure(this.sink, action, err, !PERMANENT_CODES.has(errorCode(err) ?? ''), NO_SECRETS)
    }
  }
}
