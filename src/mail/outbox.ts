import type { Database, Tx } from '../db/database.ts';
import { now } from '../db/database.ts';
import { newId } from '../ids.ts';
import type { SecretBox } from '../secret-box.ts';
import { afterAttempt } from './outcome.ts';
import { OutboxStore, type EmailStatus } from './store.ts';
import type { MailOutcome } from './transport.ts';

export type { EmailStatus } from './store.ts';

export interface QueuedEmail {
  tenantId: string;
  /** The template it was rendered from, e.g. `verify_email`. */
  template: string;
  from: string;
  to: string;
  subject: string;
  html: string;
  /** Set when the email could not even be rendered: it is recorded failed with this reason, and never sent. */
  failure?: string;
}

/** A claimed email, ready for a transport; `html` is undefined when its stored body cannot be read. */
export interface ClaimedEmail {
  id: string;
  from: string;
  to: string;
  subject: string;
  html: string | undefined;
  attemptsBefore: number;
  lease: string;
}

/**
 * The mail outbox, owner of email_outbox. Emails are queued in the transaction of the change that sends
 * them: if that change rolls back, no email exists; once it commits, the mail worker sends it (at
 * least once). The body holds a verification link, so it is sealed at rest, and dropped once sent.
 */
export class MailOutbox {
  private readonly store: OutboxStore;

  constructor(
    database: Database,
    private readonly secretBox: SecretBox,
  ) {
    this.store = new OutboxStore(database);
  }

  /** Queues an email in the caller's transaction; returns its id. */
  async queue(trx: Tx, email: QueuedEmail): Promise<string> {
    const id = newId.email();
    const at = now();
    await this.store.insert(trx, {
      id,
      tenant_id: email.tenantId,
      template: email.template,
      recipient: email.to,
      sender: email.from,
      subject: email.subject,
      body: email.failure === undefined ? this.secretBox.seal(email.html) : null,
      status: email.failure === undefined ? 'pending' : 'failed',
      attempt_count: 0,
      next_attempt_at: at,
      claimed_until: null,
      last_error: email.failure ?? null,
      created_at: at,
      updated_at: at,
      sent_at: null,
    });
    return id;
  }

  /** pending, sent or failed; undefined when the tenant has no such email. */
  status(tenantId: string, id: string): Promise<EmailStatus | undefined> {
    return this.store.status(tenantId, id);
  }

  /** Up to `limit` due emails, each leased for `leaseMs`: no other worker claims them meanwhile. */
  async claimDue(limit: number, leaseMs: number): Promise<ClaimedEmail[]> {
    const claimed = await this.store.claimDue(limit, leaseMs);
    return claimed.map((record) => ({
      id: record.id,
      from: record.sender,
      to: record.recipient,
      subject: record.subject,
      html: this.open(record.body),
      attemptsBefore: record.attempt_count,
      lease: record.lease,
    }));
  }

  /** Records how an attempt went (see outcome.ts); only the holder of the email's lease can. */
  async recordAttempt(email: ClaimedEmail, outcome: MailOutcome, retryScheduleMs: readonly number[]): Promise<void> {
    await this.store.recordAttempt(
      email.id,
      email.lease,
      afterAttempt(outcome, email.attemptsBefore, retryScheduleMs, now()),
    );
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
}
