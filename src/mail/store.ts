import { claimDueRows, type LeasedTable } from '../db/claim-due.ts';
import type { Database, Tx } from '../db/database.ts';
import type { EmailOutboxTable } from '../db/schema.ts';

/** A stored email: every column of email_outbox. */
export type EmailRecord = EmailOutboxTable;
export type EmailStatus = EmailOutboxTable['status'];

/** What a claim returns of an email: enough to send it, and its attempts so far. */
export type ClaimedRecord = Pick<
  EmailOutboxTable,
  'id' | 'recipient' | 'sender' | 'subject' | 'body' | 'attempt_count'
> & {
  /** The lease it was claimed under: its outcome is recorded only while that lease is still its own. */
  lease: string;
};

/** What an attempt leaves stored (see outcome.ts). */
export interface AttemptRecord {
  status: EmailStatus;
  attemptCount: number;
  nextAttemptAt: string;
  lastError: string | null;
  /** Set when sent: the stored body (and its link) is dropped then. */
  sentAt?: string;
  updatedAt: string;
}

const OUTBOX: LeasedTable<ClaimedRecord> = {
  table: 'email_outbox',
  key: 'id',
  returning: ['id', 'recipient', 'sender', 'subject', 'body', 'attempt_count'],
};

/** Every query on email_outbox, for both dialects. */
export class OutboxStore {
  constructor(private readonly database: Database) {}

  async insert(trx: Tx, record: EmailRecord): Promise<void> {
    await trx.insertInto('email_outbox').values(record).execute();
  }

  /**
   * A page of the tenant's emails, newest first, before the (created_at, id) key `before` when given:
   * a range scan on email_outbox_tenant_created.
   */
  page(
    tenantId: string,
    filter: { status?: EmailStatus; before?: { createdAt: string; id: string } },
    limit: number,
  ): Promise<Array<Omit<EmailRecord, 'body' | 'claimed_until'>>> {
    let q = this.database.db
      .selectFrom('email_outbox')
      .select([
        'id',
        'tenant_id',
        'template',
        'recipient',
        'sender',
        'subject',
        'status',
        'attempt_count',
        'next_attempt_at',
        'last_error',
        'created_at',
        'updated_at',
        'sent_at',
      ])
      .where('tenant_id', '=', tenantId);
    if (filter.status !== undefined) q = q.where('status', '=', filter.status);
    const before = filter.before;
    if (before !== undefined)
      q = q.where((eb) =>
        eb.or([
          eb('created_at', '<', before.createdAt),
          eb.and([eb('created_at', '=', before.createdAt), eb('id', '<', before.id)]),
        ]),
      );
    return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
  }

  async status(tenantId: string, id: string): Promise<EmailStatus | undefined> {
    const row = await this.database.db
      .selectFrom('email_outbox')
      .select('status')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    return row?.status;
  }

  /**
   * Pending emails and those among them due at `at`, for the metrics' backlog gauge: a range scan on
   * email_outbox_due (status, next_attempt_at).
   */
  async backlog(at: string): Promise<{ pending: number; due: number }> {
    const row = await this.database.db
      .selectFrom('email_outbox')
      .select((eb) => [
        eb.fn.countAll<number>().as('pending'),
        eb.fn.sum<number>(eb.case().when('next_attempt_at', '<=', at).then(1).else(0).end()).as('due'),
      ])
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow();
    return { pending: Number(row.pending), due: Number(row.due ?? 0) };
  }

  /** Up to `limit` due emails, each leased for `leaseMs` (see db/claim-due.ts). */
  claimDue(limit: number, leaseMs: number): Promise<ClaimedRecord[]> {
    return claimDueRows(this.database, OUTBOX, { leaseMs }, limit);
  }

  /** Records an attempt's outcome, only if the email is still pending under the lease it was claimed with. */
  async recordAttempt(id: string, lease: string, attempt: AttemptRecord): Promise<void> {
    await this.database.db
      .updateTable('email_outbox')
      .set({
        status: attempt.status,
        attempt_count: attempt.attemptCount,
        next_attempt_at: attempt.nextAttemptAt,
        claimed_until: null,
        last_error: attempt.lastError,
        updated_at: attempt.updatedAt,
        ...(attempt.sentAt === undefined ? {} : { sent_at: attempt.sentAt, body: null }),
      })
      .where('id', '=', id)
      .where('status', '=', 'pending')
      .where('claimed_until', '=', lease)
      .execute();
  }
}
