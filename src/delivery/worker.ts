import { PollingLoop } from '../background/polling-loop.ts';
import { nextAttemptAt } from '../background/retry-schedule.ts';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import { now } from '../db/database.ts';
import { envelope } from '../modules/event-streams/envelope.ts';
import type { EventStreamService, PublicDestination } from '../modules/event-streams/service.ts';
import { live, signingKey, type StoredSigningSecret } from '../modules/event-streams/signing-secrets.ts';
import { claimDue, releaseClaims, type Claimed } from './claim.ts';
import type { EndpointGuard } from './endpoint-guard.ts';
import { recordOutcomes, type Outcome } from './outcomes.ts';
import { authHeader, WebhookSender, type SendOutcome, type WebhookTarget } from './send.ts';
import type { DeliveryWakeup } from './wakeup.ts';

export type DeliverySettings = Pick<
  Config,
  'deliveryTimeoutMs' | 'deliveryRetryScheduleMs' | 'deliveryRetryAfterMaxMs' | 'deliveryPollMs' | 'deliveryLeaseMs' | 'deliveryConcurrency' | 'deliveryPerStreamConcurrency'
>;

/** A stream's opened endpoint, credentials header and signing secrets, kept while their stored forms stay the same. */
interface CachedTarget {
  destination: string;
  secret: string | null;
  signing_secrets: string | null;
  target: WebhookTarget;
  /** Expired ones included: which still sign is decided at each send. */
  signing: StoredSigningSecret[];
}

/** Streams whose opened target is kept; past it the cache starts over. */
const TARGET_CACHE_LIMIT = 1000;

/**
 * The outbox worker: claims due deliveries under a lease, POSTs them to their webhooks and records
 * every attempt. At most `deliveryConcurrency` sends are in flight, and at most
 * `deliveryPerStreamConcurrency` per stream, so one slow endpoint cannot hold up the others.
 *
 * The work is done in rounds, one at a time (see PollingLoop): a round records the attempts finished
 * since the last one (all in one transaction) and fills the free slots with one claim. It runs when a
 * send finishes, when a commit queued deliveries (see DeliveryWakeup), when a retry it scheduled falls
 * due, and otherwise every DELIVERY_POLL_MS. A crash between a send and its record leaves the delivery
 * leased; it goes again once the lease runs out (at-least-once).
 */
export class DeliveryWorker {
  /** Its tracked tasks are the sends in flight. */
  private readonly loop: PollingLoop;
  private readonly perStream = new Map<string, number>();
  /** Attempts finished and not yet recorded. */
  private finished: Outcome[] = [];
  /** The earliest retry this worker scheduled that has not fallen due yet (epoch ms). */
  private nextRetryAt = Infinity;
  private readonly targets = new Map<string, CachedTarget>();
  private readonly sender: WebhookSender;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly database: Database,
    private readonly streams: EventStreamService,
    private readonly settings: DeliverySettings,
    /** The same guard that checked the endpoints when their streams were saved; undefined in development mode. */
    guard: EndpointGuard | undefined,
    private readonly wakeup?: DeliveryWakeup,
    private readonly onError: (error: unknown) => void = (error) => console.error('event delivery:', error),
  ) {
    this.sender = new WebhookSender(guard, settings.deliveryTimeoutMs);
    this.loop = new PollingLoop({ round: () => this.round(), afterFailureMs: () => this.untilNextRound(), onError });
  }

  start(): void {
    if (!this.loop.stopped) return;
    this.unlisten = this.wakeup?.listen(() => this.loop.wake(), (error) => this.onError(error));
    this.loop.start(0);
  }

  /** Stops claiming, waits for the sends in flight (each bounded by the timeout) and records their attempts. */
  async stop(): Promise<void> {
    const stopping = this.loop.stop();
    await this.unlisten?.();
    this.unlisten = undefined;
    await stopping;
    await this.flush().catch((error) => this.onError(error));
    await this.sender.close();
  }

  private async round(): Promise<number> {
    const startedAt = Date.now();
    try {
      // Recorded first: a finished delivery's row leaves the claimable set, or becomes due at its retry.
      await this.flush();
      await this.claimAndSend();
    } finally {
      // A retry due when this round began had its claim; if its stream had no room, a send finishing wakes the worker again.
      if (this.nextRetryAt < startedAt) this.nextRetryAt = Infinity;
    }
    return this.untilNextRound();
  }

  /** The poll, or less when a retry this worker scheduled falls due sooner. */
  private untilNextRound(): number {
    return Math.min(this.settings.deliveryPollMs, Math.max(0, this.nextRetryAt - Date.now()));
  }

  private async flush(): Promise<void> {
    if (this.finished.length === 0) return;
    const batch = this.finished;
    this.finished = [];
    try {
      await recordOutcomes(this.database, batch);
    } catch (error) {
      // Tried again next round; their leases keep the deliveries from being claimed meanwhile.
      this.finished = batch.concat(this.finished);
      throw error;
    }
    for (const outcome of batch) {
      if (outcome.status === 'pending') this.nextRetryAt = Math.min(this.nextRetryAt, Date.parse(outcome.next_attempt_at));
    }
  }

  private async claimAndSend(): Promise<void> {
    const free = this.settings.deliveryConcurrency - this.loop.inFlight;
    if (free <= 0 || this.loop.stopped) return;
    const leaseUntil = new Date(Date.now() + this.settings.deliveryLeaseMs).toISOString();
    // The claim leaves each stream only the room its cap leaves next to this worker's sends in flight.
    const claimed = await claimDue(this.database, now(), leaseUntil, {
      limit: free, perStream: this.settings.deliveryPerStreamConcurrency, running: this.perStream,
    });
    // Stopped while claiming: nothing more starts.
    if (this.loop.stopped) {
      if (claimed.length > 0) await releaseClaims(this.database, claimed);
      return;
    }
    for (const claim of claimed) {
      this.perStream.set(claim.stream_id, (this.perStream.get(claim.stream_id) ?? 0) + 1);
      this.loop.track(this.deliver(claim), () => {
        const left = (this.perStream.get(claim.stream_id) ?? 1) - 1;
        if (left <= 0) this.perStream.delete(claim.stream_id);
        else this.perStream.set(claim.stream_id, left);
        this.loop.wake();
      });
    }
  }

  private async deliver(claim: Claimed): Promise<void> {
    const { target, signing } = this.target(claim);
    // Signed with the secrets still signing now, newest first (none: unsigned).
    const signingKeys = live(signing, now()).map(signingKey);
    const sent = await this.sender.send({ ...target, signingKeys }, envelope({ ...claim, id: claim.event_id }, claim.stream_id));
    this.finished.push(this.outcome(claim, sent));
  }

  /** The stream's endpoint, header and signing secrets, opened (JSON, sealed secrets) once per version of the stream. */
  private target(claim: Claimed): CachedTarget {
    const cached = this.targets.get(claim.stream_id);
    if (cached && cached.destination === claim.destination && cached.secret === claim.secret && cached.signing_secrets === claim.signing_secrets) {
      return cached;
    }
    const destination = JSON.parse(claim.destination) as PublicDestination;
    const auth = destination.configuration.webhook_authorization;
    const header = authHeader(auth.method ?? '', auth, this.streams.openSecret(claim.secret));
    const opened: CachedTarget = {
      destination: claim.destination,
      secret: claim.secret,
      signing_secrets: claim.signing_secrets,
      target: { endpoint: destination.configuration.webhook_endpoint, ...(header ? { header } : {}) },
      signing: this.streams.openSigning(claim.signing_secrets),
    };
    if (this.targets.size >= TARGET_CACHE_LIMIT) this.targets.clear();
    this.targets.set(claim.stream_id, opened);
    return opened;
  }

  private outcome(claim: Claimed, sent: SendOutcome): Outcome {
    const at = now();
    const attempt = claim.attempt_count + 1;
    // An endpoint's Retry-After may push the retry later, up to the cap, but never adds attempts.
    const asked = sent.kind === 'retryable' ? Math.min(sent.retryAfterMs ?? 0, this.settings.deliveryRetryAfterMaxMs) : 0;
    const retryAt = sent.kind === 'retryable' ? nextAttemptAt(this.settings.deliveryRetryScheduleMs, attempt, asked) : undefined;
    const status: Outcome['status'] = sent.kind === 'delivered' ? 'delivered' : retryAt !== undefined ? 'pending' : 'failed';
    return {
      stream_id: claim.stream_id,
      event_id: claim.event_id,
      lease: claim.claimed_until,
      status,
      attempt_count: attempt,
      next_attempt_at: retryAt ?? at,
      at,
      seq: claim.attempt_seq + 1,
      attempt_status: sent.kind === 'delivered' ? 'delivered' : 'failed',
      error_message: sent.kind === 'delivered' ? null : sent.error,
      duration: Math.round(sent.durationMs * 1000) / 1000,
    };
  }
}
