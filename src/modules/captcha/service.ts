import type { Database } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import type { SecretBox } from '../../secret-box.ts';
import { captchaConfig, providersToStore } from './config.ts';
import type { CaptchaConfig, UpdateCaptchaInput } from './schema.ts';
import { CaptchaStore } from './store.ts';

/** The tenant's CAPTCHA configuration; secrets are sealed at rest and never returned. */
export class CaptchaService {
  private readonly store: CaptchaStore;

  constructor(
    database: Database,
    private readonly secretBox: SecretBox,
  ) {
    this.store = new CaptchaStore(database);
  }

  async get(tenantId: string): Promise<CaptchaConfig> {
    return captchaConfig(await this.store.read(tenantId));
  }

  /**
   * Each configured provider's secret, opened, by provider id: never for the API (the secrets are
   * write-only there), only for `tenantry seed export --with-secrets`.
   */
  async secrets(tenantId: string): Promise<Map<string, string>> {
    const sealed = await this.store.secrets(tenantId);
    return new Map(sealed.map(({ provider, secret }) => [provider, this.secretBox.open(secret)]));
  }

  /** Each provider given replaces that provider's stored settings, and only those. */
  async update(tenantId: string, input: UpdateCaptchaInput): Promise<CaptchaConfig> {
    const providers = providersToStore(input).map(({ provider, settings, secret }) => ({
      provider,
      settings: JSON.stringify(settings),
      secret: secret === undefined ? null : this.secretBox.seal(secret),
    }));
    return captchaConfig(await this.store.save(tenantId, providers, input.active_provider_id, now()));
  }
}
