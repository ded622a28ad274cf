import type { Database } from '../../db/database.ts';

/** One provider's stored settings: its public members as JSON text, its secret sealed (or null). */
export interface ProviderRecord {
  provider: string;
  settings: string;
  secret: string | null;
}

/** What is stored for a tenant: the active provider when it chose one, and each provider it configured. */
export interface StoredCaptcha {
  activeProviderId: string | undefined;
  providers: Array<{ provider: string; settings: string }>;
}

/** Every query on captcha_settings and captcha_providers, for both dialects. */
export class CaptchaStore {
  constructor(private readonly database: Database) {}

  read(tenantId: string): Promise<StoredCaptcha> {
    return readIn(this.database.db, tenantId);
  }

  /** Each configured provider's sealed secret (providers without one left out). */
  async secrets(tenantId: string): Promise<Array<{ provider: string; secret: string }>> {
    const rows = await this.database.db
      .selectFrom('captcha_providers')
      .select(['provider', 'secret'])
      .where('tenant_id', '=', tenantId)
      .execute();
    return rows.flatMap(({ provider, secret }) => (secret === null ? [] : [{ provider, secret }]));
  }

  /**
   * Upserts each provider's row, then the active provider when given, in one transaction, and reads
   * the result back in it. One row per provider: concurrent updates of different providers never lose
   * each other's writes. The caller gives providers in a fixed order, so two updates naming the same
   * providers take their row locks in the same order and can never deadlock on PostgreSQL.
   */
  save(
    tenantId: string,
    providers: readonly ProviderRecord[],
    activeProviderId: string | undefined,
    at: string,
  ): Promise<StoredCaptcha> {
    return this.database.db.transaction().execute(async (trx) => {
      for (const { provider, settings, secret } of providers) {
        await trx
          .insertInto('captcha_providers')
          .values({ tenant_id: tenantId, provider, settings, secret, updated_at: at })
          .onConflict((oc) =>
            oc.columns(['tenant_id', 'provider']).doUpdateSet((eb) => ({
              settings: eb.ref('excluded.settings'),
              secret: eb.ref('excluded.secret'),
              updated_at: eb.ref('excluded.updated_at'),
            })),
          )
          .execute();
      }
      if (activeProviderId !== undefined) {
        await trx
          .insertInto('captcha_settings')
          .values({ tenant_id: tenantId, active_provider_id: activeProviderId, updated_at: at })
          .onConflict((oc) =>
            oc.column('tenant_id').doUpdateSet((eb) => ({
              active_provider_id: eb.ref('excluded.active_provider_id'),
              updated_at: eb.ref('excluded.updated_at'),
            })),
          )
          .execute();
      }
      return readIn(trx, tenantId);
    });
  }
}

async function readIn(db: Database['db'], tenantId: string): Promise<StoredCaptcha> {
  const active = await db
    .selectFrom('captcha_settings')
    .select('active_provider_id')
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  const providers = await db
    .selectFrom('captcha_providers')
    .select(['provider', 'settings'])
    .where('tenant_id', '=', tenantId)
    .execute();
  return { activeProviderId: active?.active_provider_id, providers };
}
