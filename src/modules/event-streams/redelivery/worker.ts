import { ChunkedJobWorker, LeaseLost, unlessLeaseLost, type ChunkOutcome } from '../../../background/chunked-jobs.ts';
import { now, transaction, type Database } from '../../../db/database.ts';
import type { Logger } from '../../../logger.ts';
import type { QueuedListener } from '../outbox.ts';
import { refreshStatisticsPast } from '../deliveries.ts';
import { DeliveryStore } from '../store/deliveries.ts';
import { filterOf, RedeliveryStore, type ClaimedRedelivery, type RedeliveryCursor } from '../store/redeliveries.ts';

export interface RedeliverySettings {
  /** Most failed deliveries one chunk (one transaction) walks: EVENT_STREAM_REDELIVERY_CHUNK_ROWS. */
  chunkRows: number;
  /** Lanes a redelivery's walk is split into, and that a node works on at once: EVENT_STREAM_REDELIVERY_LANES. */
  lanes: number;
}

/**
 * The fields of a redelivery's log lines. A lane's lines (each logs its own end) name their redelivery
 * and the lane; a row recorded before lanes is a redelivery of its own.
 */
function redeliveryLogFields(redelivery: ClaimedRedelivery): Record<string, unknown> {
  return {
    event_stream_id: redelivery.stream_id,
    tenant_id: redelivery.tenant_id,
    redelivery_id: redelivery.redelivery_id ?? redelivery.id,
    ...(redelivery.redelivery_id === null ? {} : { lane_id: redelivery.id }),
  };
}

/** A chunk of a redelivery; the one that cut it into lanes says how many, and the rows it counted. */
export type RedeliveryChunkOutcome = ChunkOutcome<RedeliveryCursor> & { cut?: { lanes: number; counted: number } };

/** Where a claimed redelivery goes on from, as its row says. */
export function redeliveryCursor(
  redelivery: Pick<ClaimedRedelivery, 'after_event_id' | 'until_event_id' | 'queued' | 'lanes'>,
): RedeliveryCursor {
  return {
    after: redelivery.after_event_id,
    until: redelivery.until_event_id,
    queued: redelivery.queued,
    lanes: redelivery.lanes ?? 1,
  };
}

/**
 * One chunk of a recorded redelivery, in one transaction fenced by its lease (renewed to `newLease`):
 * at most `chunkRows` more of the stream's failed deliveries walked, those its filter takes queued again,
 * the delivery workers woken at the commit. The redelivery's row goes once the walk reached its end,
 * or once its stream is being deleted. A row still to be cut into lanes is cut first, in a chunk of
 * its own that queues nothing: its range counted and shared out by rows (DeliveryStore.rowCuts), a row
 * each lane after the first. Undefined when the lease is another run's (nothing changed).
 */
export function redeliveryChunk(
  database: Database,
  settings: Pick<RedeliverySettings, 'chunkRows'>,
  queued: QueuedListener,
): (
  redelivery: ClaimedRedelivery,
  newLease: string,
  cursor: RedeliveryCursor,
) => Promise<RedeliveryChunkOutcome | undefined> {
  const redeliveries = new RedeliveryStore(database);
  const deliveries = new DeliveryStore(database);
  return (redelivery, newLease, cursor) =>
    unlessLeaseLost(
      transaction(database, async (trx): Promise<RedeliveryChunkOutcome> => {
        const held = await redeliveries.held(trx, redelivery);
        if (held === undefined) throw new LeaseLost();
        if (held.streamDeleting) {
          // The stream's deliveries are being removed: nothing is left to queue.
          if (!(await redeliveries.finish(trx, redelivery))) throw new LeaseLost();
          return { rows: 0, finished: true, cursor };
        }
        if (cursor.lanes > 1) {
          const range = { after: cursor.after, through: cursor.until };
          const { cuts, rows } = await deliveries.rowCuts(
            trx,
            filterOf(redelivery),
            range,
            cursor.lanes,
            settings.chunkRows,
          );
          if (!(await redeliveries.split(trx, { ...redelivery, until_event_id: cursor.until }, newLease, cuts)))
            throw new LeaseLost();
          return {
            rows: 0,
            finished: false,
            cursor: { ...cursor, until: cuts[0] ?? cursor.until, lanes: 1 },
            cut: { lanes: cuts.length + 1, counted: rows },
          };
        }
        const step = await deliveries.queueAgainStep(
          trx,
          filterOf(redelivery),
          { after: cursor.after, through: cursor.until },
          settings.chunkRows,
          now(),
        );
        if (step.queued > 0) await queued(trx);
        const next = { ...cursor, after: step.last ?? cursor.until, queued: cursor.queued + step.queued };
        const finished = step.last === undefined;
        const fenced = finished
          ? await redeliveries.finish(trx, redelivery)
          : await redeliveries.advance(trx, redelivery, newLease, next);
        if (!fenced) throw new LeaseLost();
        return { rows: step.queued, finished, cursor: next };
      }),
    );
}

/**
 * Queues the rest of large redeliveries in the background, on every node (see ChunkedJobWorker): the
 * request queued the first chunk and recorded the redelivery (Deliveries.redeliver), to be cut into
 * lanes of as many failed deliveries each when EVENT_STREAM_REDELIVERY_LANES > 1, of which a node works
 * on that many at once; each chunk here is one redeliveryChunk of one lane. The walk ends at the last
 * delivery that was failed when the redelivery was asked for: a delivery queued by it and failed again
 * is behind the walk of its lane (the lanes' ranges do not overlap), and is not queued twice.
 */
export class RedeliveryWorker extends ChunkedJobWorker<ClaimedRedelivery, RedeliveryCursor> {
  constructor(database: Database, settings: RedeliverySettings, queued: QueuedListener, logger: Logger) {
    const redeliveries = new RedeliveryStore(database);
    const deliveries = new DeliveryStore(database);
    const chunk = redeliveryChunk(database, settings, queued);
    const lanesCut = { wake: () => {} };
    super(
      {
        name: 'event stream redelivery',
        finished: 'event stream redelivery queued',
        concurrency: settings.lanes,
        logFields: redeliveryLogFields,
        cursorOf: redeliveryCursor,
        claimDue: (leaseMs, limit) => redeliveries.claimDue(leaseMs, limit),
        runChunk: async (redelivery, newLease, cursor) => {
          const outcome = await chunk(redelivery, newLease, cursor);
          if (outcome?.cut) {
            // How many lane ends to look for. This node takes the others up beside this one now (other
            // nodes at their next look).
            logger.info(
              { ...redeliveryLogFields(redelivery), lanes: outcome.cut.lanes, counted: outcome.cut.counted },
              'event stream redelivery cut into lanes',
            );
            if (outcome.cut.lanes > 1) lanesCut.wake();
          }
          if (outcome)
            await refreshStatisticsPast(deliveries, logger, cursor.queued, outcome.cursor.queued, settings.lanes);
          return outcome;
        },
        release: (redelivery, lease, at) => redeliveries.release(redelivery, lease, at),
      },
      logger,
    );
    lanesCut.wake = () => this.wake();
  }
}
