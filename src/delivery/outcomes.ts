import type BetterSqlite3 from 'better-sqlite3';
import type { Database } from '../db/database.ts';
import type { DeliveriesTable, DeliveryAttemptsTable } from '../db/schema.ts';

/** One finished attempt: the delivery's next state and the attempt's row. */
export interface Outcome {
  stream_id: string;
  event_id: string;
  /** The lease the attempt was made under. */
  lease: string;
  status: DeliveriesTable['status'];
  attempt_count: number;
  next_attempt_at: string;
  /** When the attempt ended: the attempt's timestamp and the delivery's updated_at. */
  at: string;
  /** The attempt row's place in the delivery's history: the claimed attempt_seq plus one. */
  seq: number;
  attempt_status: Exclude<DeliveryAttemptsTable['status'], 'retrying'>;
  error_message: string | null;
  /** Milliseconds. */
  duration: number;
}

// Only the holder of the lease records the outcome: after a redelivery, or a re-claim once the lease
// ran out, the delivery is someone else's, and the attempt goes unrecorded as its send went unasked.
const SQLITE_UPDATE = `
  UPDATE deliveries SET status = :status, attempt_count = :attempt_count, attempt_seq = attempt_seq + 1,
    next_attempt_at = :next_attempt_at, claimed_until = NULL, updated_at = :at
  WHERE stream_id = :stream_id AND event_id = :event_id AND status = 'pending' AND claimed_until = :lease`;
const SQLITE_INSERT = `
  INSERT INTO delivery_attempts (stream_id, event_id, seq, status, timestamp, error_message, duration)
  VALUES (:stream_id, :event_id, :seq, :attempt_status, :at, :error_message, :duration)`;

const POSTGRES_RECORD = `
  WITH outcome AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::int[], $9::text[], $10::text[], $11::float8[])
      AS o(stream_id, event_id, lease, status, attempt_count, next_attempt_at, at, seq, attempt_status, error_message, duration)
  ), updated AS (
    UPDATE deliveries d SET status = o.status, attempt_count = o.attempt_count, attempt_seq = d.attempt_seq + 1,
      next_attempt_at = o.next_attempt_at, claimed_until = NULL, updated_at = o.at
    FROM outcome o
    WHERE d.stream_id = o.stream_id AND d.event_id = o.event_id AND d.status = 'pending' AND d.claimed_until = o.lease
    RETURNING d.stream_id, d.event_id
  )
  INSERT INTO delivery_attempts (stream_id, event_id, seq, status, timestamp, error_message, duration)
  SELECT u.stream_id, u.event_id, o.seq, o.attempt_status, o.at, o.error_message, o.duration
  FROM updated u JOIN outcome o ON o.stream_id = u.stream_id AND o.event_id = u.event_id`;

type Recorder = BetterSqlite3.Transaction<(outcomes: readonly Outcome[]) => number>;
const sqliteRecorders = new WeakMap<BetterSqlite3.Database, Recorder>();

function sqliteRecorder(sqlite: BetterSqlite3.Database): Recorder {
  let recorder = sqliteRecorders.get(sqlite);
  if (!recorder) {
    const update = sqlite.prepare<[Outcome], void>(SQLITE_UPDATE);
    const insert = sqlite.prepare<[Outcome], void>(SQLITE_INSERT);
    recorder = sqlite.transaction((outcomes: readonly Outcome[]) => {
      let recorded = 0;
      for (const outcome of outcomes) {
        if (update.run(outcome).changes === 0) continue;
        insert.run(outcome);
        recorded++;
      }
      return recorded;
    });
    sqliteRecorders.set(sqlite, recorder);
  }
  return recorder;
}

/**
 * Records finished attempts, many in one transaction (SQLite) or one statement (PostgreSQL): each
 * delivery takes its new state and gains its attempt row. Returns how many were recorded.
 */
export async function recordOutcomes(database: Database, outcomes: readonly Outcome[]): Promise<number> {
  if (outcomes.length === 0) return 0;
  if (database.pool) {
    const column = <K extends keyof Outcome>(key: K) => outcomes.map((o) => o[key]);
    const result = await database.pool.query({
      name: 'tenantry_record_delivery_outcomes',
      text: POSTGRES_RECORD,
      values: [
        column('stream_id'), column('event_id'), column('lease'), column('status'), column('attempt_count'),
        column('next_attempt_at'), column('at'), column('seq'), column('attempt_status'), column('error_message'), column('duration'),
      ],
    });
    return result.rowCount ?? 0;
  }
  const record = sqliteRecorder(database.sqlite!);
  // Through Kysely's connection, which it holds for the whole of any open transaction: run directly,
  // these writes could land inside another caller's transaction (and roll back with it). BEGIN
  // IMMEDIATE: the write lock is waited for (busy_timeout) before anything is read.
  return database.db.connection().execute(async () => record.immediate(outcomes));
}
