import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Services } from '../../../services.ts';
import { CustomDomainHeaders } from '../domain-context.ts';
import { EmailVerificationTicketBody, RedeemQuery, TicketResponse } from './schema.ts';
import { VERIFICATION_PATH, type Redemption } from './service.ts';

const tags = ['tickets'];

/** What the redirect to result_url reports, in the query string of the classic experience. */
const OUTCOMES = {
  verified: {
    status: 200,
    code: 'success',
    message: 'Your email was verified. You can continue using the application.',
  },
  used: { status: 400, code: 'already_used', message: 'This URL can be used only once.' },
  expired: { status: 400, code: 'access_expired', message: 'This URL has expired.' },
  invalid: { status: 404, code: 'invalid_ticket', message: 'This URL is not valid.' },
} as const;

function page(reply: FastifyReply, status: number, message: string) {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .send(
      `<!doctype html>\n<html><head><meta charset="utf-8"><title>Email verification</title></head><body><p>${message}</p></body></html>\n`,
    );
}

function answer(reply: FastifyReply, redemption: Redemption) {
  const outcome = OUTCOMES[redemption.kind];
  // The link holds a credential: nothing keeps a copy, and the next page does not learn it from Referer.
  reply
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'no-referrer')
    .header('x-content-type-options', 'nosniff');
  // A result_url stored before it had to parse as a URL (see RESULT_URL_FORMAT) shows the page too.
  if (redemption.kind === 'invalid' || redemption.resultUrl === null || !URL.canParse(redemption.resultUrl))
    return page(reply, outcome.status, outcome.message);
  const target = new URL(redemption.resultUrl);
  if (redemption.kind === 'verified' && redemption.includeEmailInRedirect)
    target.searchParams.set('email', redemption.email);
  target.searchParams.set('message', outcome.message);
  target.searchParams.set('success', String(redemption.kind === 'verified'));
  target.searchParams.set('code', outcome.code);
  return reply.redirect(target.toString(), 302);
}

export async function ticketRoutes(
  app: FastifyInstance,
  services: Pick<Services, 'tickets' | 'verificationEmails'>,
): Promise<void> {
  app.post<{ Body: EmailVerificationTicketBody; Headers: CustomDomainHeaders }>(
    '/api/v2/tickets/email-verification',
    {
      config: { scopes: ['create:user_tickets'] },
      schema: {
        tags,
        operationId: 'createEmailVerificationTicket',
        headers: CustomDomainHeaders,
        body: EmailVerificationTicketBody,
        response: { 201: TicketResponse },
        summary: "A link that verifies the user's email, built on the selected custom domain (nothing is sent)",
      },
    },
    async (request, reply) => {
      const context = await services.verificationEmails.domainContext(request.tenant, request.headers);
      return reply.code(201).send(await services.tickets.create(request.tenant, request.body, context));
    },
  );

  app.get<{ Querystring: RedeemQuery }>(
    VERIFICATION_PATH,
    {
      // A HEAD (link checkers, prefetchers) must not spend the ticket as the GET does.
      exposeHeadRoute: false,
      // The link is followed by the user's browser: the ticket in it is the credential.
      config: { public: true },
      schema: {
        tags,
        operationId: 'followEmailVerificationLink',
        querystring: RedeemQuery,
        security: [],
        summary: 'Follow a verification link: verifies the email once, then redirects to result_url or shows a page',
      },
    },
    async (request, reply) => answer(reply, await services.tickets.redeem(request.tenant, request.query.ticket)),
  );
}
