import { sql, type Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

/**
 * A redelivery of more failed deliveries than one chunk queues (EVENT_STREAM_REDELIVERY_CHUNK_ROWS) is
 * recorded here by the request's transaction, which queued its first chunk, and the rest is queued by
 * background work chunk after chunk (modules/event-streams/redeliveries.ts): as one UPDATE, a million
 * rows held the database for 5–7 s on SQLite, every tenant's requests waiting meanwhile, and 12–14 s
 * on PostgreSQL. A row holds the request's filter, how far its walk of the stream's failed deliveries
 * got (event ids in order, up to the last that was failed when it was asked for), and, as a claimed
 * row does, when it is due and the lease of the node doing it. It goes when its walk ends, and with its
 * stream.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = (await isPostgres(db)) ? sql`text COLLATE "C"` : sql`text`;
  await sql`CREATE TABLE event_stream_redeliveries (
    id ${text} PRIMARY KEY,
    stream_id ${text} NOT NULL REFERENCES event_streams (id) ON DELETE CASCADE,
    tenant_id ${text} NOT NULL,
    event_types ${text},
    time_from ${text},
    time_to ${text},
    after_event_id ${text} NOT NULL,
    until_event_id ${text} NOT NULL,
    queued integer NOT NULL,
    status ${text} NOT NULL,
    next_attempt_at ${text} NOT NULL,
    claimed_until ${text},
    created_at ${text} NOT NULL
  )`.execute(db);
  await db.schema
    .createIndex('event_stream_redeliveries_due')
    .on('event_stream_redeliveries')
    .columns(['status', 'next_attempt_at'])
    .execute();
  // The cascade from a stream's row, and the count of a stream's redeliveries under way.
  await db.schema
    .createIndex('event_stream_redeliveries_stream')
    .on('event_stream_redeliveries')
    .columns(['stream_id'])
    .execute();
}
