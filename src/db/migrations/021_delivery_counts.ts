import { sql, type Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

/**
 * A stream's finished attempts counted per minute, delivered and failed: what GET …/event-streams/{id}/stats
 * reads. Counting the attempts themselves cost about a second per million in the window (a busy stream
 * makes millions a day), and the console asks for every listed stream every 30 s; a day of counts is at
 * most 1,440 rows however busy the stream. The counts are written with the attempts, in the same
 * transaction (store/outcomes.ts), so they never disagree with them. Attempts recorded before this
 * migration are counted here, once: 0.8–1.7 s a million on SQLite, 0.7–1.0 s on PostgreSQL. `minute` is the attempt's time cut after the minute,
 * `YYYY-MM-DDTHH:MM`, so hours and days are its prefixes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = await isPostgres(db);
  const text = postgres ? sql`text COLLATE "C"` : sql`text`;
  await sql`CREATE TABLE delivery_counts (
    stream_id ${text} NOT NULL REFERENCES event_streams (id) ON DELETE CASCADE,
    minute ${text} NOT NULL,
    delivered integer NOT NULL,
    failed integer NOT NULL,
    CONSTRAINT delivery_counts_pk PRIMARY KEY (stream_id, minute)
  )${postgres ? sql`` : sql` WITHOUT ROWID`}`.execute(db);
  await sql`INSERT INTO delivery_counts (stream_id, minute, delivered, failed)
    SELECT stream_id, substr(timestamp, 1, 16),
      sum(CASE WHEN status = 'delivered' THEN 1 ELSE 0 END), sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END)
    FROM delivery_attempts WHERE status IN ('delivered', 'failed')
    GROUP BY stream_id, substr(timestamp, 1, 16)`.execute(db);
}
