import type { Database, Tx } from '../../db/database.ts';
import { now, transaction } from '../../db/database.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';
import { eventStreamErrors } from '../../http/errors.ts';
import { idPattern } from '../../ids.ts';
import { listingFilter, redeliveryFilter } from './delivery-filters.ts';
import { envelope, type Envelope } from './envelope.ts';
import type { QueuedListener } from './outbox.ts';
import type { DeliveriesQuery, RedeliverBody } from './schema.ts';
import type { AttemptRow, DeliveryRow, DeliveryStore, FailedDeliveries } from './store/deliveries.ts';
import type { StreamStore } from './store/streams.ts';
import { existingStream } from './streams.ts';

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

/** A stream's failed deliveries (GET …/deliveries, …/deliveries/{event_id}) and their redelivery (POST …/redeliver). */
export class Deliveries {
  constructor(
    private readonly database: Database,
    private readonly streams: StreamStore,
    private readonly store: DeliveryStore,
    private readonly queued: QueuedListener,
  ) {}

  async list(tenantId: string, streamId: string, query: DeliveriesQuery): Promise<DeliveryPage> {
    await existingStream(this.streams, tenantId, streamId);
    const filter = listingFilter(query);
    const take = query.take ?? DEFAULT_TAKE;
    if (filter === undefined) return { deliveries: [] };
    const after = query.from === undefined ? undefined : decodeCursor(query.from, (id) => idPattern.event.test(id));
    const rows = await this.store.failedPage({ streamId, ...filter }, after, take + 1);
    const page = rows.slice(0, take);
    const last = page[page.length - 1];
    const next = rows.length > take && last ? { next: encodeCursor(last.event_id) } : {};
    return { deliveries: await this.present(page), ...next };
  }

  async get(tenantId: string, streamId: string, eventId: string): Promise<Delivery> {
    await existingStream(this.streams, tenantId, streamId);
    const row = await this.store.find(streamId, eventId);
    if (!row) throw eventStreamErrors.eventNotFound();
    const [delivery] = await this.present([row]);
    return delivery!;
  }

  /**
   * Queues every failed delivery matching the filter again: one INSERT … SELECT of the `retrying`
   * attempt rows and one UPDATE, in one transaction; no delivery is loaded into memory.
   */
  async redeliver(tenantId: string, streamId: string, body: RedeliverBody): Promise<void> {
    const at = now();
    await transaction(this.database, async (trx) => {
      await existingStream(this.streams, tenantId, streamId, { trx, lock: true });
      const filter = redeliveryFilter(body);
      if (filter === undefined) return;
      await this.queueAgain(trx, { streamId, ...filter }, at);
    });
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

  private async queueAgain(trx: Tx, which: FailedDeliveries, at: string): Promise<void> {
    await this.store.queueAgain(trx, which, at);
    await this.queued(trx);
  }

  private async present(rows: DeliveryRow[]): Promise<Delivery[]> {
    if (rows.length === 0) return [];
    const streamId = rows[0]!.stream_id;
    const ids = rows.map((r) => r.event_id);
    const [events, attempts] = await Promise.all([this.store.events(ids), this.store.shownAttempts(streamId, ids)]);
    const eventById = new Map(events.map((e) => [e.id, e]));
    const attemptsById = new Map<string, Attempt[]>();
    for (const a of attempts) {
      const listed = attemptsById.get(a.event_id) ?? [];
      listed.push(presentAttempt(a));
      attemptsById.set(a.event_id, listed);
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
