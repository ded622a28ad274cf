import type BetterSqlite3 from 'better-sqlite3';
import type { Database } from '../db/database.ts';
import type { EventsTable, EventStreamsTable } from '../db/schema.ts';

/** A claimed delivery, with what sending it needs: its event and its stream's destination. */
export interface Claimed extends Omit<EventsTable, 'id'>, Pick<EventStreamsTable, 'destination' | 'secret' | 'signing_secrets'> {
  stream_id: string;
  event_id: string;
  attempt_count: number;
  attempt_seq: number;
  /** The lease this claim holds: only its holder records the outcome. */
  claimed_until: string;
}

export interface ClaimLimits {
  /** Deliveries to claim at most. */
  limit: number;
  /** Most deliveries in flight to one stream on this node. */
  perStream: number;
  /** Deliveries this node has in flight, per stream. */
  running: ReadonlyMap<string, number>;
}

/**
 * Due deliveries are looked at in this many times `limit` (oldest first); among them each stream gets
 * what its cap leaves. A stream whose backlog fills the window gets its room and the next claim,
 * with that stream full and left out, reaches the others.
 */
const WINDOW_FACTOR = 2;

/** What the claim statement returns; the event and stream columns are read after it (SQLite). */
type ClaimedRow = Pick<Claimed, 'stream_id' | 'event_id' | 'attempt_count' | 'attempt_seq' | 'claimed_until'>;

// SQLite: json parameters keep one statement text (one cached prepared statement) whatever the
// number of busy streams; the events and streams of the claimed rows are read in two more statements
// in the same synchronous run, which costs less than subqueries in RETURNING.
const SQLITE_CLAIM = `
  UPDATE deliveries SET claimed_until = :lease
  WHERE rowid IN (
    SELECT id FROM (
      SELECT id, next_attempt_at,
        row_number() OVER (PARTITION BY stream_id ORDER BY next_attempt_at) + coalesce(json_extract(:running, '$."' || stream_id || '"'), 0) AS slot
      FROM (
        SELECT rowid AS id, stream_id, next_attempt_at FROM deliveries
        WHERE status = 'pending' AND next_attempt_at <= :at AND (claimed_until IS NULL OR claimed_until <= :at)
          AND stream_id NOT IN (SELECT value FROM json_each(:busy))
        ORDER BY next_attempt_at LIMIT :window
      )
    )
    WHERE slot <= :cap ORDER BY next_attempt_at LIMIT :limit
  )
  RETURNING stream_id, event_id, attempt_count, attempt_seq, claimed_until`;
const SQLITE_EVENTS = `SELECT id, tenant_id, type, time, source, data, purpose FROM events WHERE id IN (SELECT value FROM json_each(?))`;
const SQLITE_STREAMS = `SELECT id, destination, secret, signing_secrets FROM event_streams WHERE id IN (SELECT value FROM json_each(?))`;

// PostgreSQL: FOR UPDATE SKIP LOCKED on the window, so the claims of several nodes pass each other by
// instead of waiting; one round trip brings the events and streams; a named statement is parsed and
// planned once per connection.
const POSTGRES_CLAIM = `
  WITH window_rows AS (
    SELECT stream_id, event_id, next_attempt_at FROM deliveries
    WHERE status = 'pending' AND next_attempt_at <= $1 AND (claimed_until IS NULL OR claimed_until <= $1)
      AND NOT (stream_id = ANY($2::text[]))
    ORDER BY next_attempt_at LIMIT $3
    FOR UPDATE SKIP LOCKED
  ), chosen AS (
    SELECT stream_id, event_id FROM (
      SELECT stream_id, event_id, next_attempt_at,
        row_number() OVER (PARTITION BY stream_id ORDER BY next_attempt_at) + coalesce(($4::jsonb ->> stream_id)::int, 0) AS slot
      FROM window_rows
    ) ranked
    WHERE slot <= $5 ORDER BY next_attempt_at LIMIT $6
  ), claimed AS (
    UPDATE deliveries d SET claimed_until = $7 FROM chosen c
    WHERE d.stream_id = c.stream_id AND d.event_id = c.event_id
    RETURNING d.stream_id, d.event_id, d.attempt_count, d.attempt_seq, d.claimed_until
  )
  SELECT c.*, e.tenant_id, e.type, e.time, e.source, e.data, e.purpose, s.destination, s.secret, s.signing_secrets
  FROM claimed c JOIN events e ON e.id = c.event_id JOIN event_streams s ON s.id = c.stream_id`;

type StreamColumns = Pick<EventStreamsTable, 'id' | 'destination' | 'secret' | 'signing_secrets'>;

interface SqliteClaim {
  claim: BetterSqlite3.Statement<[Record<string, unknown>], ClaimedRow>;
  events: BetterSqlite3.Statement<[string], EventsTable>;
  streams: BetterSqlite3.Statement<[string], StreamColumns>;
}

const sqliteStatements = new WeakMap<BetterSqlite3.Database, SqliteClaim>();

function sqliteClaim(sqlite: BetterSqlite3.Database): SqliteClaim {
  let statements = sqliteStatements.get(sqlite);
  if (!statements) {
    statements = { claim: sqlite.prepare(SQLITE_CLAIM), events: sqlite.prepare(SQLITE_EVENTS), streams: sqlite.prepare(SQLITE_STREAMS) };
    sqliteStatements.set(sqlite, statements);
  }
  return statements;
}

/**
 * Claims up to `limit` due deliveries with a lease until `leaseUntil`, in one statement, so two
 * workers (or two nodes) never claim the same delivery while its lease runs. A worker that dies
 * mid-send leaves its lease to expire; the delivery is then claimed again (at-least-once). No stream
 * gets more than its room under the per-stream cap.
 */
export async function claimDue(database: Database, at: string, leaseUntil: string, limits: ClaimLimits): Promise<Claimed[]> {
  if (limits.limit <= 0) return [];
  const busy = [...limits.running].filter(([, n]) => n >= limits.perStream).map(([id]) => id);
  const running = JSON.stringify(Object.fromEntries(limits.running));
  const window = limits.limit * WINDOW_FACTOR;
  if (database.pool) {
    const result = await database.pool.query<Claimed>({
      name: 'tenantry_claim_deliveries',
      text: POSTGRES_CLAIM,
      values: [at, busy, window, running, limits.perStream, limits.limit, leaseUntil],
    });
    return result.rows;
  }
  const statements = sqliteClaim(database.sqlite!);
  const parameters = { at, lease: leaseUntil, busy: JSON.stringify(busy), running, window, cap: limits.perStream, limit: limits.limit };
  // Through Kysely's connection, which it holds for the whole of any open transaction: run directly,
  // the statement could land inside another caller's transaction.
  return database.db.connection().execute(async () => {
    const rows = statements.claim.all(parameters);
    if (rows.length === 0) return [];
    // No await from the claim to here: nothing can delete the events or streams in between.
    const events = new Map(statements.events.all(JSON.stringify(rows.map((r) => r.event_id))).map((e) => [e.id, e]));
    const streams = new Map(statements.streams.all(JSON.stringify([...new Set(rows.map((r) => r.stream_id))])).map((s) => [s.id, s]));
    return rows.map((row): Claimed => {
      const { id: _event, ...event } = events.get(row.event_id)!;
      const { id: _stream, ...stream } = streams.get(row.stream_id)!;
      return { ...row, ...event, ...stream };
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
