import { Type, type Static } from '@sinclair/typebox';
import { PROVIDER_IDS, type ProviderId } from './providers.ts';

export { PROVIDER_IDS, type ProviderId } from './providers.ts';

const text = (description: string) => Type.String({ minLength: 1, maxLength: 100, description });
const secret = (description: string) => Type.String({ minLength: 1, maxLength: 100, description, writeOnly: true });

const siteKeyAndSecret = (name: string) =>
  Type.Object(
    { site_key: text(`Site key for ${name}.`), secret: secret(`Secret for ${name}; write-only, never returned.`) },
    { additionalProperties: false },
  );

export const ProviderBodies = {
  // The original declares it free-form and always answers `{}`: members are accepted so its clients
  // keep working, none is stored, and the count is bounded.
  simple_captcha: Type.Object(
    {},
    { additionalProperties: true, maxProperties: 16, description: 'Simple CAPTCHA: no settings.' },
  ),
  auth_challenge: Type.Object(
    { fail_open: Type.Boolean({ description: 'Whether the challenge lets the login through when it cannot run.' }) },
    { additionalProperties: false },
  ),
  recaptcha_v2: siteKeyAndSecret('reCAPTCHA v2'),
  recaptcha_enterprise: Type.Object(
    {
      site_key: text('Site key for reCAPTCHA Enterprise.'),
      api_key: secret('API key for reCAPTCHA Enterprise; write-only, never returned.'),
      project_id: text('Project ID for reCAPTCHA Enterprise.'),
    },
    { additionalProperties: false },
  ),
  hcaptcha: siteKeyAndSecret('hCaptcha'),
  friendly_captcha: siteKeyAndSecret('Friendly Captcha'),
  arkose: Type.Object(
    {
      site_key: text('Site key for Arkose.'),
      secret: secret('Secret for Arkose; write-only, never returned.'),
      client_subdomain: Type.Optional(text('Client subdomain for Arkose.')),
      verify_subdomain: Type.Optional(text('Verify subdomain for Arkose.')),
      fail_open: Type.Optional(
        Type.Boolean({ description: 'Whether Arkose lets the login through when it is unavailable.' }),
      ),
    },
    { additionalProperties: false },
  ),
};

export const ActiveProviderId = Type.Unsafe<ProviderId>({
  type: 'string',
  enum: [...PROVIDER_IDS],
  maxLength: 36,
  description: 'The provider in use.',
});

export const UpdateCaptchaBody = Type.Object(
  {
    active_provider_id: Type.Optional(ActiveProviderId),
    simple_captcha: Type.Optional(ProviderBodies.simple_captcha),
    auth_challenge: Type.Optional(ProviderBodies.auth_challenge),
    recaptcha_v2: Type.Optional(ProviderBodies.recaptcha_v2),
    recaptcha_enterprise: Type.Optional(ProviderBodies.recaptcha_enterprise),
    hcaptcha: Type.Optional(ProviderBodies.hcaptcha),
    friendly_captcha: Type.Optional(ProviderBodies.friendly_captcha),
    arkose: Type.Optional(ProviderBodies.arkose),
  },
  { additionalProperties: false },
);
export type UpdateCaptchaInput = Static<typeof UpdateCaptchaBody>;

const siteKeyOnly = Type.Object({ site_key: Type.String() });

/** What GET and PATCH return: secrets are absent; providers never configured are absent too. */
export const CaptchaResponse = Type.Object(
  {
    active_provider_id: ActiveProviderId,
    simple_captcha: Type.Object({}),
    auth_challenge: Type.Object({ fail_open: Type.Boolean() }),
    recaptcha_v2: Type.Optional(siteKeyOnly),
    recaptcha_enterprise: Type.Optional(Type.Object({ site_key: Type.String(), project_id: Type.String() })),
    hcaptcha: Type.Optional(siteKeyOnly),
    friendly_captcha: Type.Optional(siteKeyOnly),
    arkose: Type.Optional(
      Type.Object({
        site_key: Type.String(),
        client_subdomain: Type.Optional(Type.String()),
        verify_subdomain: Type.Optional(Type.String()),
        fail_open: Type.Optional(Type.Boolean()),
      }),
    ),
  },
  { additionalProperties: true },
);
export type CaptchaConfig = Static<typeof CaptchaResponse>;
