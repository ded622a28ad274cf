import { PollingLoop } from '../background/polling-loop.ts';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { noMetrics, type Metrics } from '../observability/metrics.ts';
import type { ClaimedEmail, MailOutbox } from './outbox.ts';
import type { MailOutcome, MailTransport } from './transport.ts';

export type MailSettings = Pick<Config, 'mailRetryScheduleMs' | 'mailPollMs' | 'mailLeaseMs' | 'mailConcurrency'>;

/**
 * The mail outbox worker: claims due emails under a lease, hands them to the transport (SMTP or the
 * development mailbox) and records the outcome (see outcome.ts). A node that dies mid-send leaves its
 * lease to expire and the email is sent again by whichever node claims it next.
 */
export class MailWorker {
  /** Its tracked tasks are the sends in flight. */
  private readonly loop: PollingLoop;

  constructor(
    private readonly outbox: MailOutbox,
    private readonly transport: MailTransport,
    private readonly settings: MailSettings,
    private readonly logger: Logger,
    private readonly metrics: Pick<Metrics, 'email'> = noMetrics,
  ) {
    this.loop = new PollingLoop({
      // A full batch: more may be due, so the next round follows at once.
      round: async () => ((await this.claimAndSend()) ? 0 : settings.mailPollMs),
      afterFailureMs: () => settings.mailPollMs,
      onError: (error) => logger.error({ err: error }, 'mail outbox: a round or a send failed'),
    });
  }

  get description(): string {
    return this.transport.description;
  }

  start(): void {
    this.loop.start(0);
  }

  /** For a restore of the database: no claim is held until resume(); the transport stays open. */
  async pause(): Promise<void> {
    await this.loop.stop();
  }

  resume(): void {
    this.loop.start(0);
  }

  /** Stops claiming, waits for the sends in flight, and closes the transport's connections. */
  async stop(): Promise<void> {
    await this.loop.stop();
    this.transport.close();
  }

  /** Returns true when the batch was full (more may be due at once). */
  private async claimAndSend(): Promise<boolean> {
    const free = this.settings.mailConcurrency - this.loop.inFlight;
    if (free <= 0 || this.loop.stopped) return false;
    const claimed = await this.outbox.claimDue(free, this.settings.mailLeaseMs);
    // A freed slot may let a waiting email go at once.
    for (const email of claimed) this.loop.track(this.deliver(email), () => this.loop.wake());
    return claimed.length === free;
  }

  private async deliver(email: ClaimedEmail): Promise<void> {
    const { id, from, to, subject, html } = email;
    const outcome: MailOutcome =
      html === undefined
        ? { kind: 'rejected', error: 'The stored email cannot be read (was ENCRYPTION_KEY changed?).' }
        : await this.transport.send({ id, from, to, subject, html });
    const status = await this.outbox.recordAttempt(email, outcome, this.settings.mailRetryScheduleMs);
    // The operator learns why the mail server failed; the tenant only that it did (see MailOutcome).
    if (outcome.kind !== 'sent' && outcome.cause !== undefined)
      this.logger.warn(
        { email: id, attempt: email.attemptsBefore + 1, error: outcome.cause, status },
        'mail outbox: the mail server failed a send',
      );
    this.metrics.email(status === 'pending' ? 'retry' : status);
  }
}
