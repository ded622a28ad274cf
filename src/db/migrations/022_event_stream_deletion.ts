import { sql, type Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

/**
 * A deleted stream is marked (status 'deleting', its name freed) in one short transaction, and its
 * deliveries and attempts are removed afterwards in bounded chunks by background work (store/deletions.ts):
 * deleting them with the row, through the foreign keys' cascade, was one statement of 16 s a million
 * rows on SQLite, every tenant's requests waiting meanwhile. The stream row carries that work as a
 * custom domain carries its re-checks: when it is due and the lease of the node doing it. The index
 * serves the claim, which reads status and due time (db/claim-due.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = (await isPostgres(db)) ? sql`text COLLATE "C"` : sql`text`;
  await sql`ALTER TABLE event_streams ADD COLUMN deletion_next_at ${text}`.execute(db);
  await sql`ALTER TABLE event_streams ADD COLUMN deletion_claimed_until ${text}`.execute(db);
  await db.schema
    .createIndex('event_streams_deletion_due')
    .on('event_streams')
    .columns(['status', 'deletion_next_at'])
    .execute();
}
