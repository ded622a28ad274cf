import type { Database, Tx } from '../../../db/database.ts';
import { now, transaction } from '../../../db/database.ts';
import { notFound } from '../../../http/errors.ts';
import { hashSecret } from '../../../secret-hash.ts';
import type { Tenant } from '../../tenants/service.ts';
import type { UserService } from '../../users/service.ts';
import type { DomainContext } from '../domain-context.ts';
import { requireEmail } from '../recipient.ts';
import type { EmailVerificationTicketBody } from './schema.ts';
import { TicketStore, type TicketRecord } from './store.ts';
import { newTicket, ticketState, type NewTicket, type TicketInput } from './ticket.ts';

export { VERIFICATION_PATH, type NewTicket, type TicketInput } from './ticket.ts';

export type Redemption =
  | { kind: 'verified'; resultUrl: string | null; email: string; includeEmailInRedirect: boolean }
  | { kind: 'used' | 'expired'; resultUrl: string | null }
  | { kind: 'invalid' };

/**
 * Email-verification tickets (see ticket.ts). A ticket verifies once, before it expires, and only while
 * the user's email is still the address it was issued for.
 */
export class TicketService {
  private readonly ticketStore: TicketStore;

  constructor(
    private readonly database: Database,
    private readonly users: Pick<UserService, 'get' | 'verifyEmail'>,
  ) {
    this.ticketStore = new TicketStore(database);
  }

  /**
   * A new ticket, not yet stored: its link is known before any transaction opens, so an email can be
   * rendered with it outside the write.
   */
  newTicket(input: TicketInput): NewTicket {
    return newTicket(input, now());
  }

  /** Stores a ticket in the caller's transaction: from then on its link works. */
  async store(trx: Tx, ticket: NewTicket): Promise<void> {
    // A user deleted between its lookup and this insert.
    if (!(await this.ticketStore.insert(trx, ticket.record))) throw notFound.user();
  }

  /** POST /tickets/email-verification: a link on the request's domain, nothing sent. */
  async create(tenant: Tenant, body: EmailVerificationTicketBody, context: DomainContext): Promise<{ ticket: string }> {
    const user = await this.users.get(tenant.id, body.user_id, {
      fields: ['email'],
      includeFields: true,
      withIdpTokens: false,
    });
    const email = requireEmail(user);
    const ticket = this.newTicket({
      tenantId: tenant.id,
      userId: body.user_id,
      email,
      domain: context.domain,
      resultUrl: body.result_url,
      ttlSeconds: body.ttl_sec,
      includeEmailInRedirect: body.includeEmailInRedirect ?? true,
    });
    await transaction(this.database, (trx) => this.store(trx, ticket));
    return { ticket: ticket.url };
  }

  /** Following the link: its first use before expiry verifies the email and spends the ticket. */
  async redeem(tenant: Tenant, ticket: string): Promise<Redemption> {
    const ticketHash = hashSecret(ticket);
    // Read first, outside a transaction: the link is public, so anyone may send made-up, spent or
    // expired tickets, and those are answered without taking the write lock (SQLite's one writer) that
    // a redemption holds. A usable ticket is read again under that lock, which decides.
    const refused = unusable(await this.ticketStore.find(tenant.id, ticketHash), now());
    if (refused) return refused;
    return transaction(this.database, async (trx): Promise<Redemption> => {
      const record = await this.ticketStore.lock(trx, tenant.id, ticketHash);
      const at = now();
      const refusedNow = unusable(record, at);
      if (refusedNow || !record) return refusedNow ?? { kind: 'invalid' };
      if (!(await this.users.verifyEmail(trx, tenant.id, record.user_id, record.email))) return { kind: 'invalid' };
      await this.ticketStore.markUsed(trx, record.ticket_hash, at);
      return {
        kind: 'verified',
        resultUrl: record.result_url,
        email: record.email,
        includeEmailInRedirect: record.include_email_in_redirect === 1,
      };
    });
  }
}

/** What a ticket that cannot be spent (unknown, used or expired) answers; undefined when it can be. */
function unusable(record: TicketRecord | undefined, at: string): Redemption | undefined {
  const state = ticketState(record, at);
  if (state === 'invalid' || !record) return { kind: 'invalid' };
  if (state !== 'usable') return { kind: state, resultUrl: record.result_url };
  return undefined;
}
