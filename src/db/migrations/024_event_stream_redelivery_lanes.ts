import { sql, type Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

/**
 * A redelivery's background walk may be split into lanes, event id ranges worked on at once
 * (EVENT_STREAM_REDELIVERY_LANES): on PostgreSQL a million queued in two lanes took 0.75 of the time of
 * one walk, 0.98× a single UPDATE of them all where one walk took 1.29× (docs/benchmarks.md). Each lane
 * is a row of event_stream_redeliveries, claimed and leased on its own; the lanes of one request share its `redelivery_id`, by which a stream's redeliveries
 * under way are counted. A row recorded before (null) is a redelivery of its own.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const text = (await isPostgres(db)) ? sql`text COLLATE "C"` : sql`text`;
  await sql`ALTER TABLE event_stream_redeliveries ADD COLUMN redelivery_id ${text}`.execute(db);
}
