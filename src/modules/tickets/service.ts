import { createHash, randomBytes } from 'node:crypto';
import type { Database, Tx } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import { ApiError, notFound } from '../../http/errors.ts';
import { DEFAULT_LINK_LIFETIME_SECONDS } from '../email-templates/schema.ts';
import type { DomainContext } from '../emails/domain-context.ts';
import type { Tenant } from '../tenants/service.ts';
import type { UserService } from '../users/service.ts';
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

export type Redemption =
  | { kind: 'verified'; resultUrl: string | null; email: string; includeEmailInRedirect: boolean }
  | { kind: 'used' | 'expired'; resultUrl: string | null }
  | { kind: 'invalid' };

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** A foreign-key violation, in either dialect: here, a user deleted between its lookup and the insert. */
function isForeignKeyViolation(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

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

  /** Stores a ticket in the caller's transaction and returns its link. */
  async issue(trx: Tx, input: TicketInput): Promise<string> {
    const ticket = randomBytes(32).toString('base64url');
    const at = now();
    const lifetime = input.ttlSeconds || DEFAULT_LINK_LIFETIME_SECONDS;
    try {
      await trx
        .insertInto('email_verification_tickets')
        .values({
          ticket_hash: sha256(ticket),
          tenant_id: input.tenantId,
          user_id: input.userId,
          email: input.email,
          result_url: input.resultUrl ?? null,
          include_email_in_redirect: input.includeEmailInRedirect ? 1 : 0,
          expires_at: new Date(Date.parse(at) + lifetime * 1000).toISOString(),
          used_at: null,
          created_at: at,
        })
        .execute();
    } catch (error) {
      if (isForeignKeyViolation(error)) throw notFound.user();
      throw error;
    }
    return `https://${input.domain}${VERIFICATION_PATH}?ticket=${ticket}`;
  }

  /** POST /tickets/email-verification: a link on the request's domain, nothing sent. */
  async create(tenant: Tenant, body: EmailVerificationTicketBody, context: DomainContext): Promise<{ ticket: string }> {
    const user = await this.users.get(tenant.id, body.user_id, { fields: ['email'], includeFields: true, withIdpTokens: false });
    if (typeof user.email !== 'string') throw new ApiError(400, 'The user does not have an email address.', 'invalid_body');
    const ticket = await this.database.db.transaction().execute((trx) =>
      this.issue(trx, {
        tenantId: tenant.id,
        userId: body.user_id,
        email: user.email as string,
        domain: context.domain,
        resultUrl: body.result_url,
        ttlSeconds: body.ttl_sec,
        includeEmailInRedirect: body.includeEmailInRedirect ?? true,
      }),
    );
    return { ticket };
  }

  /** Following the link: its first use before expiry verifies the email and spends the ticket. */
  async redeem(tenant: Tenant, ticket: string): Promise<Redemption> {
    return this.database.db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('email_verification_tickets')
        .selectAll()
        .where('ticket_hash', '=', sha256(ticket))
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
