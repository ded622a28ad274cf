import { Type, type Static } from '@sinclair/typebox';
import { MAX_LINK_LIFETIME_SECONDS, RESULT_URL_FORMAT, RESULT_URL_PATTERN } from '../../email-templates/schema.ts';

export const EmailVerificationTicketBody = Type.Object(
  {
    user_id: Type.String({
      minLength: 1,
      maxLength: 255,
      description: 'user_id of the user whose email the ticket verifies',
    }),
    result_url: Type.Optional(
      Type.String({
        maxLength: 2048,
        pattern: RESULT_URL_PATTERN,
        format: RESULT_URL_FORMAT,
        description: 'Where the link redirects once used (http or https)',
      }),
    ),
    ttl_sec: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_LINK_LIFETIME_SECONDS,
        description: 'Lifetime of the ticket in seconds; 0 or absent: five days',
      }),
    ),
    includeEmailInRedirect: Type.Optional(
      Type.Boolean({ description: 'Whether the redirect to result_url carries the email address (default true)' }),
    ),
  },
  { additionalProperties: false },
);
export type EmailVerificationTicketBody = Static<typeof EmailVerificationTicketBody>;

export const TicketResponse = Type.Object({ ticket: Type.String({ description: 'The verification link' }) });

export const RedeemQuery = Type.Object(
  { ticket: Type.String({ minLength: 1, maxLength: 128, description: 'The ticket of a verification link' }) },
  { additionalProperties: false },
);
export type RedeemQuery = Static<typeof RedeemQuery>;
