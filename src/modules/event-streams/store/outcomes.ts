import type BetterSqlite3 from 'better-sqlite3';
import type { Database } from '../../../db/database.ts';
import { PG_ISO } from '../../../db/claim-due.ts';
import { withoutSync } from '../../../db/relaxed-sync.ts';
import { disabledReason, runAfter, tally, type CircuitRules, type StreamRun, type Tally } from '../delivery/circuit.ts';
import type { Outcome } from '../delivery/outcome.ts';
import { minuteOf } from '../stats.ts';

export type { Outcome };

// Only the holder of the lease records the outcome: after a redelivery, or a re-claim once the lease
// ran out, the delivery is someone else's, and the attempt goes unrecorded as its send went unasked.
// A batch may hold two outcomes of one delivery (its recording failed for longer than the lease, and the
// same worker claimed it again): only the one whose lease the update matched is recorded (PostgreSQL:
// `updated` returns that outcome's own row, not every outcome of the delivery).
const SQLITE_UPDATE = `
  UPDATE deliveries SET status = :status, attempt_count = :attempt_count, attempt_seq = attempt_seq + 1,
    next_attempt_at = :next_attempt_at, claimed_until = NULL, updated_at = :at
  WHERE stream_id = :stream_id AND event_id = :event_id AND status = 'pending' AND claimed_until = :lease`;
const SQLITE_INSERT = `
  INSERT INTO delivery_attempts (stream_id, event_id, seq, status, timestamp, error_message, duration)
  VALUES (:stream_id, :event_id, :seq, :attempt_status, :at, :error_message, :duration)`;
// The redelivery's marker, before the first attempt after it (see Outcome.requeued_at). DO NOTHING: a
// row the redelivery itself wrote (a node of an earlier version) stays as it is.
const SQLITE_INSERT_RETRYING = `
  INSERT INTO delivery_attempts (stream_id, event_id, seq, status, timestamp)
  VALUES (:stream_id, :event_id, :seq - 1, 'retrying', :requeued_at) ON CONFLICT DO NOTHING`;

// The batch's attempts added to their minutes' counts (see migration 021), one row per stream and minute.
const SQLITE_COUNT = `
  INSERT INTO delivery_counts (stream_id, minute, delivered, failed) VALUES (:stream_id, :minute, :delivered, :failed)
  ON CONFLICT (stream_id, minute) DO UPDATE SET
    delivered = delivered + excluded.delivered, failed = failed + excluded.failed`;

/** The stream's run of failures once the batch's outcomes for it are counted (`t`: the batch's tally, `s`: the stream). */
const NEXT_RUN = `((CASE WHEN t.reset THEN 0 ELSE s.consecutive_failures END) + t.failures)`;

// The outcomes' order (ordinality) tells which failures came after the stream's last success. A failure
// of a send that began before the circuit opened does not extend it (see CircuitRules). The streams
// whose run changes are locked in id order first, so two nodes recording at once cannot deadlock; FOR NO
// KEY UPDATE, which leaves the stream's key to the KEY SHARE lock every new row of delivery_counts takes
// on its stream (its foreign key): FOR UPDATE there made a recording that counted a new minute of one
// stream wait for another recording that held that stream and waited for it (PostgreSQL: 40P01).
const POSTGRES_RECORD = `
  WITH outcome AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::int[], $9::text[], $10::text[], $11::float8[], $17::text[])
      WITH ORDINALITY AS o(stream_id, event_id, lease, status, attempt_count, next_attempt_at, at, seq, attempt_status, error_message, duration, requeued_at, ord)
  ), updated AS (
    UPDATE deliveries d SET status = o.status, attempt_count = o.attempt_count, attempt_seq = d.attempt_seq + 1,
      next_attempt_at = o.next_attempt_at, claimed_until = NULL, updated_at = o.at
    FROM outcome o
    WHERE d.stream_id = o.stream_id AND d.event_id = o.event_id AND d.status = 'pending' AND d.claimed_until = o.lease
    RETURNING o.ord
  ), recorded AS (
    SELECT o.* FROM updated u JOIN outcome o ON o.ord = u.ord
  ), requeued AS (
    INSERT INTO delivery_attempts (stream_id, event_id, seq, status, timestamp)
    SELECT stream_id, event_id, seq - 1, 'retrying', requeued_at FROM recorded WHERE requeued_at IS NOT NULL
    ON CONFLICT DO NOTHING
  ), inserted AS (
    INSERT INTO delivery_attempts (stream_id, event_id, seq, status, timestamp, error_message, duration)
    SELECT stream_id, event_id, seq, attempt_status, at, error_message, duration FROM recorded
  ), counted AS (
    -- After the streams (this runs once the main query has), in key order: two recordings adding to the
    -- same minutes wait for each other, never in a cycle.
    INSERT INTO delivery_counts (stream_id, minute, delivered, failed)
    SELECT stream_id, substr(at, 1, 16), count(*) FILTER (WHERE attempt_status = 'delivered'),
      count(*) FILTER (WHERE attempt_status = 'failed')
    FROM recorded GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (stream_id, minute) DO UPDATE SET
      delivered = delivery_counts.delivered + excluded.delivered, failed = delivery_counts.failed + excluded.failed
  ), tally AS (
    SELECT stream_id, bool_or(attempt_status = 'delivered') AS reset,
      count(*) FILTER (WHERE attempt_status = 'failed' AND ord > last_success)::int AS failures, max(at) AS at
    FROM (
      SELECT *, coalesce(max(ord) FILTER (WHERE attempt_status = 'delivered') OVER (PARTITION BY stream_id), 0) AS last_success FROM recorded
    ) r
    GROUP BY stream_id
  ), locked AS (
    SELECT s.id, s.status AS was FROM event_streams s JOIN tally t ON t.stream_id = s.id
    WHERE $12 AND (t.failures > 0 OR s.consecutive_failures > 0 OR s.circuit_open_until IS NOT NULL)
    ORDER BY s.id FOR NO KEY UPDATE OF s
  ), streams AS (
    UPDATE event_streams s SET
      consecutive_failures = ${NEXT_RUN},
      circuit_open_until = CASE
        WHEN t.failures > 0 AND ${NEXT_RUN} >= $13
          AND (t.reset OR s.circuit_open_until IS NULL OR s.circuit_open_until <= to_char(now() AT TIME ZONE 'UTC', ${PG_ISO})) THEN
          to_char((now() + $14::float8 * (1 << least(${NEXT_RUN} - $13, 6)) * interval '1 millisecond') AT TIME ZONE 'UTC', ${PG_ISO})
        WHEN t.reset THEN NULL ELSE s.circuit_open_until END,
      status = CASE WHEN s.status = 'enabled' AND $15 > 0 AND ${NEXT_RUN} >= $15 THEN 'disabled' ELSE s.status END,
      status_reason = CASE WHEN s.status = 'enabled' AND $15 > 0 AND ${NEXT_RUN} >= $15 THEN $16 ELSE s.status_reason END,
      updated_at = CASE WHEN s.status = 'enabled' AND $15 > 0 AND ${NEXT_RUN} >= $15 THEN t.at ELSE s.updated_at END
    FROM tally t, locked l
    WHERE s.id = t.stream_id AND l.id = s.id
    RETURNING s.id, s.status, l.was
  )
  SELECT (SELECT count(*) FROM recorded)::int AS recorded,
    coalesce((SELECT json_agg(id) FROM streams WHERE was = 'enabled' AND status = 'disabled'), '[]'::json) AS disabled`;

/** A row of delivery_counts: one stream's attempts of one minute, or those a batch adds to it. */
interface MinuteCount {
  stream_id: string;
  minute: string;
  delivered: number;
  failed: number;
}

/** How many attempts were recorded, and the streams the recording disabled. */
interface Recorded {
  recorded: number;
  disabled: string[];
}

type Recorder = BetterSqlite3.Transaction<
  (outcomes: readonly Outcome[], circuit: CircuitRules | undefined) => Recorded
>;
const sqliteRecorders = new WeakMap<BetterSqlite3.Database, Recorder>();

function sqliteRecorder(sqlite: BetterSqlite3.Database): Recorder {
  let recorder = sqliteRecorders.get(sqlite);
  if (!recorder) {
    const update = sqlite.prepare<[Outcome], void>(SQLITE_UPDATE);
    const insert = sqlite.prepare<[Outcome], void>(SQLITE_INSERT);
    const insertRetrying = sqlite.prepare<[Outcome], void>(SQLITE_INSERT_RETRYING);
    const count = sqlite.prepare<[MinuteCount], void>(SQLITE_COUNT);
    const stream = sqlite.prepare<[string], StreamRun>(
      'SELECT consecutive_failures, circuit_open_until, status FROM event_streams WHERE id = ?',
    );
    const setRun = sqlite.prepare<[Record<string, unknown>], void>(`
      UPDATE event_streams SET consecutive_failures = :run, circuit_open_until = :openUntil, status = :status,
        status_reason = CASE WHEN :disabled THEN :reason ELSE status_reason END, updated_at = CASE WHEN :disabled THEN :at ELSE updated_at END
      WHERE id = :id`);
    recorder = sqlite.transaction((outcomes: readonly Outcome[], circuit: CircuitRules | undefined) => {
      const tallies = new Map<string, Tally>();
      const counts = new Map<string, MinuteCount>();
      const result: Recorded = { recorded: 0, disabled: [] };
      for (const outcome of outcomes) {
        if (update.run(outcome).changes === 0) continue;
        if (outcome.requeued_at !== null) insertRetrying.run(outcome);
        insert.run(outcome);
        result.recorded++;
        tallies.set(outcome.stream_id, tally(tallies.get(outcome.stream_id), outcome));
        const minute = minuteOf(outcome.at);
        const key = `${outcome.stream_id} ${minute}`;
        let counted = counts.get(key);
        if (!counted) counts.set(key, (counted = { stream_id: outcome.stream_id, minute, delivered: 0, failed: 0 }));
        counted[outcome.attempt_status]++;
      }
      for (const counted of counts.values()) count.run(counted);
      if (circuit) {
        for (const [id, counted] of tallies) {
          const current = stream.get(id);
          if (!current) continue;
          const next = runAfter(current, counted, circuit);
          if (!next) continue;
          const { run, openUntil, disabled } = next;
          setRun.run({
            id,
            run,
            openUntil,
            status: disabled ? 'disabled' : current.status,
            disabled: disabled ? 1 : 0,
            reason: disabledReason(circuit.disableAfter),
            at: counted.at,
          });
          if (disabled) result.disabled.push(id);
        }
      }
      return result;
    });
    sqliteRecorders.set(sqlite, recorder);
  }
  return recorder;
}

/**
 * Records finished attempts, many in one transaction (SQLite) or one statement (PostgreSQL): each
 * delivery takes its new state and gains its attempt row (the first after a redelivery also that
 * redelivery's `retrying` row, see Outcome.requeued_at) and is added to its minute's count (what stats
 * read, migration 021), and with `circuit` each stream's run of
 * failures is counted: it opens the stream's circuit, and a long one disables the stream. Returns how
 * many attempts were recorded.
 */
export async function recordOutcomes(
  database: Database,
  outcomes: readonly Outcome[],
  circuit?: CircuitRules,
): Promise<number> {
  if (outcomes.length === 0) return 0;
  const { recorded, disabled } = await record(database, outcomes, circuit);
  for (const streamId of disabled) circuit?.onDisabled(streamId);
  return recorded;
}

async function record(
  database: Database,
  outcomes: readonly Outcome[],
  circuit: CircuitRules | undefined,
): Promise<Recorded> {
  if (database.pool) {
    const column = <K extends keyof Outcome>(key: K) => outcomes.map((o) => o[key]);
    const result = await database.pool.query<{ recorded: number; disabled: string[] }>({
      name: 'tenantry_record_delivery_outcomes',
      text: POSTGRES_RECORD,
      values: [
        column('stream_id'),
        column('event_id'),
        column('lease'),
        column('status'),
        column('attempt_count'),
        column('next_attempt_at'),
        column('at'),
        column('seq'),
        column('attempt_status'),
        column('error_message'),
        column('duration'),
        circuit !== undefined,
        circuit?.openAfter ?? 0,
        circuit?.cooldownMs ?? 0,
        circuit?.disableAfter ?? 0,
        disabledReason(circuit?.disableAfter ?? 0),
        column('requeued_at'),
      ],
    });
    const row = result.rows[0]!;
    return { recorded: row.recorded, disabled: row.disabled };
  }
  const recorder = sqliteRecorder(database.sqlite!);
  // Through Kysely's connection, which it holds for the whole of any open transaction: run directly,
  // these writes could land inside another caller's transaction (and roll back with it). BEGIN
  // IMMEDIATE: the write lock is waited for (busy_timeout) before anything is read. Not waiting for the
  // disk: a record lost to a power cut sends its deliveries again (see withoutSync).
  return database.db
    .connection()
    .execute(async () => withoutSync(database.sqlite!, () => recorder.immediate(outcomes, circuit)));
}
