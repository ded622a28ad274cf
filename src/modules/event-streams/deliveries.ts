import type { Database, Tx } from '../../db/database.ts';
import { now, transaction } from '../../db/database.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';
import { eventStreamErrors } from '../../http/errors.ts';
import { idPattern } from '../../ids.ts';
import { listingFilter, redeliveryFilter } from './delivery-filters.ts';
import { presentStats, statsWindow } from './stats.ts';
import { envelope, type Envelope } from './envelope.ts';
import type { QueuedListener } from './outbox.ts';
import {
  ATTEMPTS_CURSOR_DESCRIPTION,
  type AttemptsQuery,
  type DeliveriesQuery,
  type DeliveryCount,
  type DeliveryCountQuery,
  type RedeliverBody,
  type StatsQuery,
  type StreamAttempt,
  type StreamAttempts,
  type StreamStats,
} from './schema.ts';
import type {
  AttemptKey,
  AttemptRow,
  DeliveryRow,
  DeliveryStore,
  FailedDeliveries,
  StreamAttemptRow,
} from './store/deliveries.ts';
import { ANALYZE_AFTER_QUEUED, requeuedAttempt } from './store/deliveries.ts';
import { REDELIVERIES_UNDER_WAY_MAX, type RedeliveryStore } from './store/redeliveries.ts';
import type { StreamStore } from './store/streams.ts';
import { existingStream } from './streams.ts';
import type { Logger } from '../../logger.ts';

export interface Attempt {
  status: string;
  error_message?: string;
  timestamp: string;
  duration?: number;
}

export interface Delivery {
  id: string;
  event_stream_id: string;
  event_type: string;
  status: string;
  attempts: Attempt[];
  event: Envelope;
}

export interface DeliveryPage {
  deliveries: Delivery[];
  next?: string;
}

const DEFAULT_TAKE = 50;
/** A page of deliveries holds events of at most this many bytes of data in all (see withinPageBytes). */
const PAGE_EVENT_BYTES = 1024 * 1024;
/** Past this many, a backlog's size is reported as this many: counting it costs a bounded read. */
const PENDING_COUNT_CAP = 10_000;

/**
 * After a redelivery (or a chunk of one, from `before` to `after` queued in all) passed
 * ANALYZE_AFTER_QUEUED, refreshes the planner's statistics of deliveries. A lane of a redelivery
 * walked in `lanes` counts against its share of the threshold: a redelivery of 80,000 in two lanes
 * queues some 35,000 in each. Called once committed: the redelivery stands whatever the refresh does,
 * so its failure is logged, not answered.
 */
export async function refreshStatisticsPast(
  store: Pick<DeliveryStore, 'refreshStatistics'>,
  logger: Pick<Logger, 'error'>,
  before: number,
  after: number,
  lanes = 1,
): Promise<void> {
  const threshold = ANALYZE_AFTER_QUEUED / lanes;
  if (before >= threshold || after < threshold) return;
  await store
    .refreshStatistics()
    .catch((error: unknown) =>
      logger.error({ err: error }, 'event delivery: refreshing statistics after a redelivery failed'),
    );
}

/** Where a redelivery larger than one chunk goes on (redelivery/worker.ts). */
export interface RedeliveryQueue {
  store: RedeliveryStore;
  /** Most failed deliveries one step walks (EVENT_STREAM_REDELIVERY_CHUNK_ROWS). */
  chunkRows: number;
  /** Lanes the rest is cut into, of as many failed deliveries each, walked side by side (EVENT_STREAM_REDELIVERY_LANES). */
  lanes: number;
  /** Told of each redelivery recorded, so that its rest is queued at once (after the commit). */
  recorded: () => void;
}

/** A stream's failed deliveries (GET …/deliveries, …/deliveries/{event_id}) and their redelivery (POST …/redeliver). */
export class Deliveries {
  constructor(
    private readonly database: Database,
    private readonly streams: StreamStore,
    private readonly store: DeliveryStore,
    private readonly queued: QueuedListener,
    private readonly redeliveries: RedeliveryQueue,
    private readonly logger: Pick<Logger, 'error'> = { error: () => undefined },
  ) {}

  async list(tenantId: string, streamId: string, query: DeliveriesQuery): Promise<DeliveryPage> {
    await existingStream(this.streams, tenantId, streamId);
    const filter = listingFilter(query);
    const take = query.take ?? DEFAULT_TAKE;
    if (filter === undefined) return { deliveries: [] };
    const after = query.from === undefined ? undefined : decodeCursor(query.from, (id) => idPattern.event.test(id));
    const rows = await this.store.failedPage({ streamId, ...filter }, after, take + 1);
    const page = await this.withinPageBytes(rows.slice(0, take));
    const last = page[page.length - 1];
    const next = rows.length > page.length && last ? { next: encodeCursor(last.event_id) } : {};
    return { deliveries: await this.present(page), ...next };
  }

  /**
   * The first deliveries of `rows` whose events' data add up to at most PAGE_EVENT_BYTES (the first one
   * whatever its size). An event carries a user, whose metadata can approach the body limit: a page of
   * 100 such would be a response of 100 MB, held in memory for as long as its client takes to read it.
   * The listing's `next` resumes after the last one given, so a shorter page loses nothing.
   */
  private async withinPageBytes(rows: DeliveryRow[]): Promise<DeliveryRow[]> {
    if (rows.length <= 1) return rows;
    const sizes = await this.store.eventSizes(rows.map((r) => r.event_id));
    let total = 0;
    for (let i = 0; i < rows.length; i++) {
      total += sizes.get(rows[i]!.event_id) ?? 0;
      if (total > PAGE_EVENT_BYTES && i > 0) return rows.slice(0, i);
    }
    return rows;
  }

  /** How many failed deliveries the listing's filter matches, and so how many a redelivery of it queues. */
  async count(tenantId: string, streamId: string, query: DeliveryCountQuery): Promise<DeliveryCount> {
    await existingStream(this.streams, tenantId, streamId);
    const filter = listingFilter(query);
    if (filter === undefined) return { count: 0 };
    return { count: await this.store.countFailed({ streamId, ...filter }) };
  }

  /**
   * Delivered and failed attempts per bucket of the window (see statsWindow), read from the stream's
   * per-minute counts, with the backlog and the health (Tenantry's additions).
   */
  async stats(tenantId: string, streamId: string, query: StatsQuery): Promise<StreamStats> {
    const stream = await existingStream(this.streams, tenantId, streamId);
    const window = statsWindow(query, Date.now());
    const [counts, pending] = await Promise.all([
      this.store.countsPerBucket(streamId, window),
      this.store.pending(streamId, PENDING_COUNT_CAP),
    ]);
    return {
      id: stream.id,
      ...(stream.name === null ? {} : { name: stream.name }),
      ...presentStats(window, counts),
      backlog: {
        pending: pending.count,
        ...(pending.oldestDueAt === undefined ? {} : { oldest_due_at: pending.oldestDueAt }),
      },
      health: {
        consecutive_failures: stream.consecutive_failures,
        ...(stream.circuit_open_until === null ? {} : { circuit_open_until: stream.circuit_open_until }),
      },
    };
  }

  /**
   * The stream's attempts as they are recorded: the latest, newest first, or with `after` only those
   * recorded after it, oldest first; `next` marks the newest given, for the next poll.
   */
  async attempts(tenantId: string, streamId: string, query: AttemptsQuery): Promise<StreamAttempts> {
    await existingStream(this.streams, tenantId, streamId);
    const after = query.after === undefined ? undefined : attemptKeyOf(query.after);
    const rows = await this.store.streamAttempts(streamId, after, query.take ?? DEFAULT_TAKE);
    const newest = after === undefined ? rows[0] : (rows[rows.length - 1] ?? after);
    return {
      attempts: rows.map(presentStreamAttempt),
      ...(newest === undefined ? {} : { next: attemptCursor(newest) }),
    };
  }

  async get(tenantId: string, streamId: string, eventId: string): Promise<Delivery> {
    await existingStream(this.streams, tenantId, streamId);
    const row = await this.store.find(streamId, eventId);
    if (!row) throw eventStreamErrors.eventNotFound();
    const [delivery] = await this.present([row]);
    return delivery!;
  }

  /**
   * Queues every failed delivery matching the filter again, no delivery read into memory. The request
   * walks the stream's failed deliveries in event id order, at most `chunkRows` of them, in one
   * transaction: one UPDATE of those the filter takes. When more are left, the same transaction records
   * the redelivery, and the rest is queued in the background chunk by chunk (redelivery/worker.ts), up
   * to the last delivery that was failed now: as one UPDATE, a million held the database for seconds.
   */
  async redeliver(tenantId: string, streamId: string, body: RedeliverBody): Promise<void> {
    const at = now();
    const { queued, recorded } = await transaction(this.database, async (trx) => {
      await existingStream(this.streams, tenantId, streamId, { trx, lock: true });
      const filter = redeliveryFilter(body);
      const through = filter && (await this.store.lastFailed(trx, streamId));
      if (filter === undefined || through === undefined) return { queued: 0, recorded: false };
      const which = { streamId, ...filter };
      const step = await this.store.queueAgainStep(trx, which, { through }, this.redeliveries.chunkRows, at);
      if (step.queued > 0) await this.queued(trx);
      if (step.last === undefined) return { queued: step.queued, recorded: false };
      // Refused, its first chunk rolled back, while the stream has as many under way as it may.
      if (
        (await this.redeliveries.store.underWay(trx, streamId, REDELIVERIES_UNDER_WAY_MAX)) >=
        REDELIVERIES_UNDER_WAY_MAX
      )
        throw eventStreamErrors.redeliveriesUnderWay();
      await this.redeliveries.store.record(trx, {
        tenantId,
        which,
        after: step.last,
        through,
        lanes: this.redeliveries.lanes,
        queued: step.queued,
        at,
      });
      return { queued: step.queued, recorded: true };
    });
    if (recorded) this.redeliveries.recorded();
    await refreshStatisticsPast(this.store, this.logger, 0, queued);
  }

  async redeliverOne(tenantId: string, streamId: string, eventId: string): Promise<void> {
    const at = now();
    await transaction(this.database, async (trx) => {
      await existingStream(this.streams, tenantId, streamId, { trx, lock: true });
      const status = await this.store.lockedStatus(trx, streamId, eventId);
      if (status === undefined) throw eventStreamErrors.eventNotFound();
      if (status !== 'failed') throw eventStreamErrors.notRedeliverable();
      await this.queueAgain(trx, { streamId, eventId }, at);
    });
  }

  private async queueAgain(trx: Tx, which: FailedDeliveries, at: string): Promise<number> {
    const queued = await this.store.queueAgain(trx, which, at);
    await this.queued(trx);
    return queued;
  }

  private async present(rows: DeliveryRow[]): Promise<Delivery[]> {
    if (rows.length === 0) return [];
    const streamId = rows[0]!.stream_id;
    const ids = rows.map((r) => r.event_id);
    const [events, attempts] = await Promise.all([this.store.events(ids), this.store.shownAttempts(streamId, ids)]);
    const eventById = new Map(events.map((e) => [e.id, e]));
    const attemptsById = new Map<string, Attempt[]>();
    const seqs = new Set<string>();
    const add = (a: AttemptRow) => {
      const listed = attemptsById.get(a.event_id) ?? [];
      listed.push(presentAttempt(a));
      attemptsById.set(a.event_id, listed);
      seqs.add(`${a.event_id} ${a.seq}`);
    };
    for (const a of attempts) add(a);
    for (const r of rows) {
      // Queued again and not attempted since: its `retrying` attempt comes last (it holds the latest seq).
      const waiting = requeuedAttempt(r);
      if (waiting && !seqs.has(`${r.event_id} ${waiting.seq}`)) add(waiting);
    }
    return rows.map((r) => ({
      id: r.event_id,
      event_stream_id: r.stream_id,
      event_type: r.event_type,
      status: r.status,
      attempts: attemptsById.get(r.event_id) ?? [],
      event: envelope(eventById.get(r.event_id)!, r.stream_id),
    }));
  }
}

function presentAttempt(a: AttemptRow): Attempt {
  return {
    status: a.status,
    ...(a.error_message === null ? {} : { error_message: a.error_message }),
    timestamp: a.timestamp,
    ...(a.duration === null ? {} : { duration: Number(a.duration) }),
  };
}

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;
const SEQ = /^(0|[1-9]\d{0,8})$/;

/** An attempt's cursor: its key, `timestamp event_id seq`, base64url-encoded. */
const attemptCursor = (key: AttemptKey): string => encodeCursor(`${key.timestamp} ${key.event_id} ${key.seq}`);

function attemptKeyOf(cursor: string): AttemptKey {
  const isKey = (key: string) => {
    const [timestamp, eventId, seq, ...rest] = key.split(' ');
    return (
      rest.length === 0 &&
      TIMESTAMP.test(timestamp ?? '') &&
      // Of the right shape is not enough: the server writes only times that exist.
      !Number.isNaN(Date.parse(timestamp!)) &&
      idPattern.event.test(eventId ?? '') &&
      SEQ.test(seq ?? '')
    );
  };
  const [timestamp, eventId, seq] = decodeCursor(cursor, isKey, {
    name: 'after',
    description: ATTEMPTS_CURSOR_DESCRIPTION,
  }).split(' ');
  return { timestamp: timestamp!, event_id: eventId!, seq: Number(seq) };
}

function presentStreamAttempt(a: StreamAttemptRow): StreamAttempt {
  return {
    event_id: a.event_id,
    event_type: a.event_type,
    seq: Number(a.seq),
    status: a.status as StreamAttempt['status'],
    timestamp: a.timestamp,
    ...(a.error_message === null ? {} : { error_message: a.error_message }),
    ...(a.duration === null ? {} : { duration: Number(a.duration) }),
  };
}
