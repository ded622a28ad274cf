import { sql, type ExpressionBuilder, type Selectable } from 'kysely';
import type { Database, Tx } from '../../../db/database.ts';
import { insertInSlices } from '../../../db/database.ts';
import type { DeliveriesTable, DeliveryAttemptsTable, EventsTable, Schema } from '../../../db/schema.ts';
import type { BucketCount, StatsWindow } from '../stats.ts';

export type EventRow = Selectable<EventsTable>;
export type DeliveryRow = Selectable<DeliveriesTable>;
export type AttemptRow = Selectable<DeliveryAttemptsTable>;

/**
 * `status = 'failed'` written as a literal, not a bound value: only then can SQLite use the partial index
 * on failed deliveries (deliveries_failed) whatever the statement's parameters, and PostgreSQL in a
 * generic plan.
 */
const FAILED = sql.lit<DeliveryRow['status']>('failed');

/**
 * A redelivery queuing this many refreshes the planner's statistics of deliveries at once. PostgreSQL
 * otherwise plans the workers' claim on counts from before (a few pending rows where a million now
 * wait) until autovacuum's next analyze, up to a minute later, and meanwhile each claim sorted the
 * whole backlog: about 1 s a claim with 1,000,000 due, against 1.4 ms with the statistics current
 * (`npm run bench -- claim-growth`).
 */
export const ANALYZE_AFTER_QUEUED = 50_000;

/**
 * Deliveries queued again by a redelivery and not attempted since (see queueAgain), in the terms of
 * deliveries_requeued's condition, literals included, so that either planner uses that index.
 */
const REQUEUED = sql<boolean>`status = 'pending' AND attempt_count = 0 AND attempt_seq > 0`;

/**
 * A delivery queued again by a redelivery and not attempted since: its attempts start over (count 0)
 * after some were made (seq above 0). Its `retrying` attempt is the seq it holds, at its updated_at.
 */
export function requeued(delivery: Pick<DeliveryRow, 'attempt_count' | 'attempt_seq'>): boolean {
  return delivery.attempt_count === 0 && delivery.attempt_seq > 0;
}

/**
 * The `retrying` attempt of a delivery queued again and not yet attempted: it takes the seq the
 * redelivery reserved and the time it was queued; it is written with the delivery's next attempt.
 */
export function requeuedAttempt(delivery: DeliveryRow): AttemptRow | undefined {
  if (!requeued(delivery) || delivery.status !== 'pending') return undefined;
  return {
    stream_id: delivery.stream_id,
    event_id: delivery.event_id,
    seq: delivery.attempt_seq,
    status: 'retrying',
    timestamp: delivery.updated_at,
    error_message: null,
    duration: null,
  };
}

/** Which of a stream's failed deliveries a listing or a redelivery takes. */
export interface FailedDeliveries {
  streamId: string;
  eventId?: string;
  eventTypes?: readonly string[];
  /** Events at or after this time (ISO). */
  timeFrom?: string;
  /** Events before this time (ISO). */
  timeTo?: string;
}

/** The stream's failed deliveries matching `which`, as one condition. */
function failedMatching(which: FailedDeliveries) {
  return (eb: ExpressionBuilder<Schema, 'deliveries'>) => {
    const conditions = [eb('stream_id', '=', which.streamId), eb('status', '=', FAILED)];
    if (which.eventId !== undefined) conditions.push(eb('event_id', '=', which.eventId));
    if (which.eventTypes !== undefined) conditions.push(eb('event_type', 'in', which.eventTypes));
    if (which.timeFrom !== undefined) conditions.push(eb('event_time', '>=', which.timeFrom));
    if (which.timeTo !== undefined) conditions.push(eb('event_time', '<', which.timeTo));
    return eb.and(conditions);
  };
}

/** A range of event ids: after `after` (from the first when undefined) up to and with `through`. */
export interface EventRange {
  after?: string | undefined;
  through: string;
}

/** Which deliveries' attempts to follow: a tenant's, a stream's, or all. */
export interface AttemptScope {
  tenant?: string | undefined;
  stream?: string | undefined;
}

/** One recorded attempt, as `tenantry events tail` prints it. */
export interface AttemptLine {
  timestamp: string;
  stream_id: string;
  event_id: string;
  seq: number;
  event_type: string;
  status: string;
  duration: number | null;
  error_message: string | null;
}

/** An attempt's place in a stream's attempts: its time, then its delivery and number (unique). */
export interface AttemptKey {
  timestamp: string;
  event_id: string;
  seq: number;
}

/** One attempt of a stream, as GET …/event-streams/{id}/attempts shows it. */
export type StreamAttemptRow = AttemptKey & Pick<AttemptLine, 'event_type' | 'status' | 'duration' | 'error_message'>;

/** A delivery queued for its first attempt now. */
export function pendingDelivery(streamId: string, eventId: string, type: string, at: string): DeliveryRow {
  return {
    stream_id: streamId,
    event_id: eventId,
    event_type: type,
    event_time: at,
    status: 'pending',
    attempt_count: 0,
    attempt_seq: 0,
    next_attempt_at: at,
    claimed_until: null,
    updated_at: at,
  };
}

/**
 * Every query on `events`, `deliveries`, `delivery_attempts` and `delivery_counts` but the delivery
 * worker's (see claim.ts and outcomes.ts): the outbox's writes, the deliveries log, redelivery, the
 * attempts' tail and the statistics.
 */
export class DeliveryStore {
  constructor(private readonly database: Database) {}

  /** Events and their deliveries, in multi-row inserts, inside the caller's transaction. */
  async insert(trx: Tx, events: readonly EventRow[], deliveries: readonly DeliveryRow[]): Promise<void> {
    await insertInSlices(trx, 'events', events);
    await insertInSlices(trx, 'deliveries', deliveries);
  }

  /**
   * Deliveries due at `at` and the oldest one's due time, for the metrics' backlog gauges. The range
   * scan on deliveries_due (status, next_attempt_at) reads only the due rows' index entries.
   */
  async dueBacklog(at: string): Promise<{ due: number; oldestDueAt: string | undefined }> {
    const row = await this.database.db
      .selectFrom('deliveries')
      .select((eb) => [eb.fn.countAll<number>().as('due'), eb.fn.min('next_attempt_at').as('oldest')])
      .where('status', '=', 'pending')
      .where('next_attempt_at', '<=', at)
      // A deleted stream's deliveries wait for their removal, never to be sent: no backlog.
      .where('stream_id', 'not in', (eb) =>
        eb.selectFrom('event_streams').select('id').where('status', '=', 'deleting'),
      )
      .executeTakeFirstOrThrow();
    return { due: Number(row.due), oldestDueAt: row.oldest ?? undefined };
  }

  /** One event and its one delivery (a test event). */
  async insertOne(trx: Tx, event: EventRow, delivery: DeliveryRow): Promise<void> {
    await trx.insertInto('events').values(event).execute();
    await trx.insertInto('deliveries').values(delivery).execute();
  }

  /** A page of the stream's failed deliveries matching `which`, in event id order after `afterEventId`. */
  failedPage(which: FailedDeliveries, afterEventId: string | undefined, limit: number): Promise<DeliveryRow[]> {
    return this.database.db
      .selectFrom('deliveries')
      .selectAll()
      .where(failedMatching(which))
      .$if(afterEventId !== undefined, (q) => q.where('event_id', '>', afterEventId!))
      .orderBy('event_id')
      .limit(limit)
      .execute();
  }

  /** How many of the stream's failed deliveries match `which`: what a redelivery of the same filter queues. */
  async countFailed(which: FailedDeliveries): Promise<number> {
    const row = await this.database.db
      .selectFrom('deliveries')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where(failedMatching(which))
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /**
   * The stream's attempts of the window's buckets, from its per-minute counts (migration 021) on their
   * primary key: at most a row a minute of the window, however many attempts the stream makes.
   */
  async countsPerBucket(streamId: string, window: StatsWindow): Promise<BucketCount[]> {
    // A literal: the same expression selected and grouped by, which PostgreSQL would not match as two parameters.
    const bucket = sql<string>`substr(minute, 1, ${sql.lit(window.bucketKeyLength)})`;
    const rows = await this.database.db
      .selectFrom('delivery_counts')
      .select((eb) => [
        bucket.as('bucket'),
        eb.fn.sum<number>('delivered').as('delivered'),
        eb.fn.sum<number>('failed').as('failed'),
      ])
      .where('stream_id', '=', streamId)
      .where('minute', '>=', window.firstMinute)
      .where('minute', '<', window.endMinute)
      .groupBy(bucket)
      .execute();
    return rows.map((r) => ({ bucket: r.bucket, delivered: Number(r.delivered), failed: Number(r.failed) }));
  }

  /**
   * The stream's deliveries waiting for an attempt, counted up to `cap` (so a huge backlog costs a bounded
   * read), and the oldest one's due time. Pending rows are found through deliveries_due (status first).
   */
  async pending(streamId: string, cap: number): Promise<{ count: number; oldestDueAt: string | undefined }> {
    const counted = await this.database.db
      .selectFrom((eb) =>
        eb
          .selectFrom('deliveries')
          .select('next_attempt_at')
          .where('status', '=', 'pending')
          .where('stream_id', '=', streamId)
          .limit(cap)
          .as('p'),
      )
      .select((eb) => [eb.fn.countAll<number>().as('count'), eb.fn.min('p.next_attempt_at').as('oldest')])
      .executeTakeFirstOrThrow();
    return { count: Number(counted.count), oldestDueAt: counted.oldest ?? undefined };
  }

  find(streamId: string, eventId: string): Promise<DeliveryRow | undefined> {
    return this.database.db
      .selectFrom('deliveries')
      .selectAll()
      .where('stream_id', '=', streamId)
      .where('event_id', '=', eventId)
      .executeTakeFirst();
  }

  /** The delivery's status, its row locked until `trx` ends (PostgreSQL); undefined when there is none. */
  async lockedStatus(trx: Tx, streamId: string, eventId: string): Promise<DeliveryRow['status'] | undefined> {
    const row = await trx
      .selectFrom('deliveries')
      .select('status')
      .where('stream_id', '=', streamId)
      .where('event_id', '=', eventId)
      .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
      .executeTakeFirst();
    return row?.status;
  }

  events(ids: readonly string[]): Promise<EventRow[]> {
    return this.database.db.selectFrom('events').selectAll().where('id', 'in', ids).execute();
  }

  /**
   * The size of each given event's data in bytes. `octet_length` (SQLite 3.43+, PostgreSQL) reads the
   * stored size only: neither database loads, decompresses or counts the characters of the data itself.
   */
  async eventSizes(ids: readonly string[]): Promise<Map<string, number>> {
    const rows = await this.database.db
      .selectFrom('events')
      .select((eb) => ['id', eb.fn<number>('octet_length', [eb.ref('data')]).as('size')])
      .where('id', 'in', ids)
      .execute();
    return new Map(rows.map((r) => [r.id, Number(r.size)]));
  }

  /** The attempts a delivery shows (failed ones and redeliveries), in order, of the stream's given events. */
  shownAttempts(streamId: string, eventIds: readonly string[]): Promise<AttemptRow[]> {
    return this.database.db
      .selectFrom('delivery_attempts')
      .selectAll()
      .where('stream_id', '=', streamId)
      .where('event_id', 'in', eventIds)
      .where('status', 'in', ['failed', 'retrying'])
      .orderBy('seq')
      .execute();
  }

  /**
   * Queues the failed deliveries matching `which` again (within `range` when given): one UPDATE, whatever
   * their number; no delivery is read into memory. Each one's `retrying` attempt is not written here: it
   * takes the next seq and the delivery's updated_at, is read from the delivery while it waits
   * (requeuedAttempt, streamAttempts), and is written with its next attempt (outcomes.ts). Writing
   * 100,000 attempt rows, their three indexes and (PostgreSQL) their foreign-key checks took more than
   * the UPDATE itself.
   */
  async queueAgain(trx: Tx, which: FailedDeliveries, at: string, range?: EventRange): Promise<number> {
    const updated = await trx
      .updateTable('deliveries')
      .set((eb) => ({
        status: 'pending',
        attempt_count: 0,
        attempt_seq: eb('attempt_seq', '+', 1),
        next_attempt_at: at,
        claimed_until: null,
        updated_at: at,
      }))
      .where(failedMatching(which))
      .$if(range?.after !== undefined, (q) => q.where('event_id', '>', range!.after!))
      .$if(range !== undefined, (q) => q.where('event_id', '<=', range!.through))
      .executeTakeFirst();
    return Number(updated.numUpdatedRows);
  }

  /** The stream's last failed delivery in event id order (a seek on deliveries_failed): where a redelivery's walk ends. */
  async lastFailed(trx: Tx, streamId: string): Promise<string | undefined> {
    const row = await trx
      .selectFrom('deliveries')
      .select('event_id')
      .where('stream_id', '=', streamId)
      .where('status', '=', FAILED)
      .orderBy('event_id', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row?.event_id;
  }

  /**
   * One step of a redelivery's walk of the stream's failed deliveries in event id order: the next `rows`
   * of them after `range.after`, up to `range.through`, of which those matching `which` are queued again
   * (queueAgain). The step counts failed deliveries whether they match or not, so its work is bounded
   * however few the filter takes: two range reads of deliveries_failed. `last` is where the next step
   * starts; undefined once the walk reached `range.through`.
   */
  async queueAgainStep(
    trx: Tx,
    which: FailedDeliveries,
    range: EventRange,
    rows: number,
    at: string,
  ): Promise<{ queued: number; last?: string }> {
    const bound = await trx
      .selectFrom('deliveries')
      .select('event_id')
      .where('stream_id', '=', which.streamId)
      .where('status', '=', FAILED)
      .$if(range.after !== undefined, (q) => q.where('event_id', '>', range.after!))
      .where('event_id', '<=', range.through)
      .orderBy('event_id')
      .offset(rows - 1)
      .limit(1)
      .executeTakeFirst();
    const last = bound !== undefined && bound.event_id < range.through ? bound.event_id : undefined;
    const queued = await this.queueAgain(trx, which, at, { ...range, through: last ?? range.through });
    return { queued, ...(last === undefined ? {} : { last }) };
  }

  /**
   * Event ids that cut the failed deliveries `which` takes in `range` into `parts` runs of as many each,
   * in order, each cut the last of its run: a redelivery's lanes (migration 025), balanced by the rows
   * they queue (the writes), not those they walk past. Fewer parts where the range holds fewer than
   * `minRows` a part (a lane of less than a chunk gains nothing); none for one. `rows`: those counted.
   * Reads on deliveries_failed: a count of the range, then a seek past each run from the last cut;
   * without a filter PostgreSQL reads its entries alone once vacuumed (the visibility map), with one
   * the rows too.
   */
  async rowCuts(
    trx: Tx,
    which: FailedDeliveries,
    range: EventRange,
    parts: number,
    minRows: number,
  ): Promise<{ cuts: string[]; rows: number }> {
    const taken = (after: string | undefined) =>
      trx
        .selectFrom('deliveries')
        .where(failedMatching(which))
        .$if(after !== undefined, (q) => q.where('event_id', '>', after!))
        .where('event_id', '<=', range.through);
    const { count } = await taken(range.after)
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirstOrThrow();
    const rows = Number(count);
    const runs = Math.min(parts, Math.floor(rows / Math.max(1, minRows)));
    const cuts: string[] = [];
    let after = range.after;
    let at = 0;
    for (let run = 1; run < runs; run++) {
      const end = Math.floor((rows * run) / runs);
      const cut = await taken(after)
        .select('event_id')
        .orderBy('event_id')
        .offset(end - at - 1)
        .limit(1)
        .executeTakeFirst();
      // Fewer than counted (others changed meanwhile): the runs so far stand.
      if (cut === undefined || cut.event_id >= range.through) break;
      cuts.push((after = cut.event_id));
      at = end;
    }
    return { cuts, rows };
  }

  /** Brings PostgreSQL's planner statistics of deliveries up to date (sampled: a fraction of a second). */
  async refreshStatistics(): Promise<void> {
    if (this.database.dialect === 'postgres') await sql`ANALYZE deliveries`.execute(this.database.db);
  }

  /**
   * The stream's attempts in (timestamp, event_id, seq) order: the latest `limit`, newest first, or with
   * `after` the first `limit` after it, oldest first. Two reads, each a seek that stops after `limit`
   * entries however many attempts the stream or the others made, merged by the database (its collation
   * orders both): the recorded attempts on delivery_attempts_stream_time (migration 017), each with its
   * delivery's event type found by primary key; and the `retrying` attempts of the deliveries queued
   * again and not yet attempted, on deliveries_requeued (migration 019). The cursor is compared as a row
   * value, which both seek on: SQLite on the three key columns after stream_id's equality, PostgreSQL
   * only on all four (with three it filters the rows of delivery_attempts_timestamp instead, every
   * stream's since then).
   */
  streamAttempts(streamId: string, after: AttemptKey | undefined, limit: number): Promise<StreamAttemptRow[]> {
    const direction = after === undefined ? 'desc' : 'asc';
    const postgres = this.database.dialect === 'postgres';
    const db = this.database.db;
    const from = (stream: string, timestamp: string, event: string, seq: string) =>
      sql.join(
        postgres
          ? [sql.ref(stream), sql.ref(timestamp), sql.ref(event), sql.ref(seq)]
          : [sql.ref(timestamp), sql.ref(event), sql.ref(seq)],
      );
    const past =
      after === undefined
        ? undefined
        : sql.join(
            postgres
              ? [streamId, after.timestamp, after.event_id, after.seq]
              : [after.timestamp, after.event_id, after.seq],
          );
    const recorded = db
      .selectFrom('delivery_attempts as a')
      .innerJoin('deliveries as d', (join) =>
        join.onRef('d.stream_id', '=', 'a.stream_id').onRef('d.event_id', '=', 'a.event_id'),
      )
      .select(['a.timestamp', 'a.event_id', 'a.seq', 'd.event_type', 'a.status', 'a.duration', 'a.error_message'])
      .where('a.stream_id', '=', streamId)
      .$if(past !== undefined, (q) =>
        q.where(sql<boolean>`(${from('a.stream_id', 'a.timestamp', 'a.event_id', 'a.seq')}) > (${past!})`),
      )
      .orderBy('a.stream_id', direction)
      .orderBy('a.timestamp', direction)
      .orderBy('a.event_id', direction)
      .orderBy('a.seq', direction)
      .limit(limit);
    const waiting = db
      .selectFrom('deliveries')
      .select([
        'updated_at as timestamp',
        'event_id',
        'attempt_seq as seq',
        'event_type',
        sql.lit<AttemptRow['status']>('retrying').as('status'),
        sql<number | null>`CAST(NULL AS double precision)`.as('duration'),
        sql<string | null>`CAST(NULL AS text)`.as('error_message'),
      ])
      .where('stream_id', '=', streamId)
      .where(REQUEUED)
      // Written already: by a node of an earlier version, which wrote it when queueing (one primary-key probe).
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('delivery_attempts as x')
              .select(sql.lit(1).as('one'))
              .whereRef('x.stream_id', '=', 'deliveries.stream_id')
              .whereRef('x.event_id', '=', 'deliveries.event_id')
              .whereRef('x.seq', '=', 'deliveries.attempt_seq'),
          ),
        ),
      )
      .$if(past !== undefined, (q) =>
        q.where(sql<boolean>`(${from('stream_id', 'updated_at', 'event_id', 'attempt_seq')}) > (${past!})`),
      )
      .orderBy('stream_id', direction)
      .orderBy('updated_at', direction)
      .orderBy('event_id', direction)
      .orderBy('attempt_seq', direction)
      .limit(limit);
    return db
      .selectFrom(
        db
          .selectFrom(recorded.as('r'))
          .selectAll()
          .unionAll(db.selectFrom(waiting.as('w')).selectAll())
          .as('u'),
      )
      .selectAll()
      .orderBy('timestamp', direction)
      .orderBy('event_id', direction)
      .orderBy('seq', direction)
      .limit(limit)
      .execute();
  }

  /**
   * Attempts recorded at or after `since`, oldest first, of the tenant's or the stream's deliveries when
   * given. `retrying` rows mark a redelivery being queued, not an attempt. A deleted stream's are not shown
   * (a send in flight when it was deleted may still record its attempt).
   */
  attemptsSince(since: string, filter: AttemptScope): Promise<AttemptLine[]> {
    return this.database.db
      .selectFrom('delivery_attempts as a')
      .innerJoin('deliveries as d', (join) =>
        join.onRef('d.stream_id', '=', 'a.stream_id').onRef('d.event_id', '=', 'a.event_id'),
      )
      .innerJoin('event_streams as s', 's.id', 'a.stream_id')
      .select([
        'a.timestamp',
        'a.stream_id',
        'a.event_id',
        'a.seq',
        'd.event_type',
        'a.status',
        'a.duration',
        'a.error_message',
      ])
      .where('a.timestamp', '>=', since)
      .where('a.status', '!=', 'retrying')
      .where('s.status', '!=', 'deleting')
      .$if(filter.tenant !== undefined, (q) => q.where('s.tenant_id', '=', filter.tenant!))
      .$if(filter.stream !== undefined, (q) => q.where('a.stream_id', '=', filter.stream!))
      .orderBy('a.timestamp')
      .orderBy('a.seq')
      .execute();
  }
}
