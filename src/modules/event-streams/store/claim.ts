import type BetterSqlite3 from 'better-sqlite3';
import type { Database } from '../../../db/database.ts';
import { now } from '../../../db/database.ts';
import { PG_ISO, type ClaimTime } from '../../../db/claim-due.ts';
import type { EventsTable, EventStreamsTable } from '../../../db/schema.ts';
import { withoutSync } from '../../../db/relaxed-sync.ts';
import { sqliteLimit } from '../../../db/sqlite-limit.ts';

/** A claimed delivery, with what sending it needs: its event and its stream's destination. */
export interface Claimed
  extends Omit<EventsTable, 'id'>, Pick<EventStreamsTable, 'destination' | 'secret' | 'signing_secrets'> {
  stream_id: string;
  event_id: string;
  attempt_count: number;
  attempt_seq: number;
  /** The lease this claim holds: only its holder records the outcome. */
  claimed_until: string;
  /** When the delivery last changed: for one queued again and not yet attempted, when it was queued. */
  updated_at: string;
}

export interface ClaimLimits {
  /** Deliveries to claim at most: the node's free slots. */
  limit: number;
  /** Most deliveries in flight to one stream on this node. */
  perStream: number;
  /** Of the free slots, how many only a stream with nothing in flight on this node may take. */
  reserve: number;
  /** Consecutive failures after which a stream whose circuit closed again gets one send at a time (the probe). */
  breakerFailures: number;
  /** Deliveries this node has in flight, per stream. */
  running: ReadonlyMap<string, number>;
}

/** What the claim statement returns; the event and stream columns are read after it (SQLite). */
type ClaimedRow = Pick<
  Claimed,
  'stream_id' | 'event_id' | 'attempt_count' | 'attempt_seq' | 'claimed_until' | 'updated_at'
>;

/**
 * The window (SQLite): the first claim takes its candidates among the oldest WINDOW_FACTOR × `limit` due
 * deliveries of streams with room, found among the oldest `examined` due ones, whatever the backlog:
 * twice the window, plus this node's sends in flight (leased, they lead the due order), and at least
 * EXAMINED_MIN. Every one of those is read (a claim of 11 reading 256 took half a millisecond), so the
 * bound follows what the claim needs. Only when the window finds nothing does the walk of the streams
 * run (see below), whose cost follows the number of streams with pending deliveries.
 */
const WINDOW_FACTOR = 2;
const EXAMINED_MIN = 64;

function examinedBound(limits: ClaimLimits): number {
  let inFlight = 0;
  for (const running of limits.running.values()) inFlight += running;
  return Math.max(EXAMINED_MIN, 2 * WINDOW_FACTOR * limits.limit + inFlight);
}

// Fair shares: candidates are ranked by the send they would be for their stream (its first in flight,
// its second, …), then by age, so every stream with due work gets a slot before any gets a second; and
// the last `reserve` free slots go only to first sends, so streams whose sends hang cannot take them all.
// A stream is left out while disabled or its circuit is open, and gets one send at a time (a probe) while
// its run of failures is at least `breakerFailures`.
//
// The candidates come from one of two reads:
// - the window (SQLite only, see POSTGRES_CLOCK): the oldest due deliveries, a bounded number of index
//   entries (deliveries_due), of the streams with room. Most claims end here; when it finds none, the walk.
// - the walk: the streams with pending deliveries, one seek each on deliveries_pending (the recursive
//   CTE), and of each with room its oldest due deliveries, at most its cap. It finds the streams with
//   room behind a backlog of streams without: read in due order alone, a claim had to step over every
//   due delivery of the streams at their cap, the whole backlog when all were (migration 018).
//
// SQLite: a json parameter keeps one statement text (one cached prepared statement) whatever the number
// of streams in flight; the events and streams of the claimed rows are read in two more statements in the same
// synchronous run, which costs less than subqueries in RETURNING. INDEXED BY: without statistics (the
// server never runs ANALYZE) SQLite would read the walk's seeks through deliveries_due. Every LIMIT is
// written with sqliteLimit: a bare bound one compiled both statements again at every claim.
const SQLITE_RANK_AND_CLAIM = `
  UPDATE deliveries SET claimed_until = :lease
  WHERE rowid IN (
    SELECT id FROM (
      SELECT id, slot, row_number() OVER (ORDER BY slot, next_attempt_at) AS pos FROM candidates WHERE slot <= cap
    )
    WHERE slot = 1 OR pos <= :shared
    ORDER BY pos LIMIT ${sqliteLimit(':limit')}
  )
  RETURNING stream_id, event_id, attempt_count, attempt_seq, claimed_until, updated_at`;
const SQLITE_WINDOW_CLAIM = `
  WITH candidates AS (
    SELECT id, next_attempt_at, cap, row_number() OVER (PARTITION BY stream_id ORDER BY next_attempt_at) + running AS slot
    FROM (
      SELECT due.id, due.stream_id, due.next_attempt_at,
        coalesce(json_extract(:running, '$."' || due.stream_id || '"'), 0) AS running,
        CASE WHEN s.consecutive_failures >= :breakerFailures THEN 1 ELSE :cap END AS cap
      FROM (
        SELECT rowid AS id, stream_id, next_attempt_at, claimed_until FROM deliveries INDEXED BY deliveries_due
        WHERE status = 'pending' AND next_attempt_at <= :at ORDER BY next_attempt_at LIMIT ${sqliteLimit(':examined')}
      ) due JOIN event_streams s ON s.id = due.stream_id
      WHERE (due.claimed_until IS NULL OR due.claimed_until <= :at)
        AND s.status = 'enabled' AND (s.circuit_open_until IS NULL OR s.circuit_open_until <= :at)
        AND running < cap AND (running = 0 OR :shared > 0)
      ORDER BY due.next_attempt_at LIMIT ${sqliteLimit(':window')}
    )
  )${SQLITE_RANK_AND_CLAIM}`;
const SQLITE_WALK_CLAIM = `
  WITH RECURSIVE pending_streams(id) AS (
    SELECT (SELECT min(stream_id) FROM deliveries INDEXED BY deliveries_pending WHERE status = 'pending')
    UNION ALL
    SELECT (SELECT min(stream_id) FROM deliveries INDEXED BY deliveries_pending WHERE status = 'pending' AND stream_id > p.id)
    FROM pending_streams p WHERE p.id IS NOT NULL
  ), open_streams AS (
    SELECT s.id, coalesce(json_extract(:running, '$."' || s.id || '"'), 0) AS running,
      CASE WHEN s.consecutive_failures >= :breakerFailures THEN 1 ELSE :cap END AS cap
    FROM pending_streams p JOIN event_streams s ON s.id = p.id
    WHERE s.status = 'enabled' AND (s.circuit_open_until IS NULL OR s.circuit_open_until <= :at)
  ), candidates AS (
    SELECT d.rowid AS id, d.next_attempt_at, o.cap,
      row_number() OVER (PARTITION BY d.stream_id ORDER BY d.next_attempt_at) + o.running AS slot
    FROM open_streams o JOIN deliveries d ON d.rowid IN (
      SELECT rowid FROM deliveries INDEXED BY deliveries_pending
      WHERE status = 'pending' AND stream_id = o.id AND next_attempt_at <= :at
        AND (claimed_until IS NULL OR claimed_until <= :at)
      ORDER BY next_attempt_at LIMIT ${sqliteLimit(':cap')})
    WHERE o.running < o.cap AND (o.running = 0 OR :shared > 0)
  )${SQLITE_RANK_AND_CLAIM}`;
const SQLITE_EVENTS = `SELECT id, tenant_id, type, time, source, data, purpose FROM events WHERE id IN (SELECT value FROM json_each(?))`;
const SQLITE_STREAMS = `SELECT id, destination, secret, signing_secrets FROM event_streams WHERE id IN (SELECT value FROM json_each(?))`;

// PostgreSQL: the database's clock decides what is due and until when the lease holds (the clock CTE is
// claim-due.ts's pgClock with $1 and $2); the walk alone, each stream's oldest due deliveries locked FOR
// UPDATE SKIP LOCKED, so the claims of several nodes pass each other by instead of waiting; one round
// trip brings the events and streams; a named statement is parsed and planned once per connection.
// No window first, as on SQLite: right after a bulk insert, with statistics of a nearly empty table,
// PostgreSQL read the window's bounded read as a bitmap scan of every pending delivery, sorted, once per
// stream (16,000 rows read for 64, each claim), where the walk's plan is index seeks either way; and with
// several nodes the oldest due deliveries are mostly the others' leased ones.
// $1 at, $2 lease (ms), $3 running, $4 breakerFailures, $5 cap, $6 shared, $7 limit.
const POSTGRES_CLOCK = `
  clock AS (
    SELECT to_char(t AT TIME ZONE 'UTC', ${PG_ISO}) AS at, to_char((t + $2::float8 * interval '1 millisecond') AT TIME ZONE 'UTC', ${PG_ISO}) AS lease
    FROM (SELECT coalesce($1::timestamptz, now()) AS t) n
  )`;
const POSTGRES_RANK_AND_CLAIM = `
  , chosen AS (
    SELECT stream_id, event_id FROM (
      SELECT stream_id, event_id, slot, row_number() OVER (ORDER BY slot, next_attempt_at) AS pos FROM (
        SELECT stream_id, event_id, next_attempt_at, cap,
          row_number() OVER (PARTITION BY stream_id ORDER BY next_attempt_at) + running AS slot
        FROM window_rows
      ) ranked
      WHERE slot <= cap
    ) placed
    WHERE slot = 1 OR pos <= $6 ORDER BY pos LIMIT $7
  ), claimed AS (
    UPDATE deliveries d SET claimed_until = clock.lease FROM chosen c, clock
    WHERE d.stream_id = c.stream_id AND d.event_id = c.event_id
    RETURNING d.stream_id, d.event_id, d.attempt_count, d.attempt_seq, d.claimed_until, d.updated_at
  )
  SELECT c.*, e.tenant_id, e.type, e.time, e.source, e.data, e.purpose, s.destination, s.secret, s.signing_secrets
  FROM claimed c JOIN events e ON e.id = c.event_id JOIN event_streams s ON s.id = c.stream_id`;
// The stream lookup is a LATERAL with LIMIT 1 so that it stays one primary-key probe per stream: flattened
// into a join, PostgreSQL hashed the whole of event_streams.
export const POSTGRES_WALK_CLAIM = `
  WITH RECURSIVE ${POSTGRES_CLOCK}, pending_streams(id) AS (
    SELECT (SELECT min(stream_id) FROM deliveries WHERE status = 'pending')
    UNION ALL
    SELECT (SELECT min(stream_id) FROM deliveries WHERE status = 'pending' AND stream_id > p.id)
    FROM pending_streams p WHERE p.id IS NOT NULL
  ), open_streams AS (
    SELECT s.id, coalesce(($3::jsonb ->> s.id)::int, 0) AS running,
      CASE WHEN s.consecutive_failures >= $4 THEN 1 ELSE $5 END AS cap
    FROM clock, pending_streams p CROSS JOIN LATERAL (SELECT * FROM event_streams WHERE id = p.id LIMIT 1) s
    WHERE s.status = 'enabled' AND (s.circuit_open_until IS NULL OR s.circuit_open_until <= clock.at)
  ), window_rows AS (
    SELECT d.stream_id, d.event_id, d.next_attempt_at, o.running, o.cap
    FROM clock, open_streams o CROSS JOIN LATERAL (
      SELECT x.stream_id, x.event_id, x.next_attempt_at FROM deliveries x
      WHERE x.status = 'pending' AND x.stream_id = o.id AND x.next_attempt_at <= clock.at
        AND (x.claimed_until IS NULL OR x.claimed_until <= clock.at)
      ORDER BY x.next_attempt_at LIMIT $5
      FOR UPDATE SKIP LOCKED
    ) d
    WHERE o.running < o.cap AND (o.running = 0 OR $6 > 0)
  )${POSTGRES_RANK_AND_CLAIM}`;

type StreamColumns = Pick<EventStreamsTable, 'id' | 'destination' | 'secret' | 'signing_secrets'>;

interface SqliteClaim {
  window: BetterSqlite3.Statement<[Record<string, unknown>], ClaimedRow>;
  walk: BetterSqlite3.Statement<[Record<string, unknown>], ClaimedRow>;
  events: BetterSqlite3.Statement<[string], EventsTable>;
  streams: BetterSqlite3.Statement<[string], StreamColumns>;
}

const sqliteStatements = new WeakMap<BetterSqlite3.Database, SqliteClaim>();

function sqliteClaim(sqlite: BetterSqlite3.Database): SqliteClaim {
  let statements = sqliteStatements.get(sqlite);
  if (!statements) {
    statements = {
      window: sqlite.prepare(SQLITE_WINDOW_CLAIM),
      walk: sqlite.prepare(SQLITE_WALK_CLAIM),
      events: sqlite.prepare(SQLITE_EVENTS),
      streams: sqlite.prepare(SQLITE_STREAMS),
    };
    sqliteStatements.set(sqlite, statements);
  }
  return statements;
}

/**
 * Claims up to `limit` due deliveries with a lease of `time.leaseMs`, each read and claimed in one statement, so two workers
 * (or two nodes) never claim the same delivery while its lease runs. A worker that dies mid-send leaves
 * its lease to expire; the delivery is then claimed again (at-least-once). No stream gets more than its
 * room under the per-stream cap, and every stream with due work gets a turn (see SQLITE_WINDOW_CLAIM).
 */
export async function claimDue(database: Database, time: ClaimTime, limits: ClaimLimits): Promise<Claimed[]> {
  if (limits.limit <= 0) return [];
  const running = JSON.stringify(Object.fromEntries(limits.running));
  const shared = limits.limit - limits.reserve;
  if (database.pool) {
    const result = await database.pool.query<Claimed>({
      name: 'tenantry_claim_deliveries',
      text: POSTGRES_WALK_CLAIM,
      values: [time.at ?? null, time.leaseMs, running, limits.breakerFailures, limits.perStream, shared, limits.limit],
    });
    return result.rows;
  }
  const statements = sqliteClaim(database.sqlite!);
  const at = time.at ?? now();
  const parameters = {
    at,
    lease: new Date(Date.parse(at) + time.leaseMs).toISOString(),
    running,
    shared,
    cap: limits.perStream,
    breakerFailures: limits.breakerFailures,
    limit: limits.limit,
  };
  // Through Kysely's connection, which it holds for the whole of any open transaction: run directly,
  // the statement could land inside another caller's transaction.
  return database.db.connection().execute(async () => {
    const rows = withoutSync(database.sqlite!, () => {
      const found = statements.window.all({
        ...parameters,
        window: limits.limit * WINDOW_FACTOR,
        examined: examinedBound(limits),
      });
      return found.length > 0 ? found : statements.walk.all(parameters);
    });
    if (rows.length === 0) return [];
    // No await from the claim to here: nothing can delete the events or streams in between.
    const events = new Map(statements.events.all(JSON.stringify(rows.map((r) => r.event_id))).map((e) => [e.id, e]));
    const streams = new Map(
      statements.streams.all(JSON.stringify([...new Set(rows.map((r) => r.stream_id))])).map((s) => [s.id, s]),
    );
    // Built member by member: with rest and spread (`{ ...row, ...event, ...stream }`) merging took
    // 7 µs a delivery, and objects V8 then reads through slow paths wherever they go.
    return rows.map((row): Claimed => {
      const event = events.get(row.event_id)!;
      const stream = streams.get(row.stream_id)!;
      return {
        stream_id: row.stream_id,
        event_id: row.event_id,
        attempt_count: row.attempt_count,
        attempt_seq: row.attempt_seq,
        claimed_until: row.claimed_until,
        updated_at: row.updated_at,
        tenant_id: event.tenant_id,
        type: event.type,
        time: event.time,
        source: event.source,
        data: event.data,
        purpose: event.purpose,
        destination: stream.destination,
        secret: stream.secret,
        signing_secrets: stream.signing_secrets,
      };
    });
  });
}

/** Hands claims back at once (the worker is stopping), rather than let them wait out their lease. */
export async function releaseClaims(database: Database, claims: readonly Claimed[]): Promise<void> {
  for (const claim of claims) {
    await database.db
      .updateTable('deliveries')
      .set({ claimed_until: null })
      .where('stream_id', '=', claim.stream_id)
      .where('event_id', '=', claim.event_id)
      .where('claimed_until', '=', claim.claimed_until)
      .execute();
  }
}
