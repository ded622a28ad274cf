import { sql } from 'kysely';
import type { Database } from './database.ts';

/**
 * A table whose rows are claimed under a lease: a single-column key, a status column (`status`), a
 * column saying when a row falls due and one holding its lease (ISO timestamps). Outboxes use the
 * defaults; a table that carries other work (custom domains awaiting a DNS check) names its own.
 */
export interface LeasedTable<Row> {
  table: string;
  key: string;
  /** Columns the claim returns. */
  returning: ReadonlyArray<keyof Row & string>;
  /** The status of a row with work left; 'pending' unless named. */
  pendingStatus?: string;
  /** When the row's work falls due; 'next_attempt_at' unless named. */
  dueColumn?: string;
  /** Until when the row is leased; 'claimed_until' unless named. */
  leaseColumn?: string;
}

/**
 * Claims up to `limit` due rows with a lease until `leaseUntil`, in one statement, so two workers (or
 * two nodes) never hold the same row while its lease runs. A worker that dies mid-send leaves its lease
 * to expire; the row is then claimed again (at-least-once). PostgreSQL: FOR UPDATE SKIP LOCKED, so
 * concurrent claims pass each other by instead of waiting; SQLite: one UPDATE … RETURNING, whose writes
 * are serialised anyway.
 * Deliveries have their own claim (delivery/claim.ts): each stream gets only the room its cap leaves,
 * and a claim brings its event and stream.
 */
export async function claimDueRows<Row>(
  database: Database,
  spec: LeasedTable<Row>,
  at: string,
  leaseUntil: string,
  limit: number,
): Promise<Row[]> {
  if (limit <= 0) return [];
  const table = sql.table(spec.table);
  const key = sql.ref(spec.key);
  const dueAt = sql.ref(spec.dueColumn ?? 'next_attempt_at');
  const lease = sql.ref(spec.leaseColumn ?? 'claimed_until');
  const due = sql`status = ${spec.pendingStatus ?? 'pending'} AND ${dueAt} <= ${at} AND (${lease} IS NULL OR ${lease} <= ${at})`;
  if (database.dialect === 'postgres') {
    const returning = sql.join(spec.returning.map((column) => sql.ref(`t.${column}`)));
    const result = await sql<Row>`
      UPDATE ${table} t SET ${lease} = ${leaseUntil}
      FROM (SELECT ${key} FROM ${table} WHERE ${due} ORDER BY ${dueAt} LIMIT ${limit} FOR UPDATE SKIP LOCKED) c
      WHERE t.${key} = c.${key}
      RETURNING ${returning}`.execute(database.db);
    return result.rows;
  }
  const returning = sql.join(spec.returning.map((column) => sql.ref(column)));
  const result = await sql<Row>`
    UPDATE ${table} SET ${lease} = ${leaseUntil}
    WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE ${due} ORDER BY ${dueAt} LIMIT ${limit})
    RETURNING ${returning}`.execute(database.db);
  return result.rows;
}
