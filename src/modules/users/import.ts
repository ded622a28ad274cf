import type { Worker } from 'node:worker_threads';
import { siblingModule, startThread } from '../../worker-thread.ts';
import { ImportError } from './import-file.ts';
import { batchSpace, type ImportBatch } from './import-batch.ts';
import type { UserService } from './service.ts';

/** What the import's reading thread (import-reader.ts) is started with. */
export interface ReaderSettings {
  file: string;
  batchSize: number;
}

/**
 * What the reading thread sends, in file order: each batch of users ready to store, with the positions
 * of its first and last records and the share of the file read; then the end, or the first invalid
 * record's ImportError message.
 */
export type FromReader =
  | { kind: 'batch'; batch: ImportBatch; first: number; last: number; fraction: number }
  | { kind: 'end' }
  | { kind: 'invalid'; message: string };

const readerEntry = siblingModule(import.meta.url, 'import-reader');

export interface ImportSummary {
  imported: number;
  seconds: number;
}

/**
 * Imports a file in batches of `batchSize`, one transaction each. It stops at the first invalid record
 * or failing batch: the batches before it stay imported (`ImportError.imported` says how many users),
 * nothing of the failing batch is.
 *
 * The file is read, parsed and validated, and its records made users, on a thread of its own
 * (import-reader.ts), at most two batches ahead, while this thread only stores them: on two cores the
 * two halves of the work overlap. Identity-provider tokens are sealed here (UserService.insertBatch),
 * so the key never leaves this thread.
 */
export async function importUsers(
  users: UserService,
  tenantId: string,
  file: string,
  batchSize: number,
  onBatch: (imported: number, fraction: number) => void = () => {},
): Promise<ImportSummary> {
  const started = process.hrtime.bigint();
  const reader = startReader({ file, batchSize });
  let imported = 0;
  let batchNumber = 0;
  try {
    for (;;) {
      const message = await reader.next();
      if (message.kind === 'end') break;
      if (message.kind === 'invalid') throw new ImportError(message.message);
      const { batch, first, last, fraction } = message;
      batchNumber++;
      try {
        imported += await users.insertBatch(tenantId, batch);
      } catch (error) {
        const range = `batch ${batchNumber} (records ${first}–${last} of ${file})`;
        // A duplicate's message names the users taken; any other failure says what it was.
        throw new ImportError(`${range}: ${(error as Error).message}`);
      }
      reader.stored(batch);
      onBatch(imported, fraction);
    }
  } catch (error) {
    if (error instanceof ImportError) error.imported = imported;
    throw error;
  } finally {
    // Once the import failed the thread may still be reading: it is stopped. After the end it has
    // stopped by itself.
    await reader.worker.terminate();
  }
  return { imported, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

/**
 * The reading thread, and its messages in order. A thread that fails (its error) or stops without
 * saying it ended (its exit code) is the last message: an import never waits for a thread that is gone.
 */
function startReader(settings: ReaderSettings) {
  const worker: Worker = startThread(readerEntry, { workerData: settings });
  const received: Array<FromReader | { kind: 'failed'; error: Error }> = [];
  let wake: (() => void) | undefined;
  const arrived = (message: (typeof received)[number]) => {
    received.push(message);
    wake?.();
    wake = undefined;
  };
  worker.on('message', (message: FromReader) => arrived(message));
  worker.on('error', (error) => arrived({ kind: 'failed', error }));
  worker.on('messageerror', (error) => arrived({ kind: 'failed', error }));
  worker.on('exit', (code) =>
    arrived({ kind: 'failed', error: new Error(`the thread reading ${settings.file} stopped (exit code ${code})`) }),
  );
  return {
    worker,
    async next(): Promise<FromReader> {
      while (received.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      const message = received.shift()!;
      if (message.kind === 'failed') throw message.error;
      return message;
    },
    /**
     * A batch was stored: the thread may read one more ahead, and write it where this one was
     * (whose memory is then no more readable here).
     */
    stored(batch: ImportBatch): void {
      const space = batchSpace(batch);
      worker.postMessage(space, [space.text, space.ends]);
    },
  };
}
