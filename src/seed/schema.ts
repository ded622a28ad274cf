import { Type, type Static } from '@sinclair/typebox';
import { UpdateCaptchaBody } from '../modules/captcha/schema.ts';
import { CreateCustomDomainBody } from '../modules/custom-domains/schema.ts';
import { CreateEmailTemplateBody } from '../modules/email-templates/schema.ts';
import { CreateStreamBody } from '../modules/event-streams/schema.ts';
import { CreateSegmentBody } from '../modules/segments/schema.ts';
import { TENANT_ID_PATTERN } from '../modules/tenants/service.ts';
import { ImportedUserSchema } from '../modules/users/import-file.ts';

/** A client with a fixed id and secret, so tests can hard-code them. */
const SeedClient = Type.Object(
  {
    client_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$' })),
    client_secret: Type.Optional(Type.String({ minLength: 32, maxLength: 512 })),
    name: Type.String({ minLength: 1, maxLength: 128 }),
    /** Management API scopes, or `all` for every one. */
    scopes: Type.Union([Type.Literal('all'), Type.Array(Type.String({ minLength: 1 }), { minItems: 1 })]),
  },
  { additionalProperties: false },
);
export type SeedClient = Static<typeof SeedClient>;

/** A user as the users import takes it (user_id, identities, password_hash, metadata…), or with a plain password. */
const SeedUser = Type.Object(
  {
    ...ImportedUserSchema.properties,
    password: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
  },
  { additionalProperties: false },
);
export type SeedUser = Static<typeof SeedUser>;

/** A custom domain as POST /custom-domains takes it; `ready: true` skips the DNS check (svc_managed_certs only). */
const SeedCustomDomain = Type.Object(
  { ...CreateCustomDomainBody.properties, ready: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export type SeedCustomDomain = Static<typeof SeedCustomDomain>;

/**
 * An event stream as POST /event-streams takes it, plus the Standard Webhooks secret signing its
 * deliveries (a Tenantry extension; without it the stream is unsigned, as a stream the API creates).
 * Its form (whsec_ and a 24 to 64 byte key) is checked by validSeed, which names the member.
 */
const SeedEventStream = Type.Object(
  {
    ...CreateStreamBody.properties,
    signing_secret: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  },
  { additionalProperties: false },
);
export type SeedEventStream = Static<typeof SeedEventStream>;

const SeedTenant = Type.Object(
  {
    id: Type.String({ pattern: TENANT_ID_PATTERN.source }),
    /**
     * The tenant's canonical domain (`host[:port]`; `{port}` stands for the port the server listens on);
     * absent: the server's own host (`localhost:<port>`).
     */
    domain: Type.Optional(
      Type.String({ minLength: 1, maxLength: 253, pattern: '^[a-z0-9.-]+(:([0-9]{1,5}|\\{port\\}))?$' }),
    ),
    /** The admin client (every scope) of the first tenant: what createTenantry() returns. */
    admin: Type.Optional(
      Type.Object(
        {
          client_id: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$' }),
          client_secret: Type.String({ minLength: 32, maxLength: 512 }),
        },
        { additionalProperties: false },
      ),
    ),
    clients: Type.Optional(Type.Array(SeedClient)),
    users: Type.Optional(Type.Array(SeedUser)),
    segments: Type.Optional(Type.Array(CreateSegmentBody)),
    captcha: Type.Optional(UpdateCaptchaBody),
    event_streams: Type.Optional(Type.Array(SeedEventStream)),
    email_templates: Type.Optional(Type.Array(CreateEmailTemplateBody)),
    custom_domains: Type.Optional(Type.Array(SeedCustomDomain)),
  },
  { additionalProperties: false },
);
export type SeedTenant = Static<typeof SeedTenant>;

/** A seed file: the tenants a server starts with, and what each holds. */
export const Seed = Type.Object({ tenants: Type.Array(SeedTenant, { minItems: 1 }) }, { additionalProperties: false });
export type Seed = Static<typeof Seed>;
