import type { Tx } from '../../db/database.ts';
import { ApiError } from '../../http/errors.ts';
import { queueEmail } from '../../mail/outbox.ts';
import type { SecretBox } from '../../secret-box.ts';
import type { CustomDomainService } from '../custom-domains/service.ts';
import { renderTemplates } from '../email-templates/liquid.ts';
import type { TemplateRenderer } from '../email-templates/renderer.ts';
import type { EmailTemplate } from '../email-templates/schema.ts';
import type { EmailTemplateService } from '../email-templates/service.ts';
import type { Tenant } from '../tenants/service.ts';
import type { TicketService } from './tickets/service.ts';
import type { CreateUserInput, UserWrite } from '../users/service.ts';
import type { User } from '../users/user.ts';
import { resolveDomainContext, type CustomDomainHeaders, type DomainContext } from './domain-context.ts';

/** The user as the template sees it, and as the email is addressed. */
export type Recipient = Pick<User, 'user_id'> & { email: string } & Record<string, unknown>;

/** The user's email address: without one there is nothing to verify, a 400. */
export function requireEmail(user: Record<string, unknown>): string {
  if (typeof user.email !== 'string') throw new ApiError(400, 'The user does not have an email address.', 'invalid_body');
  return user.email;
}

/** What a prepared email writes in the caller's transaction: its ticket and its outbox row; yields the outbox id. */
export type EmailWrite = (trx: Tx) => Promise<string>;

/**
 * Verification emails: a ticket link on the request's domain and the tenant's verify_email template
 * rendered with it, before any transaction opens; then the ticket and the email in the outbox, in the
 * caller's transaction.
 */
export class VerificationEmailService {
  constructor(
    private readonly secretBox: SecretBox,
    private readonly customDomains: CustomDomainService,
    private readonly templates: EmailTemplateService,
    private readonly tickets: TicketService,
    private readonly renderer: TemplateRenderer,
    private readonly settings: { mailFrom: string | undefined },
    private readonly warn: (fields: Record<string, unknown>, message: string) => void =
      (fields, message) => console.warn(JSON.stringify({ level: 40, time: Date.now(), ...fields, msg: message })),
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
   * POST /users: given the user about to be created, renders its verification email and returns what
   * queues it in the user's transaction; undefined when none goes out. As the original: `verify_email`
   * decides when given; otherwise an email goes out unless `email_verified` is true.
   */
  async forNewUser(tenant: Tenant, input: CreateUserInput, context: DomainContext): Promise<((user: User) => Promise<UserWrite | undefined>) | undefined> {
    if (!(input.verify_email ?? (input.email_verified !== true))) return undefined;
    const template = await this.template(tenant.id);
    if (!template) return undefined;
    return async (user) => (typeof user.email === 'string' ? this.prepare(tenant, { ...user, email: user.email }, template, context) : undefined);
  }

  /** Renders one verification email, outside any transaction; the returned write stores its ticket and queues it. */
  async prepare(tenant: Tenant, user: Recipient, template: EmailTemplate, context: DomainContext): Promise<EmailWrite> {
    const ticket = this.tickets.newTicket({
      tenantId: tenant.id,
      userId: user.user_id,
      email: user.email,
      domain: context.domain,
      resultUrl: template.resultUrl,
      ttlSeconds: template.urlLifetimeInSeconds,
      includeEmailInRedirect: template.includeEmailInRedirect,
    });
    const variables = { user, url: ticket.url, tenant: tenant.id, custom_domain: context };
    const host = context.domain.replace(/:\d+$/, '');
    const sender = this.settings.mailFrom ?? `no-reply@${host}`;
    let rendered: { from?: string; subject: string; body: string };
    try {
      rendered = await renderTemplates(
        this.renderer,
        { body: template.body, subject: template.subject, ...(template.from === undefined ? {} : { from: template.from }) },
        variables,
      );
    } catch (error) {
      // Over the time or memory limit for this user's data: the change that sends the email still goes
      // through, and the email is recorded failed with the reason, for the operator and the job to see.
      if (!(error instanceof ApiError && error.logAtWarn)) throw error;
      this.warn({ tenant: tenant.id, template: template.template, reason: error.message }, 'verification email not rendered: over the render limit');
      const failed = { tenantId: tenant.id, template: template.template, to: user.email, from: sender, subject: '', html: '', failure: error.message };
      return (trx) => queueEmail(trx, this.secretBox, failed);
    }
    const { from, subject, body } = rendered;
    const email = {
      tenantId: tenant.id,
      template: template.template,
      to: user.email,
      from: from ?? sender,
      subject,
      html: body,
    };
    return async (trx) => {
      await this.tickets.store(trx, ticket);
      return queueEmail(trx, this.secretBox, email);
    };
  }
}
