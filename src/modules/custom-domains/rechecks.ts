import { PollingLoop } from '../../background/polling-loop.ts';
import { claimDueRows, type LeasedTable } from '../../db/claim-due.ts';
import type { Database } from '../../db/database.ts';
import type { CustomDomainsTable } from '../../db/schema.ts';
import type { CustomDomainService } from './service.ts';

/** What a background check needs of the domain it claimed. */
export type ClaimedCheck = Pick<CustomDomainsTable, 'id' | 'domain' | 'type' | 'verification_record' | 'created_at' | 'check_count'>;

/** Far longer than one DNS check can take (the verifier's timeout times its tries). */
const LEASE_MS = 30_000;
/** DNS checks one node runs at a time: a resolver that hangs on one domain does not hold up the others. */
const CONCURRENCY = 16;
/** Longest wait between two looks for due checks. */
const MAX_POLL_MS = 5_000;

/**
 * Pending domains whose check is due, claimed under a lease so that two nodes never check one domain
 * at the same time; a node that dies mid-check leaves its lease to run out and the domain is claimed again.
 */
export const DUE_CHECKS: LeasedTable<ClaimedCheck> = {
  table: 'custom_domains',
  key: 'id',
  returning: ['id', 'domain', 'type', 'verification_record', 'created_at', 'check_count'],
  pendingStatus: 'pending_verification',
  dueColumn: 'next_check_at',
  leaseColumn: 'check_claimed_until',
};

/**
 * Re-checks the DNS of pending custom domains in the background, on the schedule the domains carry
 * (each check doubles the delay to the next, up to a cap) until they are ready or their verification
 * window has run out. Every node runs one; the claim's lease makes them share the work.
 */
export class VerificationRechecks {
  /** Its tracked tasks are the checks in flight. */
  private readonly loop: PollingLoop;
  private readonly pollMs: number;

  constructor(
    private readonly database: Database,
    private readonly domains: CustomDomainService,
    recheckInitialMs: number,
    onError: (error: unknown) => void = (error) => console.error('custom domain re-check:', error),
  ) {
    // A due check waits at most one poll: never longer than the first delay, so short schedules hold.
    this.pollMs = Math.min(recheckInitialMs, MAX_POLL_MS);
    this.loop = new PollingLoop({
      round: async () => {
        await this.claimAndCheck();
        return this.pollMs;
      },
      afterFailureMs: () => this.pollMs,
      onError,
    });
  }

  start(): void {
    // One poll in, not at once: a short-lived process (a CLI command) closes before it claims any check.
    this.loop.start(this.pollMs);
  }

  /** Stops claiming and waits for the checks in flight (each bounded by the resolver's timeout). */
  async stop(): Promise<void> {
    await this.loop.stop();
  }

  private async claimAndCheck(): Promise<void> {
    const free = CONCURRENCY - this.loop.inFlight;
    if (free <= 0 || this.loop.stopped) return;
    const claimed = await claimDueRows(this.database, DUE_CHECKS, { leaseMs: LEASE_MS }, free);
    for (const claim of claimed) this.loop.track(this.domains.recheck(claim, claim.lease));
  }
}
