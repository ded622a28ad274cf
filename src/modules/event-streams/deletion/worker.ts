import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { PollingLoop } from '../../../background/polling-loop.ts';
import type { Database } from '../../../db/database.ts';
import { now } from '../../../db/database.ts';
import type { Logger } from '../../../logger.ts';
import { StreamDeletionStore, type ClaimedDeletion, type RemovalCursor } from '../store/deletions.ts';

/** Longest wait between two looks for due deletions (one marked on another node, a lease run out). */
const POLL_MS = 2_000;
/** How long a node holds a deletion between two chunks; if it dies, another (or its restart) goes on then. */
const LEASE_MS = 30_000;
/** The wait before a deletion whose chunk failed is tried again. */
const RETRY_MS = 5_000;
/** Deletions one node runs at a time: each keeps the database busy; more at once would not go faster. */
const CONCURRENCY = 1;

export interface StreamDeletionSettings {
  /** Most rows one chunk (one transaction) removes: EVENT_STREAM_DELETION_CHUNK_ROWS. */
  chunkRows: number;
}

/**
 * Removes the rows of deleted event streams in the background, on every node: a chunk of at most
 * `chunkRows` rows per transaction, the event loop free between two chunks, so a stream of millions of
 * deliveries holds the database for milliseconds at a time instead of its whole deletion at once (on
 * SQLite every tenant's requests wait for it). The claim's lease makes the nodes share the deletions,
 * and one whose node stopped is taken over once its lease runs out (at once after a graceful stop).
 */
export class StreamDeletionWorker {
  private readonly loop: PollingLoop;
  private readonly store: StreamDeletionStore;

  constructor(
    database: Database,
    private readonly settings: StreamDeletionSettings,
    private readonly logger: Logger,
  ) {
    this.store = new StreamDeletionStore(database);
    this.loop = new PollingLoop({
      round: async () => {
        await this.claimAndRun();
        return POLL_MS;
      },
      afterFailureMs: () => POLL_MS,
      onError: (error) => logger.error({ err: error }, 'event stream deletion failed; it is tried again'),
    });
  }

  start(): void {
    this.loop.start(0);
  }

  /** A stream was deleted on this node: start now rather than at the next poll. */
  wake(): void {
    this.loop.wake();
  }

  /** For a restore of the database: a deletion under way stops after its current chunk. */
  pause(): Promise<void> {
    return this.stop();
  }

  resume(): void {
    this.start();
  }

  /** Stops claiming; a deletion under way stops after its current chunk and is taken up again later. */
  async stop(): Promise<void> {
    await this.loop.stop();
  }

  private async claimAndRun(): Promise<void> {
    const free = CONCURRENCY - this.loop.inFlight;
    if (free <= 0 || this.loop.stopped) return;
    for (const deletion of await this.store.claimDue(LEASE_MS, free)) {
      this.loop.track(this.run(deletion), () => this.loop.wake());
    }
  }

  /**
   * Chunk after chunk until the stream row itself is gone. A failed chunk is logged and the deletion
   * tried again after RETRY_MS (from where the removal got to: what was removed stays removed).
   */
  private async run(deletion: ClaimedDeletion): Promise<void> {
    const log = this.logger.child({ event_stream_id: deletion.id, tenant_id: deletion.tenant_id });
    let lease = deletion.lease;
    let cursor: RemovalCursor = { countsDone: false, attemptsDone: false };
    let chunks = 0;
    let rows = 0;
    try {
      for (;;) {
        const newLease = new Date(Date.now() + LEASE_MS).toISOString();
        const chunk = await this.store.removeChunk({ ...deletion, lease }, newLease, cursor, this.settings.chunkRows);
        if (chunk === undefined) {
          log.warn({ chunks, rows }, 'event stream deletion taken over elsewhere (its lease ran out)');
          return;
        }
        lease = newLease;
        chunks++;
        rows += chunk.removed;
        cursor = chunk.cursor;
        if (chunk.finished) {
          log.info({ chunks, rows }, 'event stream deleted');
          return;
        }
        if (this.loop.stopped) {
          // This node's next start, or another node, goes on at once.
          await this.store.release(deletion, lease, now());
          log.info({ chunks, rows }, 'event stream deletion paused: the node is stopping');
          return;
        }
        // SQLite's calls are synchronous: without a turn of the event loop between chunks, requests
        // would wait for the whole deletion again.
        await yieldToEventLoop();
      }
    } catch (error) {
      log.error({ err: error, chunks, rows }, 'event stream deletion failed; it is tried again');
      const retryAt = new Date(Date.now() + RETRY_MS).toISOString();
      // When this fails too (the database is down), the lease running out brings the deletion back.
      await this.store
        .release(deletion, lease, retryAt)
        .catch((releaseError: unknown) =>
          log.error({ err: releaseError }, 'event stream deletion could not be put back; its lease runs out'),
        );
    }
  }
}
