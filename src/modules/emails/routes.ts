import type { FastifyInstance } from 'fastify';
import { emailErrors } from '../../http/errors.ts';
import { registerFormat } from '../../http/validation.ts';
import { idPattern } from '../../ids.ts';
import { mailboxDir, readMailboxMessage } from '../../mail/mailbox.ts';
import type { Services } from '../../services.ts';
import { EmailIdParams, EmailMessage, OutboxPage, OutboxQuery } from './schema.ts';

const tags = ['emails'];

/**
 * The mail outbox as the API shows it (Tenantry extensions): what was sent, what is pending, what
 * failed; and, from the development mailbox only, a sent email whole.
 */
export async function emailRoutes(
  app: FastifyInstance,
  services: Pick<Services, 'mailOutbox' | 'config'>,
): Promise<void> {
  registerFormat('email-id', idPattern.email);

  app.get<{ Querystring: OutboxQuery }>(
    '/api/v2/emails/outbox',
    {
      config: { scopes: ['read:email_outbox'] },
      schema: {
        tags,
        operationId: 'listOutboxEmails',
        summary: "The tenant's emails, newest first: recipient, subject, status and attempts (never the body)",
        querystring: OutboxQuery,
        response: { 200: OutboxPage },
      },
    },
    async (request) => services.mailOutbox.list(request.tenant.id, request.query),
  );

  // The body holds a verification link, a credential: its own scope, read:email_messages. Only the
  // development mailbox (SMTP_URL unset) has one to show; through SMTP, a sent body is dropped.
  app.get<{ Params: EmailIdParams }>(
    '/api/v2/emails/outbox/:id/message',
    {
      config: { scopes: ['read:email_messages'] },
      schema: {
        tags,
        operationId: 'getOutboxEmailMessage',
        summary:
          'A sent email of the tenant as the development mailbox holds it: headers and HTML body (404 when SMTP_URL is set: no copy is kept)',
        params: EmailIdParams,
        response: { 200: EmailMessage },
      },
    },
    async (request) => {
      if (services.config.smtpUrl !== undefined) throw emailErrors.noMailbox();
      const { id } = request.params;
      // The mailbox directory is every tenant's: the outbox row says whose the email is.
      if ((await services.mailOutbox.status(request.tenant.id, id)) === undefined) throw emailErrors.notFound();
      const message = readMailboxMessage(mailboxDir(services.config.dataDir), id);
      if (!message) throw emailErrors.notInMailbox();
      const { entry, headers } = message;
      const messageId = headers.find((h) => h.name.toLowerCase() === 'message-id')?.value ?? '';
      return {
        id: entry.id,
        from: entry.from,
        to: entry.to,
        subject: entry.subject,
        date: entry.date,
        message_id: messageId,
        headers,
        html: entry.html,
      };
    },
  );
}
