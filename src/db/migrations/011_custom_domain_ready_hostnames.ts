import { sql, type Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

/**
 * A hostname is reserved only by a ready custom domain: several tenants may hold it pending, and the
 * first to verify it owns it. The unique constraint on `domain` becomes one on ready domains (which
 * also settles two verifications racing on two nodes), and one per tenant, so a tenant cannot add a
 * hostname twice.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = await isPostgres(db);
  if (postgres) await sql`ALTER TABLE custom_domains DROP CONSTRAINT custom_domains_domain_key`.execute(db);
  else await rebuildSqliteTableWithoutUniqueDomain(db);
  await db.schema.dropIndex('custom_domains_tenant').execute();
  await db.schema
    .createIndex('custom_domains_tenant_domain')
    .on('custom_domains')
    .columns(['tenant_id', 'domain'])
    .unique()
    .execute();
  await sql`CREATE UNIQUE INDEX custom_domains_ready_domain ON custom_domains (domain) WHERE status = 'ready'`.execute(
    db,
  );
}

/**
 * SQLite cannot drop a column's UNIQUE: the table is rebuilt from its own definition without it
 * (https://sqlite.org/lang_altertable.html#otheralter), keeping whatever columns later migrations
 * added. Foreign keys are off meanwhile, or dropping the old table would cascade to the domains'
 * certificates; the check before commit proves none was left dangling.
 */
async function rebuildSqliteTableWithoutUniqueDomain(db: Kysely<unknown>): Promise<void> {
  const objects = await sql<{ type: string; sql: string }>`
    SELECT type, sql FROM sqlite_master WHERE tbl_name = 'custom_domains' AND sql IS NOT NULL`.execute(db);
  const table = objects.rows.find((o) => o.type === 'table')!.sql;
  const rebuilt = table
    .replace('"domain" text not null unique', '"domain" text not null')
    .replace('"custom_domains"', '"custom_domains_rebuilt"');
  if (!rebuilt.includes('"domain" text not null,') || !rebuilt.includes('"custom_domains_rebuilt"')) {
    throw new Error(`unexpected definition of custom_domains: ${table}`);
  }
  await sql`PRAGMA foreign_keys = OFF`.execute(db);
  try {
    await db.transaction().execute(async (trx) => {
      await sql.raw(rebuilt).execute(trx);
      await sql`INSERT INTO custom_domains_rebuilt SELECT * FROM custom_domains`.execute(trx);
      await sql`DROP TABLE custom_domains`.execute(trx);
      await sql`ALTER TABLE custom_domains_rebuilt RENAME TO custom_domains`.execute(trx);
      for (const index of objects.rows.filter((o) => o.type === 'index')) await sql.raw(index.sql).execute(trx);
      const dangling = await sql`PRAGMA foreign_key_check`.execute(trx);
      if (dangling.rows.length > 0)
        throw new Error(`custom_domains rebuild left dangling references: ${JSON.stringify(dangling.rows)}`);
    });
  } finally {
    await sql`PRAGMA foreign_keys = ON`.execute(db);
  }
}
