import type { Tx } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import { newId } from '../../ids.ts';
import type { TenantService } from '../tenants/service.ts';
import { sourceFor } from './envelope.ts';
import { pendingDelivery, type DeliveryRow, type DeliveryStore, type EventRow } from './store/deliveries.ts';
import type { StreamStore } from './store/streams.ts';

/** What one user change (or a test) hands the outbox. */
export interface EventInput {
  tenantId: string;
  type: string;
  data: unknown;
}

/** What event streams need of tenants: a tenant's domain (its events' `source`), read in the caller's transaction. */
export type TenantLookup = Pick<TenantService, 'get'>;

/** Called inside every transaction that queued deliveries, so the workers can be woken once it commits. */
export type QueuedListener = (trx: Tx) => Promise<void>;

/** The `source` of the tenant's events. */
export async function sourceOf(tenants: TenantLookup, trx: Tx, tenantId: string): Promise<string> {
  const tenant = await tenants.get(tenantId, trx);
  if (!tenant) throw new Error(`event streams: no tenant ${tenantId}`);
  return sourceFor(tenant.domain);
}

/** The transactional outbox: the events of user changes, written with the changes, and their deliveries. */
export class EventOutbox {
  constructor(
    private readonly streams: StreamStore,
    private readonly deliveries: DeliveryStore,
    private readonly tenants: TenantLookup,
    private readonly queued: QueuedListener,
  ) {}

  /** How many deliveries one event of `type` of the tenant makes now: its enabled streams subscribed to it. */
  async deliveriesPerEvent(tenantId: string, type: string): Promise<number> {
    return byEventType(await this.streams.subscribers(undefined, tenantId)).get(type)?.size ?? 0;
  }

  /**
   * Writes each change's event and one pending delivery per enabled stream subscribed to its type,
   * inside the caller's transaction: the changes and their events commit (or roll back) together.
   * A batch (an import of thousands of users) reads each tenant's streams once and is written in
   * multi-row inserts; a change no stream subscribes to writes nothing.
   */
  async record(trx: Tx, inputs: readonly EventInput[]): Promise<void> {
    const events: EventRow[] = [];
    const deliveries: DeliveryRow[] = [];
    const byTenant = new Map<string, EventInput[]>();
    for (const input of inputs) {
      const ofTenant = byTenant.get(input.tenantId);
      if (ofTenant) ofTenant.push(input);
      else byTenant.set(input.tenantId, [input]);
    }
    for (const [tenantId, ofTenant] of byTenant) {
      const streams = await this.streams.subscribers(trx, tenantId);
      if (streams.length === 0) continue;
      const subscribed = byEventType(streams);
      let source: string | undefined;
      for (const input of ofTenant) {
        const targets = subscribed.get(input.type);
        if (targets === undefined) continue;
        source ??= await sourceOf(this.tenants, trx, tenantId);
        const at = now();
        const id = newId.event();
        events.push({
          id,
          tenant_id: tenantId,
          type: input.type,
          time: at,
          source,
          data: JSON.stringify(input.data),
          purpose: null,
        });
        for (const streamId of targets) deliveries.push(pendingDelivery(streamId, id, input.type, at));
      }
    }
    if (events.length === 0) return;
    await this.deliveries.insert(trx, events, deliveries);
    await this.queued(trx);
  }
}

/** Event type → the ids of the streams subscribed to it, each once. */
function byEventType(streams: ReadonlyArray<{ id: string; subscriptions: string }>): Map<string, Set<string>> {
  const subscribed = new Map<string, Set<string>>();
  for (const stream of streams) {
    for (const { event_type } of JSON.parse(stream.subscriptions) as Array<{ event_type: string }>) {
      const ids = subscribed.get(event_type) ?? new Set<string>();
      subscribed.set(event_type, ids.add(stream.id));
    }
  }
  return subscribed;
}
