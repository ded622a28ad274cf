import { PollingLoop } from '../../background/polling-loop.ts';
import type { Logger } from '../../logger.ts';
import type { UsersImportService } from './service.ts';

/** Longest wait between two looks for due jobs (a job queued on another node, a lease run out). */
const POLL_MS = 2_000;
/** Jobs one node runs at a time: an import keeps the database busy; more at once would not go faster. */
const CONCURRENCY = 1;
/** Rounds between two sweeps of the chunks of uploads that never became jobs. */
const SWEEP_EVERY_ROUNDS = 1800;

/**
 * Runs users-import jobs in the background on every node; the claim's lease makes the nodes share them,
 * and a job whose node stopped is resumed by the next claim once its lease runs out.
 */
export class UsersImportWorker {
  private readonly loop: PollingLoop;
  private rounds = 0;

  constructor(
    private readonly imports: Pick<UsersImportService, 'claim' | 'run' | 'sweep'>,
    logger: Logger,
  ) {
    this.loop = new PollingLoop({
      round: async () => {
        await this.claimAndRun();
        return POLL_MS;
      },
      afterFailureMs: () => POLL_MS,
      onError: (error) => logger.error({ err: error }, 'users import failed; it resumes from its last batch'),
    });
  }

  start(): void {
    this.loop.start(0);
  }

  /** A job was queued on this node: look now rather than at the next poll. */
  wake(): void {
    this.loop.wake();
  }

  /** For a restore of the database: a job under way stops after its current batch. */
  pause(): Promise<void> {
    return this.stop();
  }

  resume(): void {
    this.start();
  }

  /** Stops claiming; a job under way stops after its current batch and is resumed later. */
  async stop(): Promise<void> {
    await this.loop.stop();
  }

  private async claimAndRun(): Promise<void> {
    if (this.rounds++ % SWEEP_EVERY_ROUNDS === 0) await this.imports.sweep();
    const free = CONCURRENCY - this.loop.inFlight;
    if (free <= 0 || this.loop.stopped) return;
    for (const job of await this.imports.claim(free)) {
      this.loop.track(
        this.imports.run(job, () => this.loop.stopped),
        () => this.loop.wake(),
      );
    }
  }
}
