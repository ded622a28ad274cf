import { sql } from 'kysely';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { now } from '../db/database.ts';
import { envelope } from '../modules/event-streams/envelope.ts';
import type { EventStreamService, PublicDestination } from '../modules/event-streams/service.ts';
import { claimDue, type Claimed } from './claim.ts';
import { authHeader, send, type SendOutcome } from './send.ts';

export type DeliverySettings = Pick<
  Config,
  'deliveryTimeoutMs' | 'deliveryRetryScheduleMs' | 'deliveryPollMs' | 'deliveryLeaseMs' | 'deliveryConcurrency' | 'deliveryPerStreamConcurrency'
>;

/**
 * The outbox worker: claims due deliveries under a lease, POSTs them to their webhooks and records
 * every attempt. At most `deliveryConcurrency` sends are in flight, and at most
 * `deliveryPerStreamConcurrency` per stream, so one slow endpoint cannot hold up the others.
 */
export class DeliveryWorker {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private ticking: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly perStream = new Map<string, number>();

  constructor(
    private readonly database: Database,
    private readonly streams: EventStreamService,
    private readonly settings: DeliverySettings,
    private readonly onError: (error: unknown) => void = (error) => console.error('event delivery:', error),
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Stops claiming and waits for the sends in flight (each bounded by the timeout). */
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
    let more = false;
    try {
      more = await this.claimAndSend();
    } catch (error) {
      if (!this.stopped) this.onError(error);
    }
    this.schedule(more ? 0 : this.settings.deliveryPollMs);
  }

  /** Returns true when the batch was full (more may be due at once). */
  private async claimAndSend(): Promise<boolean> {
    const free = this.settings.deliveryConcurrency - this.inFlight.size;
    if (free <= 0 || this.stopped) return false;
    const cap = this.settings.deliveryPerStreamConcurrency;
    const busy = [...this.perStream].filter(([, n]) => n >= cap).map(([id]) => id);
    const at = now();
    const leaseUntil = new Date(Date.now() + this.settings.deliveryLeaseMs).toISOString();
    const claimed = await claimDue(this.database, at, leaseUntil, free, busy);
    const release: Claimed[] = [];
    for (const claim of claimed) {
      const running = this.perStream.get(claim.stream_id) ?? 0;
      if (running >= cap || this.stopped) {
        release.push(claim);
        continue;
      }
      this.perStream.set(claim.stream_id, running + 1);
      const task = this.deliver(claim, leaseUntil)
        .catch((error) => this.onError(error))
        .finally(() => {
          this.inFlight.delete(task);
          const left = (this.perStream.get(claim.stream_id) ?? 1) - 1;
          if (left <= 0) this.perStream.delete(claim.stream_id);
          else this.perStream.set(claim.stream_id, left);
          // A freed slot may let a waiting delivery go at once.
          if (!this.stopped) this.schedule(0);
        });
      this.inFlight.add(task);
    }
    // Over a stream's cap: hand the claim back at once rather than let it wait out its lease.
    for (const claim of release) {
      await this.database.db
        .updateTable('deliveries')
        .set({ claimed_until: null })
        .where('stream_id', '=', claim.stream_id)
        .where('event_id', '=', claim.event_id)
        .where('claimed_until', '=', leaseUntil)
        .execute();
    }
    return claimed.length === free && release.length === 0;
  }

  private async deliver(claim: Claimed, leaseUntil: string): Promise<void> {
    const row = await this.database.db
      .selectFrom('deliveries as d')
      .innerJoin('events as e', 'e.id', 'd.event_id')
      .innerJoin('event_streams as s', 's.id', 'd.stream_id')
      .select(['e.id', 'e.tenant_id', 'e.type', 'e.time', 'e.source', 'e.data', 'e.purpose', 's.destination', 's.secret'])
      .where('d.stream_id', '=', claim.stream_id)
      .where('d.event_id', '=', claim.event_id)
      .executeTakeFirst();
    if (!row) return; // the stream was deleted meanwhile
    const destination = JSON.parse(row.destination) as PublicDestination;
    const auth = destination.configuration.webhook_authorization;
    const header = authHeader(auth.method ?? '', auth, this.streams.openSecret(row.secret));
    const event = envelope(row, claim.stream_id);
    const outcome = await send({ endpoint: destination.configuration.webhook_endpoint, ...(header ? { header } : {}) }, event, this.settings.deliveryTimeoutMs);
    await this.finish(claim, leaseUntil, outcome);
  }

  private async finish(claim: Claimed, leaseUntil: string, outcome: SendOutcome): Promise<void> {
    const at = now();
    const attempt = claim.attempt_count + 1;
    const schedule = this.settings.deliveryRetryScheduleMs;
    let status: 'pending' | 'delivered' | 'failed';
    let nextAt = at;
    if (outcome.kind === 'delivered') status = 'delivered';
    else if (outcome.kind === 'rejected' || attempt > schedule.length) status = 'failed';
    else {
      status = 'pending';
      nextAt = new Date(Date.now() + schedule[attempt - 1]!).toISOString();
    }
    await this.database.db.transaction().execute(async (trx) => {
      // Only the holder of the lease records the outcome: after a redelivery or a re-claim it is someone else's.
      const updated = await trx
        .updateTable('deliveries')
        .set({
          status,
          attempt_count: attempt,
          attempt_seq: sql<number>`attempt_seq + 1`,
          next_attempt_at: nextAt,
          claimed_until: null,
          updated_at: at,
        })
        .where('stream_id', '=', claim.stream_id)
        .where('event_id', '=', claim.event_id)
        .where('status', '=', 'pending')
        .where('claimed_until', '=', leaseUntil)
        .executeTakeFirst();
      if (updated.numUpdatedRows === 0n) return;
      await trx
        .insertInto('delivery_attempts')
        .values({
          stream_id: claim.stream_id,
          event_id: claim.event_id,
          seq: claim.attempt_seq + 1,
          status: outcome.kind === 'delivered' ? 'delivered' : 'failed',
          timestamp: at,
          error_message: outcome.kind === 'delivered' ? null : outcome.error,
          duration: Math.round(outcome.durationMs * 1000) / 1000,
        })
        .execute();
    });
  }
}
