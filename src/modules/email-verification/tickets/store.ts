import type { Selectable } from 'kysely';
import { isForeignKeyViolation, type Database, type Tx } from '../../../db/database.ts';
import type { EmailVerificationTicketsTable } from '../../../db/schema.ts';

/** A stored ticket: every column of email_verification_tickets (the ticket itself only as its hash). */
export type TicketRecord = Selectable<EmailVerificationTicketsTable>;

/** Every query on email_verification_tickets, for both dialects. */
export class TicketStore {
  constructor(private readonly database: Database) {}

  /** Inserts a ticket in the caller's transaction; false when its user no longer exists. */
  async insert(trx: Tx, record: TicketRecord): Promise<boolean> {
    try {
      await trx.insertInto('email_verification_tickets').values(record).execute();
      return true;
    } catch (error) {
      if (isForeignKeyViolation(error)) return false;
      throw error;
    }
  }

  /** The tenant's ticket of that hash, read outside any transaction. */
  async find(tenantId: string, ticketHash: string): Promise<TicketRecord | undefined> {
    return this.select(this.database.db, tenantId, ticketHash).executeTakeFirst();
  }

  /** The tenant's ticket of that hash, locked until the transaction ends (PostgreSQL; SQLite writes are serialised). */
  async lock(trx: Tx, tenantId: string, ticketHash: string): Promise<TicketRecord | undefined> {
    return this.select(trx, tenantId, ticketHash)
      .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
      .executeTakeFirst();
  }

  private select(db: Database['db'], tenantId: string, ticketHash: string) {
    return db
      .selectFrom('email_verification_tickets')
      .selectAll()
      .where('ticket_hash', '=', ticketHash)
      .where('tenant_id', '=', tenantId);
  }

  async markUsed(trx: Tx, ticketHash: string, at: string): Promise<void> {
    await trx
      .updateTable('email_verification_tickets')
      .set({ used_at: at })
      .where('ticket_hash', '=', ticketHash)
      .execute();
  }
}
