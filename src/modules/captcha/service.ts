import type { Database } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import type { SecretBox } from '../../secret-box.ts';
import { PROVIDER_IDS, type CaptchaConfig, type ProviderId, type UpdateCaptchaInput } from './schema.ts';

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

/** What a tenant that never changed its CAPTCHA configuration gets. */
const DEFAULT_ACTIVE_PROVIDER: ProviderId = 'auth_challenge';
const DEFAULT_AUTH_CHALLENGE = { fail_open: false };

const isStored = (provider: ProviderId): provider is StoredProvider => provider !== 'simple_captcha';

export class CaptchaService {
  constructor(
    private readonly database: Database,
    private readonly secretBox: SecretBox,
  ) {}

  async get(tenantId: string): Promise<CaptchaConfig> {
    return this.read(this.database.db, tenantId);
  }

  /**
   * Each provider given replaces that provider's stored settings, and only those: one row per
   * provider, upserted, so concurrent updates of different providers never lose each other's writes.
   */
  async update(tenantId: string, input: UpdateCaptchaInput): Promise<CaptchaConfig> {
    const at = now();
    return this.database.db.transaction().execute(async (trx) => {
      // A fixed order of row locks: two PATCHes naming the same providers can never deadlock on PostgreSQL.
      for (const provider of PROVIDER_IDS) {
        const given = input[provider] as Record<string, unknown> | undefined;
        if (given === undefined || !isStored(provider)) continue;
        const settings: Record<string, unknown> = {};
        for (const member of PUBLIC_MEMBERS[provider]) if (given[member] !== undefined) settings[member] = given[member];
        const secretMember = SECRET_MEMBER[provider];
        const secret = secretMember === undefined ? null : this.secretBox.seal(String(given[secretMember]));
        await trx
          .insertInto('captcha_providers')
          .values({ tenant_id: tenantId, provider, settings: JSON.stringify(settings), secret, updated_at: at })
          .onConflict((oc) =>
            oc.columns(['tenant_id', 'provider']).doUpdateSet((eb) => ({
              settings: eb.ref('excluded.settings'),
              secret: eb.ref('excluded.secret'),
              updated_at: eb.ref('excluded.updated_at'),
            })),
          )
          .execute();
      }
      if (input.active_provider_id !== undefined) {
        await trx
          .insertInto('captcha_settings')
          .values({ tenant_id: tenantId, active_provider_id: input.active_provider_id, updated_at: at })
          .onConflict((oc) =>
            oc.column('tenant_id').doUpdateSet((eb) => ({
              active_provider_id: eb.ref('excluded.active_provider_id'),
              updated_at: eb.ref('excluded.updated_at'),
            })),
          )
          .execute();
      }
      return this.read(trx, tenantId);
    });
  }

  private async read(db: Database['db'], tenantId: string): Promise<CaptchaConfig> {
    const active = await db.selectFrom('captcha_settings').select('active_provider_id').where('tenant_id', '=', tenantId).executeTakeFirst();
    const rows = await db.selectFrom('captcha_providers').select(['provider', 'settings']).where('tenant_id', '=', tenantId).execute();
    const stored = new Map(rows.map((row) => [row.provider, JSON.parse(row.settings) as Record<string, unknown>]));
    const config: Record<string, unknown> = {
      active_provider_id: (active?.active_provider_id as ProviderId | undefined) ?? DEFAULT_ACTIVE_PROVIDER,
      simple_captcha: {},
      auth_challenge: stored.get('auth_challenge') ?? DEFAULT_AUTH_CHALLENGE,
    };
    for (const provider of PROVIDER_IDS) {
      const settings = stored.get(provider);
      if (settings !== undefined && !(provider in config)) config[provider] = settings;
    }
    return config as CaptchaConfig;
  }
}
