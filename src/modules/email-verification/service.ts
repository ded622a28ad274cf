/**
 * Email verification, one feature in this folder:
 *
 *   POST /users (verify_email) ─┐
 *   POST /jobs/verification-email ─┴─> domain context (domain-context.ts: the header, or the default domain)
 *     -> a ticket and its link on that domain (tickets/ticket.ts)
 *     -> the tenant's verify_email template rendered with the user and the link, on the render threads,
 *        before any transaction opens (email-templates/: liquid.ts, renderer.ts, render-worker.ts)
 *     -> in the change's transaction: the user (users/) or the job (jobs/), the ticket, and the email
 *        as an outbox row (src/mail/outbox.ts), committing or rolling back together
 *     -> the mail worker (src/mail/worker.ts) claims it and sends it: SMTP, or the development mailbox
 *        without SMTP_URL (src/mail/transport.ts, `tenantry mailbox`)
 *     -> following the link (GET /u/email-verification, tickets/service.ts) verifies the email once.
 *
 * This file composes one verification email; POST /tickets/email-verification builds a link alone.
 */
import type { Tx } from '../../db/database.ts';
import { emailTemplateErrors } from '../../http/errors.ts';
import type { Logger } from '../../logger.ts';
import type { MailOutbox } from '../../mail/outbox.ts';
import type { CustomDomainService } from '../custom-domains/service.ts';
import { renderOrRefuse, renderTemplates } from '../email-templates/liquid.ts';
import type { TemplateRenderer } from '../email-templates/renderer.ts';
import type {
  EmailTemplate,
  EmailTemplatePreview,
  PreviewEmailTemplateBody,
  TemplateName,
} from '../email-templates/schema.ts';
import type { EmailTemplateService } from '../email-templates/service.ts';
import type { Tenant } from '../tenants/service.ts';
import type { CreateUserInput, PrepareUserWrite } from '../users/service.ts';
import { resolveDomainContext, type CustomDomainHeaders, type DomainContext } from './domain-context.ts';
import type { Recipient } from './recipient.ts';
import { VERIFICATION_PATH } from './tickets/ticket.ts';
import type { TicketService } from './tickets/service.ts';

export type { Recipient } from './recipient.ts';

/** What a prepared email writes in the caller's transaction: its ticket and its outbox row; yields the outbox id. */
export type EmailWrite = (trx: Tx) => Promise<string>;

/**
 * Whether POST /users sends a verification email, as the original: `verify_email` decides when given;
 * otherwise an email goes out unless `email_verified` is true.
 */
export const wantsVerificationEmail = (input: Pick<CreateUserInput, 'verify_email' | 'email_verified'>): boolean =>
  input.verify_email ?? input.email_verified !== true;

/** The sender when the template names none: MAIL_FROM, or no-reply@ the context's domain (without its port). */
/** The user a preview is rendered for: shaped like a real recipient, with no real data. */
const PREVIEW_USER: Recipient = {
  user_id: 'auth0|preview',
  email: 'jane.doe@example.com',
  email_verified: false,
  name: 'Jane Doe',
  nickname: 'jane.doe',
  user_metadata: {},
  app_metadata: {},
};
/** In a preview's link instead of a ticket's secret: following it verifies nothing. */
export const PREVIEW_TICKET = 'preview-not-a-ticket';

export const defaultSender = (mailFrom: string | undefined, domain: string): string =>
  mailFrom ?? `no-reply@${domain.replace(/:\d+$/, '')}`;

/**
 * Verification emails: a ticket link on the request's domain and the tenant's verify_email template
 * rendered with it, before any transaction opens; then the ticket and the email in the outbox, in the
 * caller's transaction.
 */
export class VerificationEmailService {
  constructor(
    private readonly customDomains: Pick<CustomDomainService, 'emailDomains'>,
    private readonly templates: Pick<EmailTemplateService, 'get'>,
    private readonly tickets: Pick<TicketService, 'newTicket' | 'store'>,
    private readonly renderer: TemplateRenderer,
    private readonly outbox: Pick<MailOutbox, 'queue'>,
    private readonly settings: { mailFrom: string | undefined },
    private readonly logger: Logger,
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
   * queues it in the user's transaction; undefined when none goes out (see wantsVerificationEmail, and a
   * disabled template).
   */
  async forNewUser(
    tenant: Tenant,
    input: CreateUserInput,
    context: DomainContext,
  ): Promise<PrepareUserWrite | undefined> {
    if (!wantsVerificationEmail(input)) return undefined;
    const template = await this.template(tenant.id);
    if (!template) return undefined;
    return async (user) =>
      typeof user.email === 'string'
        ? this.prepare(tenant, { ...user, email: user.email }, template, context)
        : undefined;
  }

  /**
   * The template rendered as it would be sent for the domain context (stored or default, with `changes`
   * in place of its members), for a sample user and a placeholder link; refused with a 400 as a save is.
   */
  async preview(
    tenant: Tenant,
    name: TemplateName,
    changes: PreviewEmailTemplateBody,
    context: DomainContext,
  ): Promise<EmailTemplatePreview> {
    const template = await this.templates.get(tenant.id, name);
    const from = changes.from ?? template.from;
    const url = `https://${context.domain}${VERIFICATION_PATH}?ticket=${PREVIEW_TICKET}`;
    const rendered = await renderOrRefuse(
      this.renderer,
      {
        body: changes.body ?? template.body,
        subject: changes.subject ?? template.subject,
        ...(from === undefined ? {} : { from }),
      },
      { user: PREVIEW_USER, url, tenant: tenant.id, custom_domain: context },
    );
    return {
      template: name,
      domain: context.domain,
      from: rendered.from ?? defaultSender(this.settings.mailFrom, context.domain),
      to: PREVIEW_USER.email,
      subject: rendered.subject,
      body: rendered.body,
      url,
    };
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
    const sender = defaultSender(this.settings.mailFrom, context.domain);
    const rendered = await renderTemplates(
      this.renderer,
      {
        body: template.body,
        subject: template.subject,
        ...(template.from === undefined ? {} : { from: template.from }),
      },
      variables,
    );
    if (rendered.kind === 'stopped') {
      // Over the time or memory limit for this user's data: the change that sends the email still goes
      // through, and the email is recorded failed with the reason, for the operator and the job to see.
      const failure = emailTemplateErrors.notRendered(rendered.reason).message;
      this.logger.warn(
        { tenant: tenant.id, template: template.template, reason: failure },
        'verification email not rendered: over the render limit',
      );
      const failed = {
        tenantId: tenant.id,
        template: template.template,
        to: user.email,
        from: sender,
        subject: '',
        html: '',
        failure,
      };
      return (trx) => this.outbox.queue(trx, failed);
    }
    const { from, subject, body } = rendered.parts;
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
      return this.outbox.queue(trx, email);
    };
  }
}
