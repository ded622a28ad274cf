import { sql, type Kysely } from 'kysely';

/**
 * A redelivery's lanes are cut where they hold as many failed deliveries each, not at equal spans of
 * event ids (migration 024's cuts, equal spans of time): an outage's failures bunched in one stretch
 * fell in one lane, which then walked them alone. The request records one row with the lanes it is to
 * be split into (`lanes`); the first node to claim it counts the failed deliveries of its range (reads
 * of deliveries_failed) and writes a row a lane, `lanes` null in each. Null: the row is walked as it
 * is (one lane, a lane already cut, or a row recorded before).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE event_stream_redeliveries ADD COLUMN lanes integer`.execute(db);
}
