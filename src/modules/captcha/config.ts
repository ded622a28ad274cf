import { PROVIDER_IDS, type CaptchaConfig, type ProviderId, type UpdateCaptchaInput } from './schema.ts';
import type { StoredCaptcha } from './store.ts';

type StoredProvider = Exclude<ProviderId, 'simple_captcha'>;

/** The members each provider returns, in the original's order; everything else it accepts is a secret. */
const PUBLIC_MEMBERS: Record<StoredProvider, readonly string[]> = {
  auth_challenge: ['fail_open'],
  recaptcha_v2: ['site_key'],
  recaptcha_enterprise: ['site_key', 'project_id'],
  hcaptcha: ['site_key'],
  friendly_captcha: ['site_key'],
  arkose: ['site_key', 'client_subdomain', 'verify_subdomain', 'fail_open'],
};

const SECRET_MEMBER: Partial<Record<StoredProvider, string>> = {
  recaptcha_v2: 'secret',
  recaptcha_enterprise: 'api_key',
  hcaptcha: 'secret',
  friendly_captcha: 'secret',
  arkose: 'secret',
};

/** The member holding a provider's write-only secret (`secret`, `api_key`), if it has one. */
export const secretMemberOf = (provider: string): string | undefined => SECRET_MEMBER[provider as StoredProvider];

/** What a tenant that never changed its CAPTCHA configuration gets. */
const DEFAULT_ACTIVE_PROVIDER: ProviderId = 'auth_challenge';
const DEFAULT_AUTH_CHALLENGE = { fail_open: false };

const isStored = (provider: ProviderId): provider is StoredProvider => provider !== 'simple_captcha';

/** A provider's settings as stored: its public members, and its secret (in clear: the caller seals it). */
export interface ProviderSettings {
  provider: StoredProvider;
  settings: Record<string, unknown>;
  secret: string | undefined;
}

/**
 * The providers a PATCH gives, in the fixed order of PROVIDER_IDS, split into public members and secret.
 * simple_captcha has nothing to store: whatever it is given is dropped.
 */
export function providersToStore(input: UpdateCaptchaInput): ProviderSettings[] {
  const stored: ProviderSettings[] = [];
  for (const provider of PROVIDER_IDS) {
    const given = input[provider] as Record<string, unknown> | undefined;
    if (given === undefined || !isStored(provider)) continue;
    const settings: Record<string, unknown> = {};
    for (const member of PUBLIC_MEMBERS[provider]) if (given[member] !== undefined) settings[member] = given[member];
    const secretMember = SECRET_MEMBER[provider];
    stored.push({ provider, settings, secret: secretMember === undefined ? undefined : String(given[secretMember]) });
  }
  return stored;
}

/**
 * The configuration GET and PATCH answer: the active provider (auth_challenge by default), simple_captcha
 * and auth_challenge always, then each other provider the tenant configured, in the original's order.
 */
export function captchaConfig(stored: StoredCaptcha): CaptchaConfig {
  const settingsOf = new Map(
    stored.providers.map((row) => [row.provider, JSON.parse(row.settings) as Record<string, unknown>]),
  );
  const config: Record<string, unknown> = {
    active_provider_id: (stored.activeProviderId as ProviderId | undefined) ?? DEFAULT_ACTIVE_PROVIDER,
    simple_captcha: {},
    auth_challenge: settingsOf.get('auth_challenge') ?? DEFAULT_AUTH_CHALLENGE,
  };
  for (const provider of PROVIDER_IDS) {
    const settings = settingsOf.get(provider);
    if (settings !== undefined && !(provider in config)) config[provider] = settings;
  }
  return config as CaptchaConfig;
}
