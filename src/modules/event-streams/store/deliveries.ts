import { sql, type ExpressionBuilder, type Selectable } from 'kysely';
import type { Database, Tx } from '../../../db/database.ts';
import { insertInSlices } from '../../../db/database.ts';
import type { DeliveriesTable, DeliveryAttemptsTable, EventsTable, Schema } from '../../../db/schema.ts';

export type EventRow = Selectable<EventsTable>;
export type DeliveryRow = Selectable<DeliveriesTable>;
export type AttemptRow = Selectable<DeliveryAttemptsTable>;

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
      .where('status', '=', 'failed');
    if (which.eventTypes !== undefined) q = q.where('event_type', 'in', which.eventTypes);
    if (which.timeFrom !== undefined) q = q.where('event_time', '>=', which.timeFrom);
    if (which.timeTo !== undefined) q = q.where('event_time', '<', which.timeTo);
    if (afterEventId !== undefined) q = q.where('event_id', '>', afterEventId);
    return q.orderBy('event_id').limit(limit).execute();
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
  async queueAgain(trx: Tx, which: FailedDeliveries, at: string): Promise<void> {
    const matching = (eb: ExpressionBuilder<Schema, 'deliveries'>) => {
      const conditions = [eb('stream_id', '=', which.streamId)];
      if (which.eventId !== undefined) conditions.push(eb('event_id', '=', which.eventId));
      conditions.push(eb('status', '=', 'failed'));
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
          .where(matching),
      )
      .execute();
    await trx
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
