/**
 * The thread of an import (see import.ts importUsers) that reads the file, parses and validates each
 * record and builds its user, and sends the users to the importing thread a batch at a time, at most
 * READ_AHEAD batches ahead of those stored. It loads no database and no secret.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ImportError, readImportFile } from './import-file.ts';
import { ImportBatchBuilder, type BatchSpace } from './import-batch.ts';
import type { FromReader, ReaderSettings } from './import.ts';

/**
 * Batches sent and not yet stored: one being stored and one waiting, while the next is built. Reading
 * is faster than storing, so more would only hold more memory.
 */
const READ_AHEAD = 2;

const { file, batchSize } = workerData as ReaderSettings;
const port = parentPort!;
const send = (message: FromReader) => port.postMessage(message);

let unstored = 0;
let whenStored: (() => void) | undefined;
/** The memory of batches stored, handed back by the importing thread to be written again. */
const spaces: BatchSpace[] = [];
port.on('message', (space: BatchSpace) => {
  spaces.push(space);
  unstored--;
  whenStored?.();
  whenStored = undefined;
});

async function read(): Promise<void> {
  let batch: ImportBatchBuilder | undefined;
  let first = 0;
  let last = 0;
  let fraction = 0;
  const flush = async () => {
    if (!batch) return;
    const built = batch.build();
    // The batch's memory moves to the importing thread: nothing is copied.
    port.postMessage({ kind: 'batch', batch: built, first, last, fraction } satisfies FromReader, [
      built.text.buffer,
      built.ends.buffer,
    ]);
    batch = undefined;
    unstored++;
    while (unstored >= READ_AHEAD) await new Promise<void>((resolve) => (whenStored = resolve));
  };
  for await (const records of readImportFile(file)) {
    for (const record of records) {
      // Stamped as the database's now() would: when the batch is begun.
      batch ??= new ImportBatchBuilder(new Date().toISOString(), spaces.pop());
      if (batch.size === 0) first = record.position;
      last = record.position;
      fraction = record.fraction;
      batch.add(record.user);
      if (batch.size >= batchSize) await flush();
    }
  }
  await flush();
}

try {
  await read();
  send({ kind: 'end' });
} catch (error) {
  // An invalid record ends the import with its message; anything else fails the thread, which the
  // importing thread reports as it is.
  if (!(error instanceof ImportError)) throw error;
  send({ kind: 'invalid', message: error.message });
}
// Nothing more to wait for: the thread ends.
port.removeAllListeners('message');
