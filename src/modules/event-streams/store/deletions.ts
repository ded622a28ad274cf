import { sql, type ExpressionBuilder } from 'kysely';
import { LeaseLost, unlessLeaseLost, type ChunkOutcome } from '../../../background/chunked-jobs.ts';
import { claimDueRows, type LeasedTable } from '../../../db/claim-due.ts';
import type { Database, Tx } from '../../../db/database.ts';
import { transaction } from '../../../db/database.ts';
import type { EventStreamsTable, Schema } from '../../../db/schema.ts';

/** A stream being deleted, claimed by this node under `lease`. */
export interface ClaimedDeletion extends Pick<EventStreamsTable, 'id' | 'tenant_id'> {
  lease: string;
}

/**
 * Where a removal goes on from: past this attempt, then past this delivery, in primary-key order. Each
 * chunk starts where the last ended rather than at the stream's first key: on PostgreSQL the index
 * entries of rows already deleted stay until a vacuum, and every chunk would step over them again.
 * Held by the run only; a run that starts over (another node, a restart) finds the removed rows gone.
 */
export interface RemovalCursor {
  /** The last minute of delivery_counts removed. */
  count?: string;
  /** Set once every count past the cursor is removed. */
  countsDone: boolean;
  attempt?: { event_id: string; seq: number };
  /** Set once every attempt past the cursor is removed. */
  attemptsDone: boolean;
  delivery?: string;
}

/** What one chunk did: rows removed, and whether the stream row itself went (the deletion is over). */
export type ChunkResult = ChunkOutcome<RemovalCursor>;

/** The claim reads `event_streams` as a table carrying other work, as custom domains carry their re-checks. */
const DUE_DELETIONS: LeasedTable<ClaimedDeletion> = {
  table: 'event_streams',
  key: 'id',
  returning: ['id', 'tenant_id'],
  pendingStatus: 'deleting',
  dueColumn: 'deletion_next_at',
  leaseColumn: 'deletion_claimed_until',
};

/**
 * The removal of deleted streams' rows: a stream's per-minute counts, its delivery attempts, then its
 * deliveries (every row that hangs off it: they are the only tables whose foreign keys lead to
 * event_streams; a count row a minute of the stream's history, up to 525,600 a year), then the stream row.
 * The removal's queries on a stream being deleted; store/streams.ts marks it and reads every other stream
 * (the delivery worker's claim and recording and the backlog gauge also meet such streams, and pass
 * them by: they take enabled streams, or leave a deleting one's status as it is).
 */
export class StreamDeletionStore {
  constructor(private readonly database: Database) {}

  /** Claims deletions due now, under a lease: new ones, those retried after a failure, those whose node stopped. */
  claimDue(leaseMs: number, limit: number): Promise<ClaimedDeletion[]> {
    return claimDueRows(this.database, DUE_DELETIONS, { leaseMs }, limit);
  }

  /**
   * Removes at most `rows` rows of the stream, in one transaction fenced by the lease (renewed to
   * `newLease`); when none is left, the stream row goes too. Undefined when the lease is no longer this
   * run's (another node took the deletion over, or a restore brought the stream back).
   */
  removeChunk(
    deletion: ClaimedDeletion,
    newLease: string,
    from: RemovalCursor,
    rows: number,
  ): Promise<ChunkResult | undefined> {
    return unlessLeaseLost(
      transaction(this.database, async (trx) => {
        // The lease is checked with a plain read and renewed last: the stream row is locked after the rows
        // removed, as the recording of an attempt locks its delivery before its stream (PostgreSQL). Locked
        // first, a chunk removing a delivery whose failed send was being recorded deadlocked with it.
        const held = await trx
          .selectFrom('event_streams')
          .select('id')
          .where('id', '=', deletion.id)
          .where('status', '=', 'deleting')
          .where('deletion_claimed_until', '=', deletion.lease)
          .executeTakeFirst();
        if (!held) return undefined;
        const cursor = { ...from };
        let removed = 0;
        // Each stage takes what the chunk has left: a stage that ends inside the chunk leaves at least one row.
        if (!cursor.countsDone) {
          const counts = await this.removeCounts(trx, deletion.id, cursor.count, rows - removed);
          removed += counts.removed;
          if (counts.last !== undefined)
            return this.renewed(trx, deletion, newLease, removed, { ...cursor, count: counts.last });
          cursor.countsDone = true;
        }
        if (!cursor.attemptsDone) {
          const attempts = await this.removeAttempts(trx, deletion.id, cursor.attempt, rows - removed);
          removed += attempts.removed;
          if (attempts.last !== undefined)
            return this.renewed(trx, deletion, newLease, removed, { ...cursor, attempt: attempts.last });
          cursor.attemptsDone = true;
        }
        const deliveries = await this.removeDeliveries(trx, deletion.id, cursor.delivery, rows - removed);
        removed += deliveries.removed;
        if (deliveries.last !== undefined)
          return this.renewed(trx, deletion, newLease, removed, { ...cursor, delivery: deliveries.last });
        // A delivery written behind the cursor meanwhile (an attempt recorded for a send that was in flight)
        // goes through the foreign keys' cascade: a few rows at most.
        const gone = await trx
          .deleteFrom('event_streams')
          .where('id', '=', deletion.id)
          .where('deletion_claimed_until', '=', deletion.lease)
          .executeTakeFirst();
        if (gone.numDeletedRows === 0n) throw new LeaseLost();
        return { rows: removed, finished: true, cursor };
      }),
    );
  }

  /** The chunk's end: the lease renewed, or the chunk rolled back when another run holds it now. */
  private async renewed(
    trx: Tx,
    deletion: ClaimedDeletion,
    newLease: string,
    removed: number,
    cursor: RemovalCursor,
  ): Promise<ChunkResult> {
    const renewed = await trx
      .updateTable('event_streams')
      .set({ deletion_claimed_until: newLease })
      .where('id', '=', deletion.id)
      .where('status', '=', 'deleting')
      .where('deletion_claimed_until', '=', deletion.lease)
      .executeTakeFirst();
    if (renewed.numUpdatedRows === 0n) throw new LeaseLost();
    return { rows: removed, finished: false, cursor };
  }

  /** Lets the deletion go until `at` (after a failure), or at once (a node stopping) when `at` is now. */
  async release(deletion: ClaimedDeletion, lease: string, at: string): Promise<void> {
    await this.database.db
      .updateTable('event_streams')
      .set({ deletion_next_at: at, deletion_claimed_until: null })
      .where('id', '=', deletion.id)
      .where('status', '=', 'deleting')
      .where('deletion_claimed_until', '=', lease)
      .execute();
  }

  /**
   * The stream's attempts after `after`, up to `limit`: the key of the limit-th is read, then everything
   * up to it deleted, two range reads of the primary key. `last` is undefined when none was left past it.
   */
  private async removeAttempts(
    trx: Tx,
    streamId: string,
    after: RemovalCursor['attempt'],
    limit: number,
  ): Promise<{ removed: number; last?: { event_id: string; seq: number } }> {
    const past =
      after &&
      ((eb: ExpressionBuilder<Schema, 'delivery_attempts'>) =>
        eb(eb.refTuple('event_id', 'seq'), '>', eb.tuple(after.event_id, after.seq)));
    const last = await trx
      .selectFrom('delivery_attempts')
      .select(['event_id', 'seq'])
      .where('stream_id', '=', streamId)
      .$if(past !== undefined, (q) => q.where(past!))
      .orderBy('event_id')
      .orderBy('seq')
      .offset(limit - 1)
      .limit(1)
      .executeTakeFirst();
    const gone = await trx
      .deleteFrom('delivery_attempts')
      .where('stream_id', '=', streamId)
      .$if(past !== undefined, (q) => q.where(past!))
      .$if(last !== undefined, (q) =>
        q.where(({ eb, refTuple, tuple }) => eb(refTuple('event_id', 'seq'), '<=', tuple(last!.event_id, last!.seq))),
      )
      .executeTakeFirst();
    return { removed: Number(gone.numDeletedRows), ...(last ? { last } : {}) };
  }

  /** The stream's per-minute counts after the minute `after`, up to `limit` (as removeAttempts). */
  private removeCounts(trx: Tx, streamId: string, after: string | undefined, limit: number) {
    return this.removeByKey(trx, 'delivery_counts', 'minute', streamId, after, limit);
  }

  /** The stream's deliveries after the event `after`, up to `limit` (as removeAttempts). */
  private removeDeliveries(trx: Tx, streamId: string, after: string | undefined, limit: number) {
    return this.removeByKey(trx, 'deliveries', 'event_id', streamId, after, limit);
  }

  /** A table whose rows of a stream are keyed by one column after the stream's: as removeAttempts. */
  private async removeByKey(
    trx: Tx,
    table: 'delivery_counts' | 'deliveries',
    key: 'minute' | 'event_id',
    streamId: string,
    after: string | undefined,
    limit: number,
  ): Promise<{ removed: number; last?: string }> {
    const column = sql.ref<string>(key);
    const last = await trx
      .selectFrom(table)
      .select(column.as('key'))
      .where('stream_id', '=', streamId)
      .$if(after !== undefined, (q) => q.where(column, '>', after!))
      .orderBy(column)
      .offset(limit - 1)
      .limit(1)
      .executeTakeFirst();
    const gone = await trx
      .deleteFrom(table)
      .where('stream_id', '=', streamId)
      .$if(after !== undefined, (q) => q.where(column, '>', after!))
      .$if(last !== undefined, (q) => q.where(column, '<=', last!.key))
      .executeTakeFirst();
    return { removed: Number(gone.numDeletedRows), ...(last ? { last: last.key } : {}) };
  }
}
