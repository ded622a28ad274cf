import type { Selectable } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { SigningKeysTable } from '../../db/schema.ts';

export type SigningKeyRow = Selectable<SigningKeysTable>;
export type SigningKeyStatus = SigningKeysTable['status'];

/** Every query on `signing_keys`. */
export class SigningKeyStore {
  constructor(private readonly database: Database) {}

  async insert(row: SigningKeyRow): Promise<void> {
    await this.database.db.insertInto('signing_keys').values(row).execute();
  }

  /** Makes `kid` the tenant's current key and the one current until now 'previous', in one transaction. */
  async makeCurrent(tenantId: string, kid: string): Promise<void> {
    await this.database.db.transaction().execute(async (trx) => {
      await trx
        .updateTable('signing_keys')
        .set({ status: 'previous' })
        .where('tenant_id', '=', tenantId)
        .where('status', '=', 'current')
        .execute();
      await trx.updateTable('signing_keys').set({ status: 'current' }).where('kid', '=', kid).execute();
    });
  }

  /** Revokes a 'previous' key: whether there was one of this kid. */
  async revokePrevious(tenantId: string, kid: string): Promise<boolean> {
    const result = await this.database.db
      .updateTable('signing_keys')
      .set({ status: 'revoked' })
      .where('tenant_id', '=', tenantId)
      .where('kid', '=', kid)
      .where('status', '=', 'previous')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** The newest current key, sealed. */
  async current(tenantId: string): Promise<Pick<SigningKeyRow, 'kid' | 'private_key'> | undefined> {
    return this.database.db
      .selectFrom('signing_keys')
      .select(['kid', 'private_key'])
      .where('tenant_id', '=', tenantId)
      .where('status', '=', 'current')
      .orderBy('created_at', 'desc')
      .executeTakeFirst();
  }

  /** Public JWKs (JSON text) of the keys not revoked, newest first. */
  async published(tenantId: string): Promise<string[]> {
    const rows = await this.database.db
      .selectFrom('signing_keys')
      .select(['public_jwk'])
      .where('tenant_id', '=', tenantId)
      .where('status', '!=', 'revoked')
      .orderBy('created_at', 'desc')
      .execute();
    return rows.map((r) => r.public_jwk);
  }
}
