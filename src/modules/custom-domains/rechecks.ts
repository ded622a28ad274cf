import { PollingLoop } from '../../background/polling-loop.ts';
import type { Logger } from '../../logger.ts';
import { noMetrics, type Metrics } from '../../observability/metrics.ts';
import type { CustomDomainService } from './service.ts';
import type { CustomDomainStore } from './store.ts';

/** Far longer than one DNS check can take (the verifier's timeout times its tries). */
const LEASE_MS = 30_000;
/** DNS checks one node runs at a time: a resolver that hangs on one domain does not hold up the others. */
const CONCURRENCY = 16;
/** Longest wait between two looks for due checks. */
const MAX_POLL_MS = 5_000;

/**
 * Re-checks the DNS of pending custom domains in the background, on the schedule the domains carry
 * (each check doubles the delay to the next, up to a cap) until they are ready or their verification
 * window has run out. Every node runs one; the claim's lease (see DUE_CHECKS in store.ts) makes them
 * share the work.
 */
export class VerificationRechecks {
  /** Its tracked tasks are the checks in flight. */
  private readonly loop: PollingLoop;
  private readonly pollMs: number;

  constructor(
    private readonly store: CustomDomainStore,
    private readonly domains: Pick<CustomDomainService, 'recheck'>,
    recheckInitialMs: number,
    logger: Logger,
    private readonly metrics: Pick<Metrics, 'domainRecheck'> = noMetrics,
  ) {
    // A due check waits at most one poll: never longer than the first delay, so short schedules hold.
    this.pollMs = Math.min(recheckInitialMs, MAX_POLL_MS);
    this.loop = new PollingLoop({
      round: async () => {
        await this.claimAndCheck();
        return this.pollMs;
      },
      afterFailureMs: () => this.pollMs,
      onError: (error) => logger.error({ err: error }, 'custom domain re-check failed'),
    });
  }

  start(): void {
    // One poll in, not at once: a short-lived process (a CLI command) closes before it claims any check.
    this.loop.start(this.pollMs);
  }

  /** For a restore of the database: no check is in flight until resume(). */
  pause(): Promise<void> {
    return this.stop();
  }

  resume(): void {
    this.start();
  }

  /** Stops claiming and waits for the checks in flight (each bounded by the resolver's timeout). */
  async stop(): Promise<void> {
    await this.loop.stop();
  }

  private async claimAndCheck(): Promise<void> {
    const free = CONCURRENCY - this.loop.inFlight;
    if (free <= 0 || this.loop.stopped) return;
    const claimed = await this.store.claimDueChecks(LEASE_MS, free);
    for (const claim of claimed) {
      const checked = this.domains.recheck(claim, claim.lease).then(
        (status) => this.metrics.domainRecheck(status),
        (error: unknown) => {
          this.metrics.domainRecheck('error');
          // Still the loop's to log (onError).
          throw error;
        },
      );
      this.loop.track(checked);
    }
  }
}
