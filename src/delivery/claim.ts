import { sql } from 'kysely';
import type { Database } from '../db/database.ts';

export interface Claimed {
  stream_id: string;
  event_id: string;
  attempt_count: number;
  attempt_seq: number;
}

/**
 * Claims up to `limit` due deliveries with a lease until `leaseUntil`, in one statement, so two
 * workers (or two nodes) never claim the same delivery while its lease runs. A worker that dies
 * mid-send leaves its lease to expire; the delivery is then claimed again (at-least-once).
 * PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: one UPDATE … RETURNING (its writes are serialised).
 */
export async function claimDue(database: Database, at: string, leaseUntil: string, limit: number, excludeStreams: readonly string[]): Promise<Claimed[]> {
  if (limit <= 0) return [];
  const exclude = excludeStreams.length > 0 ? sql`AND stream_id NOT IN (${sql.join(excludeStreams)})` : sql``;
  const due = sql`status = 'pending' AND next_attempt_at <= ${at} AND (claimed_until IS NULL OR claimed_until <= ${at}) ${exclude}`;
  if (database.dialect === 'postgres') {
    const result = await sql<Claimed>`
      UPDATE deliveries d SET claimed_until = ${leaseUntil}
      FROM (SELECT stream_id, event_id FROM deliveries WHERE ${due} ORDER BY next_attempt_at LIMIT ${limit} FOR UPDATE SKIP LOCKED) c
      WHERE d.stream_id = c.stream_id AND d.event_id = c.event_id
      RETURNING d.stream_id, d.event_id, d.attempt_count, d.attempt_seq`.execute(database.db);
    return result.rows;
  }
  const result = await sql<Claimed>`
    UPDATE deliveries SET claimed_until = ${leaseUntil}
    WHERE (stream_id, event_id) IN (SELECT stream_id, event_id FROM deliveries WHERE ${due} ORDER BY next_attempt_at LIMIT ${limit})
    RETURNING stream_id, event_id, attempt_count, attempt_seq`.execute(database.db);
  return result.rows;
}
