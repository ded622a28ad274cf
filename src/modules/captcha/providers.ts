/**
 * Every provider the original knows, in the order its responses list them (after `active_provider_id`).
 * A module of its own, importing nothing: the console's browser bundle lists the same providers from it.
 */
export const PROVIDER_IDS = [
  'simple_captcha',
  'auth_challenge',
  'recaptcha_v2',
  'recaptcha_enterprise',
  'hcaptcha',
  'friendly_captcha',
  'arkose',
] as const;
export type ProviderId = (typeof PROVIDER_IDS)[number];
