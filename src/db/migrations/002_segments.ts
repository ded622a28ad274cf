import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('segments')
    .addColumn('tenant_id', 'text', (c) => c.notNull().references('tenants.id').onDelete('cascade'))
    .addColumn('id', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('rules', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    // The key doubles as the index of the list's keyset paging (tenant, then id).
    .addPrimaryKeyConstraint('segments_pk', ['tenant_id', 'id'])
    // Names are unique per tenant; creating and renaming rely on it to be race-safe.
    .addUniqueConstraint('segments_tenant_name', ['tenant_id', 'name'])
    .execute();
}
