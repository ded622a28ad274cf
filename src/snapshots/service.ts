import type { Database } from '../db/database.ts';
import type { Snapshot } from './snapshot.ts';
import { copyTables, replaceTables, type TableRows } from './store.ts';

export type { Snapshot } from './snapshot.ts';

/** A background worker that holds claims on rows: paused while the rows are replaced under it. */
export interface PausableWorker {
  /** Resolves once no claim is held and nothing it started is still running. */
  pause(): Promise<void>;
  resume(): void;
}

/** A Snapshot's contents: the rows, held here rather than in the database so a snapshot costs no schema or file. */
class SavedState {
  readonly takenAt = new Date().toISOString();
  constructor(readonly rows: TableRows) {}
}

/**
 * Saving and returning to states of the database, for test suites: snapshot() copies every table,
 * restore() replaces every table's rows in one transaction. Workers are paused meanwhile (none is
 * mid-claim while rows change under it), and every cache of the services is dropped afterwards, so
 * nothing read before the restore is served after it. reset() restores the baseline (the seeded state).
 */
export class SnapshotService {
  private baseline: Snapshot | undefined;
  /** Snapshots and restores run one at a time: a restore never reads half of another's rows. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly database: Database,
    private readonly workers: () => ReadonlyArray<PausableWorker | undefined>,
    /** Drops what services cached from the database: tenants by host, keys, verified tokens, buckets… */
    private readonly forget: () => Promise<void>,
  ) {}

  snapshot(): Promise<Snapshot> {
    return this.serially(async () => new SavedState(await copyTables(this.database)) as unknown as Snapshot);
  }

  async restore(snapshot: Snapshot): Promise<void> {
    const state: unknown = snapshot;
    if (!(state instanceof SavedState)) throw new TypeError('restore() takes a value snapshot() returned');
    await this.serially(async () => {
      const workers = this.workers().filter((w) => w !== undefined);
      await Promise.all(workers.map((w) => w.pause()));
      try {
        await replaceTables(this.database, state.rows);
      } finally {
        await this.forget();
        for (const worker of workers) worker.resume();
      }
    });
  }

  /** The state reset() returns to: taken once the server is bootstrapped and seeded. */
  async markBaseline(): Promise<void> {
    this.baseline = await this.snapshot();
  }

  async reset(): Promise<void> {
    this.baseline ??= await this.snapshot();
    await this.restore(this.baseline);
  }

  /** Resolves once no snapshot or restore is under way (before closing: none resumes a stopped worker). */
  async settled(): Promise<void> {
    await this.queue;
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }
}
