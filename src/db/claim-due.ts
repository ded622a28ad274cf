import { sql } from 'kysely';
import type { Database } from './database.ts';

/**
 * An outbox table whose rows are claimed under a lease: a single-column key, and the columns
 * `status` ('pending' while there is work), `next_attempt_at` and `claimed_until` (ISO timestamps).
 */
export interface LeasedTable<Row> {
  table: string;
  key: string;
  /** Columns the claim returns. */
  returning: ReadonlyArray<keyof Row & string>;
}

/**
 * Claims up to `limit` due rows with a lease until `leaseUntil`, in one statement, so two workers (or
 * two nodes) never hold the same row while its lease runs. A worker that dies mid-send leaves its lease
 * to expire; the row is then claimed again (at-least-once). PostgreSQL: FOR UPDATE SKIP LOCKED, so
 * concurrent claims pass each other by instead of waiting; SQLite: one UPDATE … RETURNING, whose writes
 * are serialised anyway.
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
  const due = sql`status = 'pending' AND next_attempt_at <= ${at} AND (claimed_until IS NULL OR claimed_until <= ${at})`;
  if (database.dialect === 'postgres') {
    const returning = sql.join(spec.returning.map((column) => sql.ref(`t.${column}`)));
    const result = await sql<Row>`
      UPDATE ${table} t SET claimed_until = ${leaseUntil}
      FROM (SELECT ${key} FROM ${table} WHERE ${due} ORDER BY next_attempt_at LIMIT ${limit} FOR UPDATE SKIP LOCKED) c
      WHERE t.${key} = c.${key}
      RETURNING ${returning}`.execute(database.db);
    return result.rows;
  }
  const returning = sql.join(spec.returning.map((column) => sql.ref(column)));
  const result = await sql<Row>`
    UPDATE ${table} SET claimed_until = ${leaseUntil}
    WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE ${due} ORDER BY next_attempt_at LIMIT ${limit})
    RETURNING ${returning}`.execute(database.db);
  return result.rows;
}
