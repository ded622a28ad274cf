import { Type, type Static } from '@sinclair/typebox';

export const OutboxQuery = Type.Object(
  {
    status: Type.Optional(
      Type.Union([Type.Literal('pending'), Type.Literal('sent'), Type.Literal('failed')], {
        description: 'Only emails in this state',
      }),
    ),
    from: Type.Optional(Type.String({ maxLength: 256, description: 'Cursor from which to start selection' })),
    take: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 100, description: 'Number of results per page. Defaults to 50.' }),
    ),
  },
  { additionalProperties: false },
);
export type OutboxQuery = Static<typeof OutboxQuery>;

export const OutboxPage = Type.Object(
  {
    emails: Type.Array(
      Type.Object(
        {
          id: Type.String(),
          template: Type.String({ description: 'The template it was rendered from, e.g. verify_email' }),
          from: Type.String(),
          to: Type.String(),
          subject: Type.String(),
          status: Type.Union([Type.Literal('pending'), Type.Literal('sent'), Type.Literal('failed')]),
          attempts: Type.Integer({ description: 'Attempts to send it so far' }),
          last_error: Type.Optional(Type.String({ description: "The last attempt's failure" })),
          created_at: Type.String({ format: 'date-time' }),
          sent_at: Type.Optional(Type.String({ format: 'date-time' })),
          next_attempt_at: Type.Optional(
            Type.String({ format: 'date-time', description: 'When a pending one is tried' }),
          ),
        },
        { additionalProperties: false },
      ),
      { description: 'Newest first; never the body, which holds a verification link' },
    ),
    next: Type.Optional(Type.String({ description: 'Cursor of the next page' })),
  },
  { additionalProperties: false },
);

export const EmailIdParams = Type.Object(
  {
    id: Type.String({
      format: 'email-id',
      description: 'The email id, as GET /api/v2/emails/outbox lists it (msg_…)',
    }),
  },
  { additionalProperties: false },
);
export type EmailIdParams = Static<typeof EmailIdParams>;

export const EmailMessage = Type.Object(
  {
    id: Type.String(),
    from: Type.String(),
    to: Type.String(),
    subject: Type.String(),
    date: Type.String({ format: 'date-time', description: 'When it was written to the mailbox' }),
    message_id: Type.String({ description: 'Its Message-ID header' }),
    headers: Type.Array(Type.Object({ name: Type.String(), value: Type.String() }, { additionalProperties: false }), {
      description: 'Every header of the message as sent, in order, unfolded and decoded',
    }),
    html: Type.String({ description: 'The HTML body as sent: it holds the verification link' }),
  },
  { additionalProperties: false },
);
export type EmailMessage = Static<typeof EmailMessage>;
