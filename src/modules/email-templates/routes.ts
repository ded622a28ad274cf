import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import { CustomDomainHeaders } from '../email-verification/domain-context.ts';
import {
  CreateEmailTemplateBody,
  EmailTemplatePreview,
  EmailTemplateResponse,
  PreviewEmailTemplateBody,
  TemplateNameParams,
  UpdateEmailTemplateBody,
} from './schema.ts';

const BASE = '/api/v2/email-templates';
const tags = ['email-templates'];

export async function emailTemplateRoutes(
  app: FastifyInstance,
  services: Pick<Services, 'emailTemplates' | 'verificationEmails'>,
): Promise<void> {
  const templates = services.emailTemplates;

  app.post<{ Body: CreateEmailTemplateBody }>(
    BASE,
    {
      config: { scopes: ['create:email_templates'] },
      schema: {
        tags,
        operationId: 'createEmailTemplate',
        body: CreateEmailTemplateBody,
        response: { 201: EmailTemplateResponse },
        summary: "Store the tenant's own version of a template (409 once it has one; PATCH changes it)",
      },
    },
    async (request, reply) => reply.code(201).send(await templates.create(request.tenant.id, request.body)),
  );

  app.get<{ Params: TemplateNameParams }>(
    `${BASE}/:templateName`,
    {
      config: { scopes: ['read:email_templates'] },
      schema: {
        tags,
        operationId: 'getEmailTemplate',
        params: TemplateNameParams,
        response: { 200: EmailTemplateResponse },
        summary: 'Get an email template (the built-in default until the tenant stores its own)',
      },
    },
    async (request) => templates.get(request.tenant.id, request.params.templateName),
  );

  app.patch<{ Params: TemplateNameParams; Body: UpdateEmailTemplateBody }>(
    `${BASE}/:templateName`,
    {
      config: { scopes: ['update:email_templates'] },
      schema: {
        tags,
        operationId: 'updateEmailTemplate',
        params: TemplateNameParams,
        body: UpdateEmailTemplateBody,
        response: { 200: EmailTemplateResponse },
        summary: "Change members of an email template; null restores a member's default",
      },
    },
    async (request) => templates.update(request.tenant.id, request.params.templateName, request.body),
  );

  // A Tenantry extension: the template as it would be sent, for a sample user and a placeholder link.
  // It only reads (the template, the domains); unsaved members in the body are rendered, never stored.
  app.post<{ Params: TemplateNameParams; Body: PreviewEmailTemplateBody; Headers: CustomDomainHeaders }>(
    `${BASE}/:templateName/preview`,
    {
      config: { scopes: ['read:email_templates'] },
      schema: {
        tags,
        operationId: 'previewEmailTemplate',
        params: TemplateNameParams,
        headers: CustomDomainHeaders,
        body: PreviewEmailTemplateBody,
        response: { 200: EmailTemplatePreview },
        summary:
          'Render a template as it would be sent (stored or default, or the unsaved members given) for a sample user, on the selected custom domain; the link is a placeholder, not a ticket',
      },
    },
    async (request) => {
      const { verificationEmails } = services;
      const context = await verificationEmails.domainContext(request.tenant, request.headers);
      return verificationEmails.preview(request.tenant, request.params.templateName, request.body, context);
    },
  );
}
