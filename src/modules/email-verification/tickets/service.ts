import { randomBytes } from 'node:crypto';
import type { Insertable } from 'kysely';
import type { Database, Tx } from '../../../db/database.ts';
import { isForeignKeyViolation, now } from '../../../db/database.ts';
import type { EmailVerificationTicketsTable } from '../../../db/schema.ts';
import { notFound } from '../../../http/errors.ts';
import { hashSecret } from '../../../secret-hash.ts';
import { DEFAULT_LINK_LIFETIME_SECONDS } from '../../email-templates/schema.ts';
import type { DomainContext } from '../domain-context.ts';
import { requireEmail } from '../service.ts';
import type { Tenant } from '../../tenants/service.ts';
import type { UserService } from '../../users/service.ts';
import type { EmailVerificationTicketBody } from './schema.ts';

/** Where a verification link points, on whichever of the tenant's domains it was built for. */
export const VERIFICATION_PATH = '/u/email-verification';

export interface TicketInput {
  tenantId: string;
  userId: string;
  email: string;
  domain: string;
  resultUrl: string | undefined;
  /** 0 or absent: five days, as the original. */
  ttlSeconds: number | undefined;
  includeEmailInRedirect: boolean;
}

/** A new ticket: its link, and the row that makes the link work once `store` writes it. */
export interface NewTicket {
  url: string;
  row: Insertable<EmailVerificationTicketsTable>;
}

export type Redemption =
  | { kind: 'verified'; resultUrl: string | null; email: string; includeEmailInRedirect: boolean }
  | { kind: 'used' | 'expired'; resultUrl: string | null }
  | { kind: 'invalid' };

/**
 * Email-verification tickets. The link carries 256 random bits; only their SHA-256 is stored, so the
 * database never holds a usable link. A ticket verifies once, before it expires, and only while the
 * user's email is still the address it was issued for.
 */
export class TicketService {
  constructor(
    private readonly database: Database,
    private readonly users: UserService,
  ) {}

  /**
   * A new ticket, not yet stored: its link is known before any transaction opens, so an email can be
   * rendered with it outside the write.
   */
  newTicket(input: TicketInput): NewTicket {
    const ticket = randomBytes(32).toString('base64url');
    const at = now();
    const lifetime = input.ttlSeconds || DEFAULT_LINK_LIFETIME_SECONDS;
    return {
      url: `https://${input.domain}${VERIFICATION_PATH}?ticket=${ticket}`,
      row: {
        ticket_hash: hashSecret(ticket),
        tenant_id: input.tenantId,
        user_id: input.userId,
        email: input.email,
        result_url: input.resultUrl ?? null,
        include_email_in_redirect: input.includeEmailInRedirect ? 1 : 0,
        expires_at: new Date(Date.parse(at) + lifetime * 1000).toISOString(),
        used_at: null,
        created_at: at,
      },
    };
  }

  /** Stores a ticket in the caller's transaction: from then on its link works. */
  async store(trx: Tx, ticket: NewTicket): Promise<void> {
    try {
      await trx.insertInto('email_verification_tickets').values(ticket.row).execute();
    } catch (error) {
      // A user deleted between its lookup and this insert.
      if (isForeignKeyViolation(error)) throw notFound.user();
      throw error;
    }
  }

  /** POST /tickets/email-verification: a link on the request's domain, nothing sent. */
  async create(tenant: Tenant, body: EmailVerificationTicketBody, context: DomainContext): Promise<{ ticket: string }> {
    const user = await this.users.get(tenant.id, body.user_id, { fields: ['email'], includeFields: true, withIdpTokens: false });
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
    await this.database.db.transaction().execute((trx) => this.store(trx, ticket));
    return { ticket: ticket.url };
  }

  /** Following the link: its first use before expiry verifies the email and spends the ticket. */
  async redeem(tenant: Tenant, ticket: string): Promise<Redemption> {
    return this.database.db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('email_verification_tickets')
        .selectAll()
        .where('ticket_hash', '=', hashSecret(ticket))
        .where('tenant_id', '=', tenant.id)
        .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
        .executeTakeFirst();
      if (!row) return { kind: 'invalid' };
      if (row.used_at !== null) return { kind: 'used', resultUrl: row.result_url };
      const at = now();
      if (row.expires_at <= at) return { kind: 'expired', resultUrl: row.result_url };
      if (!(await this.users.verifyEmail(trx, tenant.id, row.user_id, row.email))) return { kind: 'invalid' };
      await trx.updateTable('email_verification_tickets').set({ used_at: at }).where('ticket_hash', '=', row.ticket_hash).execute();
      return { kind: 'verified', resultUrl: row.result_url, email: row.email, includeEmailInRedirect: row.include_email_in_redirect === 1 };
    });
  }
}
