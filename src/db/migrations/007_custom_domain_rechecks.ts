import { sql, type Kysely } from 'kysely';

/** The schedule of background DNS re-checks of pending custom domains. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('custom_domains')
    // Null unless the domain is pending_verification: only pending domains are re-checked.
    .addColumn('next_check_at', 'text')
    .execute();
  await db.schema
    .alterTable('custom_domains')
    .addColumn('check_count', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  // The lease of the node running a re-check: no other node checks the domain until it runs out.
  await db.schema.alterTable('custom_domains').addColumn('check_claimed_until', 'text').execute();
  await db.schema.createIndex('custom_domains_next_check').on('custom_domains').column('next_check_at').execute();
  // Domains pending before this migration are due at once (and fail at once when past their window).
  await sql`UPDATE custom_domains SET next_check_at = created_at WHERE status = 'pending_verification'`.execute(db);
}
