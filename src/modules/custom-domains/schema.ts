import { Type, type Static } from '@sinclair/typebox';

/** The original's hostname pattern (compat notes §5.2). */
export const HOSTNAME_PATTERN =
  '^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9])\\.)*([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]{0,61}[A-Za-z0-9])$';

export const IP_HEADERS = ['true-client-ip', 'cf-connecting-ip', 'x-forwarded-for', 'x-azure-clientip', ''] as const;

const Hostname = (description: string) =>
  Type.String({ minLength: 3, maxLength: 255, pattern: HOSTNAME_PATTERN, description });
const TlsPolicy = Type.Union([Type.Literal('recommended')], {
  description: 'TLS policy (svc-managed certificates only)',
});
const IpHeader = Type.Unsafe<string | null>({
  type: ['string', 'null'],
  enum: [...IP_HEADERS, null],
  description: 'HTTP header carrying the client IP (self-managed certificates only)',
});
const DomainMetadata = Type.Record(
  Type.String({ maxLength: 255 }),
  Type.Unsafe<string | null>({ type: ['string', 'null'], maxLength: 255 }),
  {
    maxProperties: 10,
    description: 'Up to 10 key/value pairs; values of at most 255 characters, null deletes a key on update',
  },
);

export const CustomDomainId = Type.Object(
  { id: Type.String({ format: 'custom-domain-id', description: 'ID of the custom domain' }) },
  { additionalProperties: false },
);
export type CustomDomainId = Static<typeof CustomDomainId>;

export const CreateCustomDomainBody = Type.Object(
  {
    domain: Hostname('Domain name'),
    // `auth0_managed_certs` is the original's word for `svc_managed_certs`.
    type: Type.Union(
      [Type.Literal('svc_managed_certs'), Type.Literal('self_managed_certs'), Type.Literal('auth0_managed_certs')],
      {
        description: 'Who manages the certificate',
      },
    ),
    verification_method: Type.Optional(Type.Union([Type.Literal('txt')], { description: 'Legacy; ignored' })),
    tls_policy: Type.Optional(TlsPolicy),
    custom_client_ip_header: Type.Optional(IpHeader),
    domain_metadata: Type.Optional(DomainMetadata),
    relying_party_identifier: Type.Optional(
      Type.String({ maxLength: 255, pattern: HOSTNAME_PATTERN, description: 'Relying party identifier' }),
    ),
  },
  { additionalProperties: false },
);
export type CreateCustomDomainBody = Static<typeof CreateCustomDomainBody>;

export const UpdateCustomDomainBody = Type.Object(
  {
    tls_policy: Type.Optional(TlsPolicy),
    custom_client_ip_header: Type.Optional(IpHeader),
    domain_metadata: Type.Optional(DomainMetadata),
    relying_party_identifier: Type.Optional(
      Type.Unsafe<string | null>({
        type: ['string', 'null'],
        maxLength: 255,
        pattern: HOSTNAME_PATTERN,
        description: 'Relying party identifier; null removes it',
      }),
    ),
    is_default: Type.Optional(Type.Boolean({ description: 'true makes this (verified) domain the default domain' })),
  },
  { additionalProperties: false },
);
export type UpdateCustomDomainBody = Static<typeof UpdateCustomDomainBody>;

export const SetDefaultBody = Type.Object(
  {
    domain: Type.String({
      minLength: 3,
      maxLength: 255,
      description: 'A verified custom domain or the canonical domain',
    }),
  },
  { additionalProperties: false },
);
export type SetDefaultBody = Static<typeof SetDefaultBody>;

export const ListCustomDomainsQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 1000, description: 'Query, e.g. domain:login* (only the domain field)' })),
  fields: Type.Optional(Type.String({ maxLength: 100, description: 'Comma-separated fields to include or exclude' })),
  include_fields: Type.Optional(
    Type.Boolean({ description: 'Whether fields are included (true) or excluded (false)' }),
  ),
  sort: Type.Optional(Type.Union([Type.Literal('domain:1')], { description: 'Sort order; only domain:1' })),
  take: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 100, description: 'Number of results per page. Defaults to 50.' }),
  ),
  from: Type.Optional(Type.String({ maxLength: 1000, description: 'Cursor from which to start selection' })),
});
export type ListCustomDomainsQuery = Static<typeof ListCustomDomainsQuery>;

const VerificationMethod = Type.Object(
  {
    name: Type.Union([Type.Literal('CNAME'), Type.Literal('TXT')], {
      description: 'CNAME (svc-managed) or TXT (self-managed), upper-case as the original sends it',
    }),
    record: Type.String({ description: 'The CNAME target, or the TXT record value' }),
    domain: Type.String({ description: 'The name the record is looked up at' }),
  },
  { additionalProperties: false },
);

/**
 * The `certificate` member of an svc-managed domain's record, once its checks began (compat notes
 * §5.3). Its keys in the original's order (alphabetical on the wire). Derived from the certificate
 * Tenantry stores for the domain: `provisioned` while one from the configured source is valid,
 * `provisioning` while the domain is ready without one; neither while the domain is not ready, or when
 * the server has no certificate source (an empty object then). `certificate_authority` is never sent:
 * the original's values name public CAs (letsencrypt, googletrust) and the development CA is neither;
 * `provisioning_failed`/`renewing_failed` and `error_msg` are never sent: a failed issuance is retried
 * on the next handshake and recorded nowhere but the log.
 */
export const DomainCertificate = Type.Object(
  {
    renews_before: Type.Optional(
      Type.String({
        format: 'date-time',
        description:
          'The stored certificate is renewed before this time (its expiry), as the original without milliseconds: 2026-06-10T08:29:55Z',
      }),
    ),
    status: Type.Optional(
      Type.Union([Type.Literal('provisioning'), Type.Literal('provisioned')], {
        description:
          'provisioned: a certificate from CUSTOM_DOMAIN_CERT_SOURCE is stored and valid; provisioning: the domain is ready and none is (it is issued in the background or on the first handshake)',
      }),
    ),
  },
  {
    additionalProperties: false,
    description:
      'The certificate the domain is served with (svc-managed domains, once checks began); see GET /custom-domains/{id}/certificate for its details',
  },
);
export type DomainCertificate = Static<typeof DomainCertificate>;

/**
 * A custom domain as the API shows it (GET, list, create, PATCH, verify, default), its members in the
 * original's wire order (compat notes §5.3). `fields`/`include_fields` may leave any of them out of a list.
 */
export const CustomDomainRecord = Type.Object(
  {
    custom_domain_id: Type.String({ description: 'ID of the custom domain: cd_ and 16 alphanumerics' }),
    domain: Type.String({ description: 'Domain name, lower-cased' }),
    primary: Type.Boolean({ description: 'Legacy flag: true for the first domain a tenant added' }),
    is_default: Type.Optional(
      Type.Boolean({ description: "Whether it is the tenant's default domain (not in a verify response)" }),
    ),
    status: Type.Union([Type.Literal('pending_verification'), Type.Literal('ready'), Type.Literal('failed')]),
    type: Type.Union([Type.Literal('svc_managed_certs'), Type.Literal('self_managed_certs')]),
    verification: Type.Object(
      {
        methods: Type.Array(VerificationMethod),
        status: Type.Optional(Type.String({ description: 'verified, pending or failed, once checks began' })),
        error_msg: Type.Optional(Type.String({ description: 'What the last failed check found' })),
        last_verified_at: Type.Optional(Type.String({ format: 'date-time', description: 'Without milliseconds' })),
      },
      { additionalProperties: false },
    ),
    custom_client_ip_header: Type.Optional(
      Type.Unsafe<string | null>({ type: ['string', 'null'], description: 'Self-managed domains only; null unset' }),
    ),
    tls_policy: Type.Optional(Type.String({ description: 'svc-managed domains only: recommended' })),
    domain_metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
    certificate: Type.Optional(DomainCertificate),
    created_at: Type.String({ format: 'date-time' }),
    relying_party_identifier: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);
export type CustomDomainRecord = Static<typeof CustomDomainRecord>;

/** A verify response: the record without `is_default`, and a self-managed domain's cname-api-key once. */
export const VerifiedCustomDomain = Type.Composite(
  [
    Type.Omit(CustomDomainRecord, ['is_default']),
    Type.Object({
      cname_api_key: Type.Optional(
        Type.String({
          description: "A self-managed domain's key for its proxy, in the first verify response that finds it ready",
        }),
      ),
    }),
  ],
  { additionalProperties: false },
);
export type VerifiedCustomDomain = Static<typeof VerifiedCustomDomain>;

/** What POST /api/v2/custom-domains/{id}/test answers, as the original does. */
export const CustomDomainTest = Type.Object(
  {
    success: Type.Boolean({ description: "Whether the domain's DNS record is still in place" }),
    message: Type.Optional(Type.String({ description: 'What the check found instead, when it failed' })),
  },
  { additionalProperties: false },
);
export type CustomDomainTest = Static<typeof CustomDomainTest>;

/** What GET /api/v2/custom-domains/{id}/certificate shows (a Tenantry extension): never a key. */
export const CustomDomainCertificate = Type.Object(
  {
    status: Type.Union([Type.Literal('none'), Type.Literal('dev-ca'), Type.Literal('upload')], {
      description:
        "Where the certificate served for the domain comes from: the development CA (CUSTOM_DOMAIN_CERT_SOURCE=dev-ca), the operator's upload, or none (the server's default certificate is served)",
    }),
    reason: Type.Optional(
      Type.Union(
        [
          Type.Literal('not_ready'),
          Type.Literal('no_certificate_source'),
          Type.Literal('not_issued'),
          Type.Literal('not_uploaded'),
        ],
        {
          description:
            'Why none: the domain is not ready; the server has no certificate source for svc-managed domains; none is issued yet (the first handshake issues it); no certificate was uploaded for the self-managed domain',
        },
      ),
    ),
    subject: Type.Optional(Type.String({ description: "The leaf certificate's subject" })),
    subject_alt_names: Type.Optional(Type.Array(Type.String(), { description: 'As OpenSSL names them: DNS:<name>' })),
    issuer: Type.Optional(Type.String()),
    not_before: Type.Optional(Type.String({ format: 'date-time' })),
    not_after: Type.Optional(Type.String({ format: 'date-time' })),
    fingerprint_sha256: Type.Optional(Type.String({ description: "SHA-256 of the leaf's DER, colon-separated hex" })),
  },
  { additionalProperties: false },
);
export type CustomDomainCertificate = Static<typeof CustomDomainCertificate>;
