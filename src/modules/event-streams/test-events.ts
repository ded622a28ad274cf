import type { Database } from '../../db/database.ts';
import { now, transaction } from '../../db/database.ts';
import { eventStreamErrors } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import type { Delivery } from './deliveries.ts';
import { envelope, type Envelope } from './envelope.ts';
import { sourceOf, type QueuedListener, type TenantLookup } from './outbox.ts';
import type { TestBody } from './schema.ts';
import { pendingDelivery, type DeliveryStore, type EventRow } from './store/deliveries.ts';
import type { StreamStore } from './store/streams.ts';
import { existingStream } from './streams.ts';

/** Sample payload of test events sent without `data`. */
export function sampleData(type: string): unknown {
  const user = {
    user_id: 'svc|507f1f77bcf86cd799439020',
    email: 'john.doe@example.com',
    email_verified: false,
    name: 'John Doe',
    nickname: 'john.doe',
    picture: 'https://example.com/avatar.png',
    identities: [
      {
        connection: 'Username-Password-Authentication',
        user_id: '507f1f77bcf86cd799439020',
        provider: 'svc',
        isSocial: false,
      },
    ],
    created_at: '2025-01-01T00:00:00.000Z',
    updated_at: '2025-01-01T00:00:00.000Z',
  };
  if (type.startsWith('user.')) return { object: user };
  return { object: { id: 'sample_1234567890', name: 'sample' } };
}

/**
 * The envelope in the key order the original's test response shows (compat notes §4.6), which differs
 * from the one its deliveries carry (§4.7); the webhook receives the deliveries' order.
 */
function inTestResponseOrder(event: Envelope): Envelope {
  const { specversion, id, source, type, time, data, a0purpose, a0stream, a0tenant } = event;
  return { specversion, id, source, type, time, data, ...(a0purpose ? { a0purpose } : {}), a0stream, a0tenant };
}

/** POST …/test: one test event (`a0purpose: test`), queued for the stream like any other. */
export class TestEvents {
  constructor(
    private readonly database: Database,
    private readonly streams: StreamStore,
    private readonly deliveries: DeliveryStore,
    private readonly tenants: TenantLookup,
    private readonly queued: QueuedListener,
  ) {}

  async send(tenantId: string, streamId: string, input: TestBody): Promise<Delivery> {
    return transaction(this.database, async (trx) => {
      // Locked (PostgreSQL): a deletion committing meanwhile waits, and no delivery is queued behind its removal.
      const stream = await existingStream(this.streams, tenantId, streamId, { trx, lock: true });
      if (stream.status !== 'enabled') throw eventStreamErrors.testToDisabledStream();
      const source = await sourceOf(this.tenants, trx, tenantId);
      const at = now();
      const event: EventRow = {
        id: newId.event(),
        tenant_id: tenantId,
        type: input.event_type,
        time: at,
        source,
        data: JSON.stringify(input.data ?? sampleData(input.event_type)),
        purpose: 'test',
      };
      await this.deliveries.insertOne(trx, event, pendingDelivery(streamId, event.id, input.event_type, at));
      await this.queued(trx);
      return {
        id: event.id,
        event_stream_id: streamId,
        event_type: input.event_type,
        status: 'pending',
        attempts: [],
        event: inTestResponseOrder(envelope(event, streamId)),
      };
    });
  }
}
