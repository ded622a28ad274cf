import { randomUUID } from 'node:crypto';
import type { Selectable } from 'kysely';
import { claimDueRows, type LeasedTable } from '../../../db/claim-due.ts';
import type { Database, Tx } from '../../../db/database.ts';
import type { EventStreamRedeliveriesTable } from '../../../db/schema.ts';
import type { FailedDeliveries } from './deliveries.ts';

export type RedeliveryRow = Selectable<EventStreamRedeliveriesTable>;

/**
 * Redeliveries one stream may have under way at once. Each costs its request one chunk and leaves a walk
 * of the stream's failed deliveries to the background, where one node runs a lane or two at a time: a
 * request whose filter takes none of them (an event type the stream has not failed) leaves them all
 * failed, so unbounded, each request left more background work, and everyone's redeliveries waited for it.
 * A redelivery counts once however many lanes it was split into.
 */
export const REDELIVERIES_UNDER_WAY_MAX = 10;

/** A redelivery being queued, claimed by this node under `lease`. */
export type ClaimedRedelivery = Omit<RedeliveryRow, 'status' | 'next_attempt_at' | 'claimed_until'> & {
  lease: string;
};

/** The stream's failed deliveries a recorded redelivery takes: its request's filter, as record wrote it. */
export function filterOf(
  redelivery: Pick<ClaimedRedelivery, 'stream_id' | 'event_types' | 'time_from' | 'time_to'>,
): FailedDeliveries {
  return {
    streamId: redelivery.stream_id,
    ...(redelivery.event_types === null ? {} : { eventTypes: JSON.parse(redelivery.event_types) as string[] }),
    ...(redelivery.time_from === null ? {} : { timeFrom: redelivery.time_from }),
    ...(redelivery.time_to === null ? {} : { timeTo: redelivery.time_to }),
  };
}

/**
 * How far a redelivery's walk has got: past `after`, with `queued` deliveries queued again, up to
 * `until`; `lanes` it is yet to be cut into (1: none).
 */
export interface RedeliveryCursor {
  after: string;
  until: string;
  queued: number;
  lanes: number;
}

const DUE_REDELIVERIES: LeasedTable<ClaimedRedelivery> = {
  table: 'event_stream_redeliveries',
  key: 'id',
  returning: [
    'id',
    'redelivery_id',
    'stream_id',
    'tenant_id',
    'event_types',
    'time_from',
    'time_to',
    'after_event_id',
    'until_event_id',
    'lanes',
    'queued',
    'created_at',
  ],
};

/**
 * The redeliveries being queued in the background (migration 023): recorded by the request, claimed
 * under a lease, moved on chunk by chunk, removed when done. Every write after the claim is fenced by
 * the lease: a run whose lease another node took over changes nothing.
 */
export class RedeliveryStore {
  constructor(private readonly database: Database) {}

  /**
   * How many redeliveries of the stream are under way, up to `limit` (a read of
   * event_stream_redeliveries_stream). The caller holds the stream's lock: redeliveries of one stream are
   * recorded one after another.
   */
  async underWay(trx: Tx, streamId: string, limit: number): Promise<number> {
    const rows = await trx
      .selectFrom('event_stream_redeliveries')
      .select((eb) => eb.fn.coalesce('redelivery_id', 'id').as('redelivery'))
      .distinct()
      .where('stream_id', '=', streamId)
      .limit(limit)
      .execute();
    return rows.length;
  }

  /**
   * Records a redelivery of the failed deliveries `which` takes, whose first chunk the caller's
   * transaction queued (`queued` of them, up to the event `after`); its walk ends at `through`. One
   * row, due at once, to be cut into `lanes` (see split) by the node that claims it.
   */
  async record(
    trx: Tx,
    redelivery: {
      tenantId: string;
      which: FailedDeliveries;
      after: string;
      through: string;
      lanes: number;
      queued: number;
      at: string;
    },
  ): Promise<void> {
    const { which, at } = redelivery;
    const id = randomUUID();
    await trx
      .insertInto('event_stream_redeliveries')
      .values({
        id,
        redelivery_id: id,
        stream_id: which.streamId,
        tenant_id: redelivery.tenantId,
        event_types: which.eventTypes === undefined ? null : JSON.stringify(which.eventTypes),
        time_from: which.timeFrom ?? null,
        time_to: which.timeTo ?? null,
        after_event_id: redelivery.after,
        until_event_id: redelivery.through,
        lanes: redelivery.lanes > 1 ? redelivery.lanes : null,
        queued: redelivery.queued,
        status: 'pending',
        next_attempt_at: at,
        claimed_until: null,
        created_at: at,
      })
      .execute();
  }

  /**
   * Cuts `redelivery`, claimed and not walked yet, into lanes at `cuts` (event ids of its range, in
   * order): a row of the same redelivery takes each range after the first, due since the request was
   * made (so at once on every node's clock, and in the request's turn), and the claimed row keeps the
   * range up to the first cut and its lease (renewed to `newLease`). With no cuts it is walked as one
   * lane. The rows are written before the claimed one is locked, as every writer of these rows after
   * the stream (a deletion locks the stream, then these rows). False when the lease is another run's:
   * the caller rolls the inserts back.
   */
  async split(trx: Tx, redelivery: ClaimedRedelivery, newLease: string, cuts: readonly string[]): Promise<boolean> {
    const ends = [...cuts.slice(1), redelivery.until_event_id];
    if (cuts.length > 0)
      await trx
        .insertInto('event_stream_redeliveries')
        .values(
          cuts.map((after, i) => ({
            id: randomUUID(),
            redelivery_id: redelivery.redelivery_id ?? redelivery.id,
            stream_id: redelivery.stream_id,
            tenant_id: redelivery.tenant_id,
            event_types: redelivery.event_types,
            time_from: redelivery.time_from,
            time_to: redelivery.time_to,
            after_event_id: after,
            until_event_id: ends[i]!,
            lanes: null,
            queued: 0,
            status: 'pending' as const,
            next_attempt_at: redelivery.created_at,
            claimed_until: null,
            created_at: redelivery.created_at,
          })),
        )
        .execute();
    const kept = await trx
      .updateTable('event_stream_redeliveries')
      .set({ until_event_id: cuts[0] ?? redelivery.until_event_id, lanes: null, claimed_until: newLease })
      .where('id', '=', redelivery.id)
      .where('claimed_until', '=', redelivery.lease)
      .executeTakeFirst();
    return kept.numUpdatedRows > 0n;
  }

  /** Claims redeliveries due now, under a lease: new ones, those retried after a failure, those whose node stopped. */
  claimDue(leaseMs: number, limit: number): Promise<ClaimedRedelivery[]> {
    return claimDueRows(this.database, DUE_REDELIVERIES, { leaseMs }, limit);
  }

  /**
   * Whether `redelivery` is still held under its lease, and whether its stream is being deleted meanwhile
   * (nothing is left to queue then). A plain read: the row is locked last, by advance or finish, after
   * the deliveries the chunk queues, as the recording of an attempt locks its delivery first.
   */
  async held(trx: Tx, redelivery: ClaimedRedelivery): Promise<{ streamDeleting: boolean } | undefined> {
    const row = await trx
      .selectFrom('event_stream_redeliveries as r')
      .innerJoin('event_streams as s', 's.id', 'r.stream_id')
      .select('s.status')
      .where('r.id', '=', redelivery.id)
      .where('r.claimed_until', '=', redelivery.lease)
      .executeTakeFirst();
    return row && { streamDeleting: row.status === 'deleting' };
  }

  /** Records how far the walk got and renews the lease; false when the lease is another run's. */
  async advance(trx: Tx, redelivery: ClaimedRedelivery, newLease: string, cursor: RedeliveryCursor): Promise<boolean> {
    const moved = await trx
      .updateTable('event_stream_redeliveries')
      .set({ after_event_id: cursor.after, queued: cursor.queued, claimed_until: newLease })
      .where('id', '=', redelivery.id)
      .where('claimed_until', '=', redelivery.lease)
      .executeTakeFirst();
    return moved.numUpdatedRows > 0n;
  }

  /** Removes a redelivery whose walk is over; false when the lease is another run's. */
  async finish(trx: Tx, redelivery: ClaimedRedelivery): Promise<boolean> {
    const gone = await trx
      .deleteFrom('event_stream_redeliveries')
      .where('id', '=', redelivery.id)
      .where('claimed_until', '=', redelivery.lease)
      .executeTakeFirst();
    return gone.numDeletedRows > 0n;
  }

  /** Lets the redelivery go until `at` (after a failure), or at once (a node stopping) when `at` is now. */
  async release(redelivery: ClaimedRedelivery, lease: string, at: string): Promise<void> {
    await this.database.db
      .updateTable('event_stream_redeliveries')
      .set({ next_attempt_at: at, claimed_until: null })
      .where('id', '=', redelivery.id)
      .where('claimed_until', '=', lease)
      .execute();
  }
}
