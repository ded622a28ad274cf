import { sql, type Kysely } from 'kysely';

/**
 * A stream's failed deliveries, in event id order: the deliveries log pages through them and a
 * redelivery takes them. Without it both read every failed delivery of every stream (deliveries_due) or
 * every delivery the stream ever had (the primary key), a set that only grows. Partial, so the worker's
 * writes (pending → delivered) never touch it; the queries name `status = 'failed'` as a literal, which
 * is what lets either planner use it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX deliveries_failed ON deliveries (stream_id, event_id) WHERE status = 'failed'`.execute(db);
}
