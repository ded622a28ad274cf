import type { Tx } from '../../db/database.ts';
import { queueEmail } from '../../mail/outbox.ts';
import type { SecretBox } from '../../secret-box.ts';
import type { CustomDomainService } from '../custom-domains/service.ts';
import { renderTemplate } from '../email-templates/liquid.ts';
import type { EmailTemplate } from '../email-templates/schema.ts';
import type { EmailTemplateService } from '../email-templates/service.ts';
import type { Tenant } from '../tenants/service.ts';
import type { TicketService } from '../tickets/service.ts';
import type { CreateUserInput } from '../users/service.ts';
import type { User } from '../users/user.ts';
import { resolveDomainContext, type CustomDomainHeaders, type DomainContext } from './domain-context.ts';

/** The user as the template sees it, and as the email is addressed. */
export type Recipient = Pick<User, 'user_id'> & { email: string } & Record<string, unknown>;

/**
 * Verification emails: a ticket link on the request's domain, the tenant's verify_email template
 * rendered with it, and the email queued in the outbox — all in the caller's transaction.
 */
export class VerificationEmailService {
  constructor(
    private readonly secretBox: SecretBox,
    private readonly customDomains: CustomDomainService,
    private readonly templates: EmailTemplateService,
    private readonly tickets: TicketService,
    private readonly settings: { mailFrom: string | undefined },
  ) {}

  domainContext(tenant: Tenant, headers: CustomDomainHeaders): Promise<DomainContext> {
    return resolveDomainContext(this.customDomains, tenant, headers);
  }

  /** The enabled verify_email template, or undefined when the tenant disabled it. */
  async template(tenantId: string): Promise<EmailTemplate | undefined> {
    const template = await this.templates.get(tenantId, 'verify_email');
    return template.enabled ? template : undefined;
  }

  /**
   * POST /users: what runs in the new user's transaction to queue its verification email, or undefined
   * when none goes out. As the original: `verify_email` decides when given; otherwise an email goes
   * out unless `email_verified` is true.
   */
  async forNewUser(tenant: Tenant, input: CreateUserInput, context: DomainContext): Promise<((trx: Tx, user: User) => Promise<void>) | undefined> {
    if (!(input.verify_email ?? (input.email_verified !== true))) return undefined;
    const template = await this.template(tenant.id);
    if (!template) return undefined;
    return async (trx, user) => {
      if (typeof user.email === 'string') await this.queue(trx, tenant, { ...user, email: user.email }, template, context);
    };
  }

  /** Queues one verification email in `trx`; returns the outbox id. */
  async queue(trx: Tx, tenant: Tenant, user: Recipient, template: EmailTemplate, context: DomainContext): Promise<string> {
    const url = await this.tickets.issue(trx, {
      tenantId: tenant.id,
      userId: user.user_id,
      email: user.email,
      domain: context.domain,
      resultUrl: template.resultUrl,
      ttlSeconds: template.urlLifetimeInSeconds,
      includeEmailInRedirect: template.includeEmailInRedirect,
    });
    const variables = { user, url, tenant: tenant.id, custom_domain: context };
    const host = context.domain.replace(/:\d+$/, '');
    return queueEmail(trx, this.secretBox, {
      tenantId: tenant.id,
      template: template.template,
      to: user.email,
      from: template.from !== undefined ? await renderTemplate('from', template.from, variables) : (this.settings.mailFrom ?? `no-reply@${host}`),
      subject: await renderTemplate('subject', template.subject, variables),
      html: await renderTemplate('body', template.body, variables),
    });
  }
}
