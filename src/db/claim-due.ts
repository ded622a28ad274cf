import { sql } from 'kysely';
import type { Database } from './database.ts';
import { now } from './database.ts';

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

/** When a claim is made and how long its lease holds. */
export interface ClaimTime {
  leaseMs: number;
  /** Now, unless given: the database's clock on PostgreSQL (every node shares it), this process's on SQLite. */
  at?: string;
}

/** PostgreSQL's timestamps written as the ISO strings stored everywhere (what Date#toISOString gives). */
export const PG_ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

/**
 * PostgreSQL: a one-row `clock` (`at`, `lease`) of ISO strings from the database's now() (or `time.at`),
 * so that nodes whose clocks differ neither take each other's leases early nor hold them late.
 */
const pgClock = (time: ClaimTime) => sql`clock AS (
  SELECT to_char(t AT TIME ZONE 'UTC', ${sql.raw(PG_ISO)}) AS at,
    to_char((t + ${time.leaseMs}::float8 * interval '1 millisecond') AT TIME ZONE 'UTC', ${sql.raw(PG_ISO)}) AS lease
  FROM (SELECT coalesce(${time.at ?? null}::timestamptz, now()) AS t) n
)`;

/**
 * Claims up to `limit` due rows with a lease of `time.leaseMs`, in one statement, so two workers (or two
 * nodes) never hold the same row while its lease runs; each row comes with its lease (`lease`), which
 * its outcome is recorded under. A worker that dies mid-send leaves its lease to expire; the row is then
 * claimed again (at-least-once). PostgreSQL: FOR UPDATE SKIP LOCKED, so concurrent claims pass each other
 * by instead of waiting; SQLite: one UPDATE … RETURNING, whose writes are serialised anyway.
 * Deliveries have their own claim (modules/event-streams/store/claim.ts): each stream gets only the room its cap leaves,
 * and a claim brings its event and stream.
 */
export async function claimDueRows<Row>(
  database: Database,
  spec: LeasedTable<Row>,
  time: ClaimTime,
  limit: number,
): Promise<Array<Row & { lease: string }>> {
  if (limit <= 0) return [];
  const table = sql.table(spec.table);
  const key = sql.ref(spec.key);
  const dueAt = sql.ref(spec.dueColumn ?? 'next_attempt_at');
  const leaseColumn = spec.leaseColumn ?? 'claimed_until';
  const lease = sql.ref(leaseColumn);
  const pending = spec.pendingStatus ?? 'pending';
  if (database.dialect === 'postgres') {
    const returning = sql.join(spec.returning.map((column) => sql.ref(`t.${column}`)));
    const result = await sql<Row & { lease: string }>`
      WITH ${pgClock(time)}
      UPDATE ${table} t SET ${lease} = clock.lease
      FROM clock, (
        SELECT ${key} FROM ${table}, clock
        WHERE status = ${pending} AND ${dueAt} <= clock.at AND (${lease} IS NULL OR ${lease} <= clock.at)
        ORDER BY ${dueAt} LIMIT ${limit} FOR UPDATE OF ${table} SKIP LOCKED
      ) c
      WHERE t.${key} = c.${key}
      RETURNING ${returning}, t.${lease} AS lease`.execute(database.db);
    return result.rows;
  }
  const at = time.at ?? now();
  const leaseUntil = new Date(Date.parse(at) + time.leaseMs).toISOString();
  const returning = sql.join(spec.returning.map((column) => sql.ref(column)));
  // The limit cast: a bare bound LIMIT compiles the statement twice (see db/sqlite-limit.ts).
  const result = await sql<Row & { lease: string }>`
    UPDATE ${table} SET ${lease} = ${leaseUntil}
    WHERE ${key} IN (
      SELECT ${key} FROM ${table}
      WHERE status = ${pending} AND ${dueAt} <= ${at} AND (${lease} IS NULL OR ${lease} <= ${at})
      ORDER BY ${dueAt} LIMIT CAST(${limit} AS INTEGER)
    )
    RETURNING ${returning}, ${lease} AS lease`.execute(database.db);
  return result.rows;
}
