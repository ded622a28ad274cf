import { ChunkedJobWorker } from '../../../background/chunked-jobs.ts';
import type { Database } from '../../../db/database.ts';
import type { Logger } from '../../../logger.ts';
import { StreamDeletionStore, type ClaimedDeletion, type RemovalCursor } from '../store/deletions.ts';

export interface StreamDeletionSettings {
  /** Most rows one chunk (one transaction) removes: EVENT_STREAM_DELETION_CHUNK_ROWS. */
  chunkRows: number;
}

/**
 * Removes the rows of deleted event streams in the background, on every node, a chunk of at most
 * `chunkRows` rows per transaction (see ChunkedJobWorker): a stream of millions of deliveries holds the
 * database for milliseconds at a time instead of its whole deletion at once.
 */
export class StreamDeletionWorker extends ChunkedJobWorker<ClaimedDeletion, RemovalCursor> {
  constructor(database: Database, settings: StreamDeletionSettings, logger: Logger) {
    const store = new StreamDeletionStore(database);
    super(
      {
        name: 'event stream deletion',
        finished: 'event stream deleted',
        logFields: (deletion) => ({ event_stream_id: deletion.id, tenant_id: deletion.tenant_id }),
        cursorOf: () => ({ countsDone: false, attemptsDone: false }),
        claimDue: (leaseMs, limit) => store.claimDue(leaseMs, limit),
        runChunk: (deletion, newLease, cursor) => store.removeChunk(deletion, newLease, cursor, settings.chunkRows),
        release: (deletion, lease, at) => store.release(deletion, lease, at),
      },
      logger,
    );
  }
}
