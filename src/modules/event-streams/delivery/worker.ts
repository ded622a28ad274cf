import { PollingLoop } from '../../../background/polling-loop.ts';
import type { Config } from '../../../config.ts';
import type { Database } from '../../../db/database.ts';
import { databaseUnavailable } from '../../../db/unavailable.ts';
import { now, ping } from '../../../db/database.ts';
import type { Logger } from '../../../logger.ts';
import { noMetrics, type Metrics } from '../../../observability/metrics.ts';
import type { SecretBox } from '../../../secret-box.ts';
import { openSecret, type PublicDestination } from '../destinations.ts';
import { envelopeJson } from '../envelope.ts';
import { live, openSigningSecrets, signingKey, type StoredSigningSecret } from '../signing-secret-rotation.ts';
import { claimDue, releaseClaims, type Claimed } from '../store/claim.ts';
import { recordOutcomes } from '../store/outcomes.ts';
import type { DeliveryWakeup } from '../store/wakeup.ts';
import { disabledReason, type CircuitRules } from './circuit.ts';
import type { EndpointGuard } from './endpoint-guard.ts';
import { outcomeOf, type Outcome } from './outcome.ts';
import { authHeader, WebhookSender, type WebhookTarget } from './send.ts';
import { BoundedCache, stringBytes } from '../../../bounded-cache.ts';

export type DeliverySettings = Pick<
  Config,
  | 'deliveryTimeoutMs'
  | 'deliveryRetryScheduleMs'
  | 'deliveryRetryAfterMaxMs'
  | 'deliveryPollMs'
  | 'deliveryLeaseMs'
  | 'deliveryConcurrency'
  | 'deliveryPerStreamConcurrency'
  | 'deliveryBreakerFailures'
  | 'deliveryBreakerCooldownMs'
  | 'deliveryDisableAfterFailures'
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

/** A quarter of the slots are kept for streams with nothing in flight (see ClaimLimits.reserve). */
const RESERVE_DIVISOR = 4;

/** Opened targets kept: 1,000 streams and 8 MiB (a destination's JSON and sealed secrets, charged as stored). */
const TARGET_CACHE_BOUNDS = { entries: 1000, bytes: 8 * 1024 * 1024 };

/**
 * The outbox worker: claims due deliveries under a lease, POSTs them to their webhooks and records
 * every attempt. At most `deliveryConcurrency` sends are in flight, at most `deliveryPerStreamConcurrency`
 * per stream, and a quarter of the slots only for streams with nothing in flight, so endpoints that hang
 * cannot hold up the others. A stream whose attempts keep failing has its circuit opened (its deliveries
 * wait, then one probe goes), and after `deliveryDisableAfterFailures` in a row it is disabled.
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
  /** Attempts whose recording failed on its own (see flush): tried after the others. */
  private readonly failedAlone = new WeakSet<Outcome>();
  /** The earliest retry this worker scheduled that has not fallen due yet (epoch ms). */
  private nextRetryAt = Infinity;
  /**
   * When the last claim left slots free (epoch ms), until something may let the next find more; 0 when
   * a claim may find more. A claim that finds nothing still reads the database, and a round runs on every
   * send that finishes: with every stream at its cap, or only reserved slots free, each round's claim
   * found nothing, and those claims took more CPU than the deliveries (docs/benchmarks.md).
   */
  private shortfallAt = 0;
  /** Counts what may let a claim find more (see mayFindMore); a claim under way then does not set shortfallAt. */
  private loosened = 0;
  private readonly targets = new BoundedCache<CachedTarget>(TARGET_CACHE_BOUNDS);
  private readonly sender: WebhookSender;
  private readonly circuit: CircuitRules;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly database: Database,
    /** Opens the streams' sealed webhook secrets and signing secrets. */
    private readonly secretBox: SecretBox,
    private readonly settings: DeliverySettings,
    /** The same guard that checked the endpoints when their streams were saved; undefined in development mode. */
    guard: EndpointGuard | undefined,
    private readonly wakeup: DeliveryWakeup | undefined,
    private readonly logger: Logger,
    private readonly metrics: Pick<Metrics, 'delivery' | 'deliveryClaim'> = noMetrics,
  ) {
    this.sender = new WebhookSender(guard, settings.deliveryTimeoutMs);
    const reason = disabledReason(settings.deliveryDisableAfterFailures);
    this.circuit = {
      openAfter: settings.deliveryBreakerFailures,
      cooldownMs: settings.deliveryBreakerCooldownMs,
      disableAfter: settings.deliveryDisableAfterFailures,
      onDisabled: (streamId) =>
        logger.warn(
          { eventStream: streamId },
          `event stream ${streamId} disabled: ${reason} PATCH {"status":"enabled"} enables it again.`,
        ),
    };
    // A failed round (a claim or a recording) is tried again at the next; a send that failed before its
    // outcome was known goes again once its lease runs out.
    const onError = (error: unknown) => logger.error({ err: error }, 'event delivery failed');
    this.loop = new PollingLoop({ round: () => this.round(), afterFailureMs: () => this.untilNextRound(), onError });
  }

  start(): void {
    if (!this.loop.stopped) return;
    this.unlisten = this.wakeup?.listen(
      () => {
        // New deliveries were committed.
        this.mayFindMore();
        this.loop.wake();
      },
      (error) => this.logger.error({ err: error }, 'event delivery: the wake-up listener failed; polling carries on'),
    );
    this.loop.start(0);
  }

  /**
   * For a restore of the database: stops claiming, waits for the sends in flight and records their
   * attempts; throws when the database fails meanwhile. An attempt whose own record keeps failing (see
   * flush) stays unrecorded and is tried again after resume().
   */
  async pause(): Promise<void> {
    await this.loop.stop();
    await this.flush();
    this.targets.clear();
    this.nextRetryAt = Infinity;
  }

  resume(): void {
    this.mayFindMore();
    this.loop.start(0);
  }

  /** Stops claiming, waits for the sends in flight (each bounded by the timeout) and records their attempts. */
  async stop(): Promise<void> {
    const stopping = this.loop.stop();
    await this.unlisten?.();
    this.unlisten = undefined;
    await stopping;
    await this.flush().catch((error) =>
      this.logger.error({ err: error }, 'event delivery: recording the last attempts failed'),
    );
    if (this.finished.length > 0) {
      this.logger.error(
        { attempts: this.finished.length },
        'event delivery: stopped with attempts unrecorded; their deliveries are sent again once their leases run out',
      );
    }
    await this.sender.close();
  }

  private async round(): Promise<number> {
    const startedAt = Date.now();
    try {
      // Recorded first: a finished delivery's row leaves the claimable set, or becomes due at its retry.
      await this.flush();
      if (await this.claimAndSend()) return 0;
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

  /**
   * Records the finished attempts, in the order they ended: all in one batch, and when the batch fails,
   * one at a time, so that an attempt whose record fails on its own (a bug, a constraint) holds back no
   * other. Whether a failure is the attempt's own or the database's is decided on the error and on a
   * probe of the database (see databaseFailed): when the database failed, every attempt not yet
   * recorded is put back in its order, unmarked, and the error ends the round, however long the outage.
   * An attempt whose own record failed is marked, tried alone after the others' batch at each round,
   * logged when it first fails, and given up (logged, counted as `unrecorded`) once it fails after its
   * lease ran out: its delivery is claimable again by then, and is sent again (at-least-once).
   */
  private async flush(): Promise<void> {
    if (this.finished.length === 0) return;
    const taken = this.finished;
    this.finished = [];
    const fresh = taken.filter((outcome) => !this.failedAlone.has(outcome));
    const marked = taken.filter((outcome) => this.failedAlone.has(outcome));
    const done = new Set<Outcome>();
    /** The attempts of this flush not recorded nor given up, in the order they ended, before any that ended meanwhile. */
    const putBack = () => (this.finished = [...taken.filter((outcome) => !done.has(outcome)), ...this.finished]);
    // One attempt alone is its own batch: its statement is not run twice.
    let alone = [...fresh, ...marked];
    let batchError: unknown;
    if (fresh.length > 1) {
      try {
        await recordOutcomes(this.database, fresh, this.circuit);
        for (const outcome of fresh) done.add(outcome);
        this.counted(fresh);
        alone = marked;
      } catch (error) {
        if (await this.databaseFailed(error)) {
          putBack();
          throw error;
        }
        batchError = error;
      }
    }
    for (const outcome of alone) {
      let error: unknown;
      try {
        // 0 when the lease is no longer this attempt's (the delivery was claimed again): nothing to count.
        if ((await recordOutcomes(this.database, [outcome], this.circuit)) === 1) this.counted([outcome]);
        done.add(outcome);
        continue;
      } catch (caught) {
        error = caught;
      }
      if (await this.databaseFailed(error)) {
        putBack();
        throw error;
      }
      const failedBefore = this.failedAlone.has(outcome);
      this.failedAlone.add(outcome);
      const attempt = `the attempt of event ${outcome.event_id} to stream ${outcome.stream_id}`;
      if (Date.parse(outcome.lease) <= Date.now()) {
        done.add(outcome);
        this.metrics.delivery('unrecorded');
        this.logger.error(
          { err: new Error(`${attempt} could not be recorded and is given up`, { cause: error }) },
          'event delivery: an attempt could not be recorded; its lease ran out, so the delivery is sent again',
        );
      } else if (!failedBefore) {
        this.logger.error(
          { err: new Error(`recording ${attempt} failed`, { cause: error }) },
          'event delivery: an attempt could not be recorded; it is tried again, alone, at the next rounds',
        );
      }
    }
    putBack();
    if (batchError !== undefined) {
      this.logger.warn(
        { err: batchError, attempts: fresh.length },
        'event delivery: recording the attempts together failed; they were recorded one at a time',
      );
    }
  }

  /**
   * Whether a failed record says the database failed, rather than that attempt's record: a condition
   * of the database (disk, lock, connection: see databaseUnavailable), or a ping that fails too.
   */
  private async databaseFailed(error: unknown): Promise<boolean> {
    if (databaseUnavailable(error)) return true;
    try {
      await ping(this.database);
      return false;
    } catch {
      return true;
    }
  }

  /** Counted once recorded: a batch whose recording failed is counted when it is recorded again. */
  private counted(recorded: readonly Outcome[]): void {
    for (const outcome of recorded) {
      this.metrics.delivery(outcome.status === 'pending' ? 'retry' : outcome.status);
      if (outcome.status === 'pending')
        this.nextRetryAt = Math.min(this.nextRetryAt, Date.parse(outcome.next_attempt_at));
    }
  }

  /** Returns true when another claim should follow at once: this one took some but left slots free. */
  private async claimAndSend(): Promise<boolean> {
    const free = this.settings.deliveryConcurrency - this.loop.inFlight;
    if (free <= 0 || this.loop.stopped) return false;
    // What a claim cannot know from here (a retry or a lease coming due, a circuit closing, another
    // process's writes) is looked for at the poll's pace.
    if (this.nextRetryAt <= Date.now()) this.mayFindMore();
    if (this.shortfallAt > 0 && Date.now() - this.shortfallAt < this.settings.deliveryPollMs) return false;
    const reserve = this.reserve();
    const loosened = this.loosened;
    // The claim leaves each stream only the room its cap leaves next to this worker's sends in flight.
    const claimed = await claimDue(
      this.database,
      { leaseMs: this.settings.deliveryLeaseMs },
      {
        limit: free,
        perStream: this.settings.deliveryPerStreamConcurrency,
        reserve,
        breakerFailures: this.settings.deliveryBreakerFailures,
        running: this.perStream,
      },
    );
    this.metrics.deliveryClaim(claimed.length);
    this.shortfallAt = claimed.length < free && this.loosened === loosened ? Date.now() : 0;
    // Stopped while claiming: nothing more starts.
    if (this.loop.stopped) {
      if (claimed.length > 0) await releaseClaims(this.database, claimed);
      return false;
    }
    for (const claim of claimed) {
      this.perStream.set(claim.stream_id, (this.perStream.get(claim.stream_id) ?? 0) + 1);
      this.loop.track(this.deliver(claim), () => {
        const left = (this.perStream.get(claim.stream_id) ?? 1) - 1;
        if (left <= 0) this.perStream.delete(claim.stream_id);
        else this.perStream.set(claim.stream_id, left);
        // The stream has room again: a claim may find its next delivery if the stream is now idle or the
        // free slots go beyond the reserved ones (see ClaimLimits.reserve).
        if (left <= 0 || this.settings.deliveryConcurrency - this.loop.inFlight > reserve) this.mayFindMore();
        this.loop.wake();
      });
    }
    // The streams just served may have filled the claim's window with their backlog: the next claim,
    // with them at their cap, reaches the streams behind.
    return claimed.length > 0 && claimed.length < free;
  }

  private mayFindMore(): void {
    this.shortfallAt = 0;
    this.loosened++;
  }

  private reserve(): number {
    return Math.floor(this.settings.deliveryConcurrency / RESERVE_DIVISOR);
  }

  private async deliver(claim: Claimed): Promise<void> {
    const { target, signing } = this.target(claim);
    // Signed with the secrets still signing now, newest first (none: unsigned).
    const signingKeys = live(signing, now()).map(signingKey);
    const sent = await this.sender.send(
      { ...target, signingKeys },
      claim.event_id,
      envelopeJson(claim.event_id, claim, claim.stream_id),
    );
    this.finished.push(outcomeOf(claim, sent, this.settings, now()));
  }

  /** The stream's endpoint, header and signing secrets, opened (JSON, sealed secrets) once per version of the stream. */
  private target(claim: Claimed): CachedTarget {
    const cached = this.targets.get(claim.stream_id);
    if (
      cached &&
      cached.destination === claim.destination &&
      cached.secret === claim.secret &&
      cached.signing_secrets === claim.signing_secrets
    ) {
      return cached;
    }
    const destination = JSON.parse(claim.destination) as PublicDestination;
    const auth = destination.configuration.webhook_authorization;
    const header = authHeader(auth.method ?? '', auth, openSecret(this.secretBox, claim.secret));
    const opened: CachedTarget = {
      destination: claim.destination,
      secret: claim.secret,
      signing_secrets: claim.signing_secrets,
      target: { endpoint: destination.configuration.webhook_endpoint, ...(header ? { header } : {}) },
      signing: openSigningSecrets(this.secretBox, claim.signing_secrets),
    };
    // Charged twice what is stored: the opened copies (header, secrets) are about as long again.
    const stored = stringBytes(claim.destination) + stringBytes(claim.secret) + stringBytes(claim.signing_secrets);
    this.targets.set(claim.stream_id, opened, 2 * stored);
    return opened;
  }
}
