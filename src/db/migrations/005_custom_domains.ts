import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('custom_domains')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    // Lower-cased; unique across every tenant, so two tenants racing for one hostname get one 201 and one 409.
    .addColumn('domain', 'text', (c) => c.notNull().unique())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('is_primary', 'integer', (c) => c.notNull())
    .addColumn('verification_record', 'text', (c) => c.notNull())
    .addColumn('verification_status', 'text')
    .addColumn('verification_error', 'text')
    .addColumn('last_verified_at', 'text')
    .addColumn('custom_client_ip_header', 'text')
    .addColumn('tls_policy', 'text')
    .addColumn('domain_metadata', 'text')
    .addColumn('relying_party_identifier', 'text')
    .addColumn('cname_api_key_hash', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('custom_domains_tenant').on('custom_domains').columns(['tenant_id', 'domain']).execute();
  // One row per tenant whose default is a custom domain; no row: the canonical domain is the default.
  await db.schema
    .createTable('custom_domain_defaults')
    .addColumn('tenant_id', 'text', (c) => c.primaryKey().references('tenants.id').onDelete('cascade'))
    .addColumn('custom_domain_id', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}
