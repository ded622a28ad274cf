import type { Database } from '../../db/database.ts';
import { DeliveryStore, type AttemptLine, type AttemptScope } from './store/deliveries.ts';
import { StreamStore } from './store/streams.ts';

export type { AttemptLine, AttemptScope };

/**
 * Delivery attempts as the workers record them, read from the database alone (no secrets, no
 * worker): what `tenantry events tail` follows from outside the server.
 */
export class AttemptLog {
  private readonly streams: StreamStore;
  private readonly deliveries: DeliveryStore;

  constructor(database: Database) {
    this.streams = new StreamStore(database);
    this.deliveries = new DeliveryStore(database);
  }

  /** Whether the stream exists, on the tenant when one is given. */
  streamExists(streamId: string, tenantId?: string): Promise<boolean> {
    return this.streams.exists(streamId, tenantId);
  }

  /** Attempts recorded at or after `since`, oldest first; a redelivery being queued is not an attempt. */
  since(since: string, scope: AttemptScope): Promise<AttemptLine[]> {
    return this.deliveries.attemptsSince(since, scope);
  }
}
