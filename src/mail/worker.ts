import { PollingLoop } from '../background/polling-loop.ts';
import { nextAttemptAt } from '../background/retry-schedule.ts';
import type { Config } from '../config.ts';
import { claimDueRows, type LeasedTable } from '../db/claim-due.ts';
import type { Database } from '../db/database.ts';
import { now } from '../db/database.ts';
import type { EmailOutboxTable } from '../db/schema.ts';
import type { SecretBox } from '../secret-box.ts';
import type { MailOutcome, MailTransport } from './transport.ts';

export type MailSettings = Pick<Config, 'mailRetryScheduleMs' | 'mailPollMs' | 'mailLeaseMs' | 'mailConcurrency'>;

type Claimed = Pick<EmailOutboxTable, 'id' | 'recipient' | 'sender' | 'subject' | 'body' | 'attempt_count'>;

const OUTBOX: LeasedTable<Claimed> = {
  table: 'email_outbox',
  key: 'id',
  returning: ['id', 'recipient', 'sender', 'subject', 'body', 'attempt_count'],
};

/**
 * The mail outbox worker: claims due emails under a lease, hands them to the transport (SMTP or the
 * development mailbox) and records the outcome. Sent → `sent`; refused for good (5xx) → `failed`;
 * anything else is retried on the schedule, then `failed`. A node that dies mid-send leaves its lease
 * to expire and the email is sent again by whichever node claims it next.
 */
export class MailWorker {
  /** Its tracked tasks are the sends in flight. */
  private readonly loop: PollingLoop;

  constructor(
    private readonly database: Database,
    private readonly secretBox: SecretBox,
    private readonly transport: MailTransport,
    private readonly settings: MailSettings,
    onError: (error: unknown) => void = (error) => console.error('mail outbox:', error),
  ) {
    this.loop = new PollingLoop({
      // A full batch: more may be due, so the next round follows at once.
      round: async () => ((await this.claimAndSend()) ? 0 : settings.mailPollMs),
      afterFailureMs: () => settings.mailPollMs,
      onError,
    });
  }

  get description(): string {
    return this.transport.description;
  }

  start(): void {
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
    const claimed = await claimDueRows(this.database, OUTBOX, { leaseMs: this.settings.mailLeaseMs }, free);
    // A freed slot may let a waiting email go at once.
    for (const email of claimed) this.loop.track(this.deliver(email, email.lease), () => this.loop.wake());
    return claimed.length === free;
  }

  private async deliver(email: Claimed, leaseUntil: string): Promise<void> {
    const html = this.open(email.body);
    const outcome: MailOutcome = html === undefined
      ? { kind: 'rejected', error: 'The stored email cannot be read (was ENCRYPTION_KEY changed?).' }
      : await this.transport.send({ id: email.id, from: email.sender, to: email.recipient, subject: email.subject, html });
    await this.finish(email, leaseUntil, outcome);
  }

  /** A body sealed under another key can never be sent: it fails rather than being claimed again forever. */
  private open(body: string | null): string | undefined {
    if (body === null) return undefined;
    try {
      return this.secretBox.open(body);
    } catch {
      return undefined;
    }
  }

  private async finish(email: Claimed, leaseUntil: string, outcome: MailOutcome): Promise<void> {
    const at = now();
    const attempt = email.attempt_count + 1;
    const retryAt = outcome.kind === 'retryable' ? nextAttemptAt(this.settings.mailRetryScheduleMs, attempt) : undefined;
    const status = outcome.kind === 'sent' ? 'sent' : retryAt !== undefined ? 'pending' : 'failed';
    // Only the holder of the lease records the outcome; a sent email keeps no copy of its link.
    await this.database.db
      .updateTable('email_outbox')
      .set({
        status,
        attempt_count: attempt,
        next_attempt_at: retryAt ?? at,
        claimed_until: null,
        last_error: outcome.kind === 'sent' ? null : outcome.error,
        updated_at: at,
        ...(outcome.kind === 'sent' ? { sent_at: at, body: null } : {}),
      })
      .where('id', '=', email.id)
      .where('status', '=', 'pending')
      .where('claimed_until', '=', leaseUntil)
      .execute();
  }
}
