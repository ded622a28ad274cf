import { sql, type ExpressionBuilder, type Selectable } from 'kysely';
import type { Database, Tx } from '../../../db/database.ts';
import { insertInSlices } from '../../../db/database.ts';
import type { DeliveriesTable, DeliveryAttemptsTable, EventsTable, Schema } from '../../../db/schema.ts';

export type EventRow = Selectable<EventsTable>;
export type DeliveryRow = Selectable<DeliveriesTable>;
export type AttemptRow = Selectable<DeliveryAttemptsTable>;

/**
 * `status = 'failed'` written as a literal, not a bound value: only then can SQLite use the partial index
 * on failed deliveries (deliveries_failed) whatever the statement's parameters, and PostgreSQL in a
 * generic plan.
 */
const FAILED = sql.lit<DeliveryRow['status']>('failed');

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
 * Every query on `events`, `deliveries` and `delivery_attempts` but the delivery worker's (see claim.ts
 * and outcomes.ts): the outbox's writes, the deliveries log, redelivery and the attempts' tail.
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
    let q = this.database.db
      .selectFrom('deliveries')
      .selectAll()
      .where('stream_id', '=', which.streamId)
      .where('status', '=', FAILED);
    if (which.eventTypes !== undefined) q = q.where('event_type', 'in', which.eventTypes);
    if (which.timeFrom !== undefined) q = q.where('event_time', '>=', which.timeFrom);
    if (which.timeTo !== undefined) q = q.where('event_time', '<', which.timeTo);
    if (afterEventId !== undefined) q = q.where('event_id', '>', afterEventId);
    return q.orderBy('event_id').limit(limit).execute();
  }

  /** How many of the stream's failed deliveries match `which`: what a redelivery of the same filter queues. */
  async countFailed(which: FailedDeliveries): Promise<number> {
    let q = this.database.db
      .selectFrom('deliveries')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('stream_id', '=', which.streamId)
      .where('status', '=', FAILED);
    if (which.eventTypes !== undefined) q = q.where('event_type', 'in', which.eventTypes);
    if (which.timeFrom !== undefined) q = q.where('event_time', '>=', which.timeFrom);
    if (which.timeTo !== undefined) q = q.where('event_time', '<', which.timeTo);
    const row = await q.executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /**
   * The stream's attempts in [from, to) counted per minute and outcome, on delivery_attempts_stream_time:
   * the window is bounded by the caller, so the query reads at most that window's index entries. Minutes
   * are the timestamps' first 16 characters (ISO `YYYY-MM-DDTHH:MM`), the same in SQLite and PostgreSQL.
   */
  async attemptsPerMinute(
    streamId: string,
    from: string,
    to: string,
  ): Promise<Array<{ minute: string; status: string; count: number }>> {
    const rows = await this.database.db
      .selectFrom('delivery_attempts')
      .select((eb) => [
        sql<string>`substr(${eb.ref('timestamp')}, 1, 16)`.as('minute'),
        'status',
        eb.fn.countAll<number>().as('count'),
      ])
      .where('stream_id', '=', streamId)
      .where('timestamp', '>=', from)
      .where('timestamp', '<', to)
      .where('status', 'in', ['delivered', 'failed'])
      .groupBy([sql`substr(${sql.ref('timestamp')}, 1, 16)`, 'status'])
      .orderBy('minute')
      .execute();
    return rows.map((r) => ({ minute: r.minute, status: r.status, count: Number(r.count) }));
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
   * Queues the failed deliveries matching `which` again: one INSERT … SELECT of their `retrying` attempt
   * rows and one UPDATE, whatever their number; no delivery is read into memory.
   */
  async queueAgain(trx: Tx, which: FailedDeliveries, at: string): Promise<number> {
    const matching = (eb: ExpressionBuilder<Schema, 'deliveries'>) => {
      const conditions = [eb('stream_id', '=', which.streamId)];
      if (which.eventId !== undefined) conditions.push(eb('event_id', '=', which.eventId));
      conditions.push(eb('status', '=', FAILED));
      if (which.eventTypes !== undefined) conditions.push(eb('event_type', 'in', which.eventTypes));
      if (which.timeFrom !== undefined) conditions.push(eb('event_time', '>=', which.timeFrom));
      if (which.timeTo !== undefined) conditions.push(eb('event_time', '<', which.timeTo));
      return eb.and(conditions);
    };
    await trx
      .insertInto('delivery_attempts')
      .columns(['stream_id', 'event_id', 'seq', 'status', 'timestamp'])
      .expression(
        trx
          .selectFrom('deliveries')
          .select((eb) => [
            'stream_id',
            'event_id',
            eb('attempt_seq', '+', 1).as('seq'),
            sql<string>`${'retrying'}`.as('status'),
            sql<string>`${at}`.as('timestamp'),
          ])
          .where(matching)
          // In delivery_attempts' key order: each of its index pages is then written once, not once per row.
          .orderBy('event_id'),
      )
      .execute();
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
      .where(matching)
      .executeTakeFirst();
    return Number(updated.numUpdatedRows);
  }

  /** Brings PostgreSQL's planner statistics of deliveries up to date (sampled: a fraction of a second). */
  async refreshStatistics(): Promise<void> {
    if (this.database.dialect === 'postgres') await sql`ANALYZE deliveries`.execute(this.database.db);
  }

  /**
   * The stream's attempts in (timestamp, event_id, seq) order: the latest `limit`, newest first, or with
   * `after` the first `limit` after it, oldest first. delivery_attempts_stream_time holds that order
   * (migration 017): either read seeks in the index and stops after `limit` entries, however many
   * attempts the stream or the others made. The cursor is compared as a row value, which both seek on:
   * SQLite on (timestamp, event_id, seq) after stream_id's equality, PostgreSQL only on all four columns
   * (with three it filters the rows of delivery_attempts_timestamp instead, every stream's since then).
   * Each attempt's event type is its delivery's, found by primary key.
   */
  streamAttempts(streamId: string, after: AttemptKey | undefined, limit: number): Promise<StreamAttemptRow[]> {
    const direction = after === undefined ? 'desc' : 'asc';
    const postgres = this.database.dialect === 'postgres';
    return this.database.db
      .selectFrom('delivery_attempts as a')
      .innerJoin('deliveries as d', (join) =>
        join.onRef('d.stream_id', '=', 'a.stream_id').onRef('d.event_id', '=', 'a.event_id'),
      )
      .select(['a.timestamp', 'a.event_id', 'a.seq', 'd.event_type', 'a.status', 'a.duration', 'a.error_message'])
      .where('a.stream_id', '=', streamId)
      .$if(after !== undefined, (q) =>
        q.where((eb) =>
          postgres
            ? eb(
                eb.refTuple('a.stream_id', 'a.timestamp', 'a.event_id', 'a.seq'),
                '>',
                eb.tuple(streamId, after!.timestamp, after!.event_id, after!.seq),
              )
            : eb(
                eb.refTuple('a.timestamp', 'a.event_id', 'a.seq'),
                '>',
                eb.tuple(after!.timestamp, after!.event_id, after!.seq),
              ),
        ),
      )
      .orderBy('a.stream_id', direction)
      .orderBy('a.timestamp', direction)
      .orderBy('a.event_id', direction)
      .orderBy('a.seq', direction)
      .limit(limit)
      .execute();
  }

  /**
   * Attempts recorded at or after `since`, oldest first, of the tenant's or the stream's deliveries when
   * given. `retrying` rows mark a redelivery being queued, not an attempt.
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
      .$if(filter.tenant !== undefined, (q) => q.where('s.tenant_id', '=', filter.tenant!))
      .$if(filter.stream !== undefined, (q) => q.where('a.stream_id', '=', filter.stream!))
      .orderBy('a.timestamp')
      .orderBy('a.seq')
      .execute();
  }
}
