import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { registerFormat } from '../../http/validation.ts';

/** The one template this server sends; the original has more (reset_email, welcome_email, …). */
export const TEMPLATE_NAMES = ['verify_email'] as const;
export type TemplateName = (typeof TEMPLATE_NAMES)[number];

/** Longest lifetime of a verification link, in seconds (one year). */
export const MAX_LINK_LIFETIME_SECONDS = 31_536_000;
/** The original's lifetime when none is set: five days. */
export const DEFAULT_LINK_LIFETIME_SECONDS = 432_000;

/** http(s) only: the link's redirect must never become a javascript: or data: URL. */
export const RESULT_URL_PATTERN = '^https?://[^\\s]+$';

/**
 * Beside the pattern, the URL must parse (`http://[x`, a port past 65535 and `%zz` in the host match it
 * and do not): the link builds its redirect from it once the ticket is spent, and would answer 500.
 */
export const RESULT_URL_FORMAT = 'result-url';
registerFormat(RESULT_URL_FORMAT, (value: string) => URL.canParse(value));

const TemplateNameSchema = Type.Union(
  TEMPLATE_NAMES.map((name) => Type.Literal(name)),
  {
    description: 'Template name; only verify_email is supported',
  },
);

/** `null` restores a member's default. One schema with two types, so a failure names its real cause. */
const nullable = <T extends TSchema>(schema: T) =>
  Type.Unsafe<Static<T> | null>({
    ...(JSON.parse(JSON.stringify(schema)) as object),
    type: [schema.type as string, 'null'],
  });

const members = {
  body: Type.Optional(
    nullable(Type.String({ minLength: 1, maxLength: 100_000, description: 'Liquid source of the HTML body' })),
  ),
  from: Type.Optional(
    nullable(Type.String({ minLength: 3, maxLength: 320, description: 'From address; may use Liquid' })),
  ),
  resultUrl: Type.Optional(
    nullable(
      Type.String({
        maxLength: 2048,
        pattern: RESULT_URL_PATTERN,
        format: RESULT_URL_FORMAT,
        description: 'Where the verification link redirects once used (http or https)',
      }),
    ),
  ),
  subject: Type.Optional(
    nullable(Type.String({ minLength: 1, maxLength: 512, description: 'Liquid source of the subject' })),
  ),
  syntax: Type.Optional(
    Type.Unsafe<'liquid' | null>({
      type: ['string', 'null'],
      enum: ['liquid', null],
      description: 'Syntax of the template; only liquid',
    }),
  ),
  urlLifetimeInSeconds: Type.Optional(
    nullable(
      Type.Integer({
        minimum: 0,
        maximum: MAX_LINK_LIFETIME_SECONDS,
        description: 'Lifetime of the link in the email; 0 or absent: five days',
      }),
    ),
  ),
  includeEmailInRedirect: Type.Optional(
    Type.Boolean({ description: 'Whether the redirect to resultUrl carries the email address' }),
  ),
  enabled: Type.Optional(nullable(Type.Boolean({ description: 'false: no verification email is sent' }))),
};

export const TemplateNameParams = Type.Object({ templateName: TemplateNameSchema }, { additionalProperties: false });
export type TemplateNameParams = Static<typeof TemplateNameParams>;

export const CreateEmailTemplateBody = Type.Object(
  { template: TemplateNameSchema, ...members },
  { additionalProperties: false },
);
export type CreateEmailTemplateBody = Static<typeof CreateEmailTemplateBody>;

export const UpdateEmailTemplateBody = Type.Object(
  { template: Type.Optional(TemplateNameSchema), ...members },
  { additionalProperties: false },
);
export type UpdateEmailTemplateBody = Static<typeof UpdateEmailTemplateBody>;

/** The original's template object, in its key order; unset optional members are omitted. */
export const EmailTemplateResponse = Type.Object({
  template: TemplateNameSchema,
  body: Type.String(),
  from: Type.Optional(Type.String()),
  resultUrl: Type.Optional(Type.String()),
  subject: Type.String(),
  syntax: Type.Literal('liquid'),
  urlLifetimeInSeconds: Type.Optional(Type.Integer()),
  includeEmailInRedirect: Type.Boolean(),
  enabled: Type.Boolean(),
});
export type EmailTemplate = Static<typeof EmailTemplateResponse>;

/** Unsaved members to preview instead of the stored ones (a Tenantry extension). */
export const PreviewEmailTemplateBody = Type.Object(
  {
    body: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100_000, description: 'Liquid source of the HTML body to preview' }),
    ),
    subject: Type.Optional(
      Type.String({ minLength: 1, maxLength: 512, description: 'Liquid source of the subject to preview' }),
    ),
    from: Type.Optional(Type.String({ minLength: 3, maxLength: 320, description: 'From address to preview' })),
  },
  { additionalProperties: false },
);
export type PreviewEmailTemplateBody = Static<typeof PreviewEmailTemplateBody>;

/** A template rendered as it would be sent, for a sample user and a placeholder link that is no ticket. */
export const EmailTemplatePreview = Type.Object(
  {
    template: TemplateNameSchema,
    domain: Type.String({ description: 'The domain whose context it was rendered for (the link is on it)' }),
    from: Type.String(),
    to: Type.String({ description: "The sample user's address" }),
    subject: Type.String(),
    body: Type.String({ description: 'The HTML body' }),
    url: Type.String({ description: 'The placeholder link the template was given: not a ticket, it verifies nothing' }),
  },
  { additionalProperties: false },
);
export type EmailTemplatePreview = Static<typeof EmailTemplatePreview>;
