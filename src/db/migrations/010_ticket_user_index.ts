import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // The child side of the tickets' foreign key to users: without it, deleting a user (or a tenant)
  // scans every ticket to find those its cascade removes, and nearly every user creation adds one.
  await db.schema
    .createIndex('email_verification_tickets_by_user')
    .on('email_verification_tickets')
    .columns(['tenant_id', 'user_id'])
    .execute();
}
