import type { Database, Tx } from '../db/database.ts';
import { now } from '../db/database.ts';
import { decodeCursor, encodeCursor } from '../http/cursor.ts';
import { newId } from '../ids.ts';
import type { SecretBox } from '../secret-box.ts';
import { afterAttempt } from './outcome.ts';
import { OutboxStore, type EmailStatus } from './store.ts';
import type { MailOutcome } from './transport.ts';

export type { EmailStatus } from './store.ts';

/** An email as GET /api/v2/emails/outbox shows it: never its body (it holds a verification link). */
export interface OutboxEmail {
  id: string;
  template: string;
  from: string;
  to: string;
  subject: string;
  status: EmailStatus;
  attempts: number;
  last_error?: string;
  created_at: string;
  sent_at?: string;
  next_attempt_at?: string;
}

/** A page cursor's key: the last email's creation time and id. */
const CURSOR_KEY = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)\|(msg_[1-9A-HJ-NP-Za-km-z]{22})$/;

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

  /** The tenant's emails, newest first, optionally of one status; `from` is the previous page's `next`. */
  async list(
    tenantId: string,
    query: { status?: EmailStatus; from?: string; take?: number },
  ): Promise<{ emails: OutboxEmail[]; next?: string }> {
    const take = query.take ?? 50;
    const key =
      query.from === undefined ? undefined : CURSOR_KEY.exec(decodeCursor(query.from, (k) => CURSOR_KEY.test(k)));
    const before = key ? { createdAt: key[1]!, id: key[2]! } : undefined;
    const rows = await this.store.page(
      tenantId,
      { ...(query.status ? { status: query.status } : {}), ...(before ? { before } : {}) },
      take + 1,
    );
    const page = rows.slice(0, take);
    const last = page[page.length - 1];
    const emails = page.map((row) => ({
      id: row.id,
      template: row.template,
      from: row.sender,
      to: row.recipient,
      subject: row.subject,
      status: row.status,
      attempts: row.attempt_count,
      ...(row.last_error === null ? {} : { last_error: row.last_error }),
      created_at: row.created_at,
      ...(row.sent_at === null ? {} : { sent_at: row.sent_at }),
      ...(row.status === 'pending' ? { next_attempt_at: row.next_attempt_at } : {}),
    }));
    return { emails, ...(rows.length > take && last ? { next: encodeCursor(`${last.created_at}|${last.id}`) } : {}) };
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
  /** Records the attempt; returns the email's status after it (pending: to be retried). */
  async recordAttempt(
    email: ClaimedEmail,
    outcome: MailOutcome,
    retryScheduleMs: readonly number[],
  ): Promise<EmailStatus> {
    const attempt = afterAttempt(outcome, email.attemptsBefore, retryScheduleMs, now());
    await this.store.recordAttempt(email.id, email.lease, attempt);
    return attempt.status;
  }

  /** Pending emails, and those among them due now. */
  backlog(): Promise<{ pending: number; due: number }> {
    return this.store.backlog(now());
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
