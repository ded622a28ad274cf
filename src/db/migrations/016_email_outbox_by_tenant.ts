import type { Kysely } from 'kysely';

/**
 * A tenant's emails, newest first: GET /api/v2/emails/outbox pages through them. Sent emails stay in
 * the outbox (their bodies dropped), so without it a page would read every email of every tenant.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('email_outbox_tenant_created')
    .on('email_outbox')
    .columns(['tenant_id', 'created_at', 'id'])
    .execute();
}
