import type { Kysely } from 'kysely';

/**
 * delivery_attempts_stream_time in the full order of a stream's attempts (time, then event and attempt
 * number, unique): GET …/event-streams/{id}/attempts reads the latest attempts, or those after a cursor,
 * straight from the index and stops after a page, however many attempts share a timestamp (a bulk
 * redelivery stamps them all alike) and however many the stream made. The statistics' window reads
 * (stream_id, timestamp) use its prefix as before. It replaces the two-column index, not adds to it: one
 * index per recorded attempt to write, as before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('delivery_attempts_stream_time').execute();
  await db.schema
    .createIndex('delivery_attempts_stream_time')
    .on('delivery_attempts')
    .columns(['stream_id', 'timestamp', 'event_id', 'seq'])
    .execute();
}
