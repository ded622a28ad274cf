import type { Kysely } from 'kysely';

/**
 * A stream's attempts in time order: the delivery statistics (GET …/event-streams/{id}/stats) read one
 * stream's attempts over a bounded window. Without it they would range over delivery_attempts_timestamp,
 * every stream's attempts in that window, or the primary key, every attempt the stream ever made.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('delivery_attempts_stream_time')
    .on('delivery_attempts')
    .columns(['stream_id', 'timestamp'])
    .execute();
}
