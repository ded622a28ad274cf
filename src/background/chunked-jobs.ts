import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { now } from '../db/database.ts';
import type { Logger } from '../logger.ts';
import { PollingLoop } from './polling-loop.ts';

/** Longest wait between two looks for due jobs (one queued on another node, a lease run out). */
const POLL_MS = 2_000;
/** How long a node holds a job between two chunks; if it dies, another (or its restart) goes on then. */
const LEASE_MS = 30_000;
/** The wait before a job whose chunk failed is tried again. */
const RETRY_MS = 5_000;
/**
 * How long a node runs one job before handing it back, due at once, so that jobs due before it (other
 * tenants', queued meanwhile) are claimed first: a job of a million rows takes seconds, and jobs of one
 * kind run a few at a time (ChunkedJobKind.concurrency).
 */
const TURN_MS = 1_000;

/** A job claimed by this node until `lease`. */
export interface LeasedJob {
  lease: string;
}

/** What one chunk did: rows it handled, whether the job is over, and where the next chunk goes on from. */
export interface ChunkOutcome<Cursor> {
  rows: number;
  finished: boolean;
  cursor: Cursor;
}

/** Thrown inside a chunk's transaction to roll it back: its lease is another run's by now. */
export class LeaseLost extends Error {}

/** A chunk's transaction, undefined when it threw LeaseLost (rolled back: the job is another run's). */
export async function unlessLeaseLost<T>(chunk: Promise<T>): Promise<T | undefined> {
  try {
    return await chunk;
  } catch (error) {
    if (error instanceof LeaseLost) return undefined;
    throw error;
  }
}

/** One kind of job done in chunks, and the store that claims, runs and releases its jobs. */
export interface ChunkedJobKind<Job extends LeasedJob, Cursor> {
  /** How the logs name a job of this kind: 'event stream deletion'. */
  name: string;
  /**
   * Jobs of this kind a node runs at a time; 1 unless given. Each keeps the database busy: more at once
   * go faster only where the database works on them side by side (PostgreSQL, not SQLite's one writer).
   */
  concurrency?: number;
  /** The log line of a job completed: 'event stream deleted'. */
  finished: string;
  /** The fields every log line of a job carries (its ids). */
  logFields(job: Job): Record<string, unknown>;
  /** Where a claimed job goes on from. */
  cursorOf(job: Job): Cursor;
  /** Claims up to `limit` due jobs under a lease of `leaseMs`. */
  claimDue(leaseMs: number, limit: number): Promise<Job[]>;
  /**
   * One chunk of the job, one transaction fenced by its lease (`job.lease`), renewed to `newLease`.
   * Undefined when the lease is no longer this run's (another node took the job over).
   */
  runChunk(job: Job, newLease: string, cursor: Cursor): Promise<ChunkOutcome<Cursor> | undefined>;
  /** Lets the job go until `at` (after a failure), or at once (a node stopping) when `at` is now. */
  release(job: Job, lease: string, at: string): Promise<void>;
}

/**
 * Runs background jobs of one kind in bounded chunks, on every node: each chunk one transaction, the
 * event loop free between two chunks, so a job over millions of rows holds the database for
 * milliseconds at a time instead of its whole work at once (on SQLite every tenant's requests wait for
 * a statement under way). The claim's lease makes the nodes share the jobs, and one whose node stopped
 * is taken over once its lease runs out (at once after a graceful stop).
 */
export class ChunkedJobWorker<Job extends LeasedJob, Cursor> {
  private readonly loop: PollingLoop;

  constructor(
    private readonly kind: ChunkedJobKind<Job, Cursor>,
    private readonly logger: Logger,
    private readonly turnMs = TURN_MS,
  ) {
    this.loop = new PollingLoop({
      round: async () => {
        await this.claimAndRun();
        return POLL_MS;
      },
      afterFailureMs: () => POLL_MS,
      onError: (error) => logger.error({ err: error }, `${kind.name} failed; it is tried again`),
    });
  }

  start(): void {
    this.loop.start(0);
  }

  /** A job was queued on this node: start now rather than at the next poll. */
  wake(): void {
    this.loop.wake();
  }

  /** For a restore of the database: a job under way stops after its current chunk. */
  pause(): Promise<void> {
    return this.stop();
  }

  resume(): void {
    this.start();
  }

  /** Stops claiming; a job under way stops after its current chunk and is taken up again later. */
  async stop(): Promise<void> {
    await this.loop.stop();
  }

  private async claimAndRun(): Promise<void> {
    const free = (this.kind.concurrency ?? 1) - this.loop.inFlight;
    if (free <= 0 || this.loop.stopped) return;
    for (const job of await this.kind.claimDue(LEASE_MS, free)) {
      this.loop.track(this.run(job), () => this.loop.wake());
    }
  }

  /**
   * Chunk after chunk until the job is over, or for a turn (TURN_MS): then it is handed back, and its log line
   * says what this turn did (a job's lines add up to the whole). A failed chunk is logged and the job tried again after
   * RETRY_MS, from where it got to: what a committed chunk did stays done.
   */
  private async run(job: Job): Promise<void> {
    const { kind } = this;
    const log = this.logger.child(kind.logFields(job));
    let lease = job.lease;
    let cursor = kind.cursorOf(job);
    let chunks = 0;
    let rows = 0;
    const turnEnds = Date.now() + this.turnMs;
    try {
      for (;;) {
        const newLease = new Date(Date.now() + LEASE_MS).toISOString();
        const chunk = await kind.runChunk({ ...job, lease }, newLease, cursor);
        if (chunk === undefined) {
          log.warn({ chunks, rows }, `${kind.name} taken over elsewhere (its lease ran out)`);
          return;
        }
        lease = newLease;
        chunks++;
        rows += chunk.rows;
        cursor = chunk.cursor;
        if (chunk.finished) {
          log.info({ chunks, rows }, kind.finished);
          return;
        }
        if (this.loop.stopped) {
          // This node's next start, or another node, goes on at once.
          await kind.release(job, lease, now());
          log.info({ chunks, rows }, `${kind.name} paused: the node is stopping`);
          return;
        }
        if (Date.now() >= turnEnds) {
          // Due now, it comes after every job due before it; the loop claims again once this run ends.
          await kind.release(job, lease, now());
          log.info({ chunks, rows }, `${kind.name} hands its turn on`);
          return;
        }
        // SQLite's calls are synchronous: without a turn of the event loop between chunks, requests
        // would wait for the whole job again.
        await yieldToEventLoop();
      }
    } catch (error) {
      log.error({ err: error, chunks, rows }, `${kind.name} failed; it is tried again`);
      const retryAt = new Date(Date.now() + RETRY_MS).toISOString();
      // When this fails too (the database is down), the lease running out brings the job back.
      await kind
        .release(job, lease, retryAt)
        .catch((releaseError: unknown) =>
          log.error({ err: releaseError }, `${kind.name} could not be put back; its lease runs out`),
        );
    }
  }
}
