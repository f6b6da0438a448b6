import type { ObjectRef, Snapshot } from '../../api/types.js'
import { renderDocumentPath } from '../document.js'
import type { SinkDescriptor } from '../descriptor.js'
import type { SinkLabel } from '../errors.js'
import { NO_FENCE, type WriteFence } from '../fence.js'
import type { SinkOptions } from '../options.js'
import { SerialQueue } from '../serial.js'
import type { Sink, WriteResult } from '../sink.js'
import { resolveFileSettings, type FileSettings } from './config.js'
import { encodeFileWrite } from './encode.js'
import { FileService } from './service.js'

// Local files only: nothing for the SSRF guard.
export const fileSink: SinkDescriptor = { type: 'file', create: createFileSink, endpoints: () => [], inPod: () => true }

/** One canonical document per inventory under the data directory, replaced atomically. */
export function createFileSink(opts: SinkOptions): Sink {
  const label: SinkLabel = { kind: 'file', id: opts.id }
  const files = new FileService(label, opts.dataDir)
  const queue = new SerialQueue()
  let settings: FileSettings | undefined
  // A bad spec surfaces on every call as a permanent error instead of throwing here, so the
  // exporter reports it in status like any other sink failure.
  const resolved = (): FileSettings => (settings ??= resolveFileSettings(opts.spec, label))
  const documentPath = (inventory: ObjectRef, cluster: string): string =>
    renderDocumentPath(label, opts.dataDir, resolved().pathTemplate, {
      cluster,
      namespace: inventory.namespace,
      name: inventory.name,
    })

  return {
    id: opts.id,

    write: (snapshot: Snapshot, fence: WriteFence = NO_FENCE): Promise<WriteResult> =>
      queue.run(async () => {
        const file = documentPath(snapshot.inventory, snapshot.cluster)
        const { text, result } = encodeFileWrite(await files.read(file), snapshot, resolved().format)
        if (text !== undefined) {
          fence.check('writing the file')
          await files.write(file, text)
        }
        return result
      }),

    remove: (inventory: ObjectRef, cluster: string): Promise<void> =>
      queue.run(() => files.remove(documentPath(inventory, cluster))),

    healthcheck: async (): Promise<void> => {
      resolved()
      await files.checkWritable()
    },

    close: () => queue.drain(),
  }
}
