import { sql } from 'kysely';
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
 * Claims up to `limit` pending domains whose check is due, with a lease until `leaseUntil`, in one
 * statement, so that two nodes never check one domain at the same time. A node that dies mid-check
 * leaves its lease to run out; the domain is then claimed again.
 * PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: one UPDATE … RETURNING (its writes are serialised).
 */
export async function claimDueChecks(database: Database, at: string, leaseUntil: string, limit: number): Promise<ClaimedCheck[]> {
  if (limit <= 0) return [];
  const due = sql`status = 'pending_verification' AND next_check_at <= ${at} AND (check_claimed_until IS NULL OR check_claimed_until <= ${at})`;
  if (database.dialect === 'postgres') {
    const result = await sql<ClaimedCheck>`
      UPDATE custom_domains d SET check_claimed_until = ${leaseUntil}
      FROM (SELECT id FROM custom_domains WHERE ${due} ORDER BY next_check_at LIMIT ${limit} FOR UPDATE SKIP LOCKED) c
      WHERE d.id = c.id
      RETURNING d.id, d.domain, d.type, d.verification_record, d.created_at, d.check_count`.execute(database.db);
    return result.rows;
  }
  const result = await sql<ClaimedCheck>`
    UPDATE custom_domains SET check_claimed_until = ${leaseUntil}
    WHERE id IN (SELECT id FROM custom_domains WHERE ${due} ORDER BY next_check_at LIMIT ${limit})
    RETURNING id, domain, type, verification_record, created_at, check_count`.execute(database.db);
  return result.rows;
}

/**
 * Re-checks the DNS of pending custom domains in the background, on the schedule the domains carry
 * (each check doubles the delay to the next, up to a cap) until they are ready or their verification
 * window has run out. Every node runs one; the claim's lease makes them share the work.
 */
export class VerificationRechecks {
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private ticking: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly pollMs: number;

  constructor(
    private readonly database: Database,
    private readonly domains: CustomDomainService,
    recheckInitialMs: number,
    private readonly onError: (error: unknown) => void = (error) => console.error('custom domain re-check:', error),
  ) {
    // A due check waits at most one poll: never longer than the first delay, so short schedules hold.
    this.pollMs = Math.min(recheckInitialMs, MAX_POLL_MS);
  }

  start(): void {
    this.stopped = false;
    // One poll in, not at once: a short-lived process (a CLI command) closes before it claims any check.
    this.schedule(this.pollMs);
  }

  /** Stops claiming and waits for the checks in flight (each bounded by the resolver's timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
    await Promise.allSettled([...this.inFlight]);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.ticking = this.tick().finally(() => (this.ticking = undefined));
    }, delayMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    try {
      await this.claimAndCheck();
    } catch (error) {
      if (!this.stopped) this.onError(error);
    }
    this.schedule(this.pollMs);
  }

  private async claimAndCheck(): Promise<void> {
    const free = CONCURRENCY - this.inFlight.size;
    if (free <= 0 || this.stopped) return;
    const at = new Date();
    const leaseUntil = new Date(at.getTime() + LEASE_MS).toISOString();
    const claimed = await claimDueChecks(this.database, at.toISOString(), leaseUntil, free);
    for (const claim of claimed) {
      const task = this.domains
        .recheck(claim, leaseUntil)
        .catch((error) => this.onError(error))
        .finally(() => this.inFlight.delete(task));
      this.inFlight.add(task);
    }
  }
}
