import { now, type Database, type Tx } from '../../db/database.ts';
import type { SecretBox } from '../../secret-box.ts';
import { Deliveries } from './deliveries.ts';
import type { EndpointGuard } from './delivery/endpoint-guard.ts';
import { Destinations } from './destinations.ts';
import { EventOutbox, type EventInput, type QueuedListener, type TenantLookup } from './outbox.ts';
import { SigningSecrets } from './signing-secrets.ts';
import { DeliveryStore } from './store/deliveries.ts';
import { RedeliveryStore } from './store/redeliveries.ts';
import { StreamStore } from './store/streams.ts';
import { Streams } from './streams.ts';
import { TestEvents } from './test-events.ts';
import type { Logger } from '../../logger.ts';
import type { TenantService } from '../tenants/service.ts';

export type { EventInput };

export interface EventStreamOptions {
  /** Undefined: development mode (DELIVERY_ALLOW_HTTP), where endpoints may be http:// and at any address. */
  guard: EndpointGuard | undefined;
  /** Called inside every transaction that queued deliveries, so the workers can be woken once it commits. */
  queued: QueuedListener;
  /** Where a failed refresh of the planner's statistics after a large redelivery is told (the server's logger). */
  logger?: Pick<Logger, 'error'>;
  /** Most streams one tenant may have (EVENT_STREAMS_MAX). */
  maxPerTenant: number;
  /** Told of each stream marked deleted, so that the removal of its rows starts at once (deletion/worker.ts). */
  deleted?: () => void;
  /** Most failed deliveries one step of a redelivery walks (EVENT_STREAM_REDELIVERY_CHUNK_ROWS). */
  redeliveryChunkRows: number;
  /** Lanes a large redelivery's background walk is split into (EVENT_STREAM_REDELIVERY_LANES); 1 unless given. */
  redeliveryLanes?: number;
  /** Told of each redelivery larger than one chunk, so that its rest is queued at once (redelivery/worker.ts). */
  redeliveryRecorded?: () => void;
}

/**
 * Event streams: a tenant's webhooks, and the events of its users' changes queued for them (the outbox)
 * for the delivery worker (delivery/worker.ts) to send. One part per concept of the API; `record` is
 * what other modules call, inside their own transactions.
 */
export class EventStreamService {
  /** Create, get, list, update, delete. */
  readonly streams: Streams;
  /** The failed deliveries log and redelivery. */
  readonly deliveries: Deliveries;
  /** POST …/test. */
  readonly testEvents: TestEvents;
  /** Standard Webhooks signing secrets (a Tenantry extension). */
  readonly signingSecrets: SigningSecrets;
  private readonly outbox: EventOutbox;
  private readonly deliveryStore: DeliveryStore;

  constructor(
    database: Database,
    secretBox: SecretBox,
    tenants: TenantLookup & Pick<TenantService, 'lock'>,
    options: EventStreamOptions,
  ) {
    const streamStore = new StreamStore(database);
    const deliveryStore = new DeliveryStore(database);
    this.deliveryStore = deliveryStore;
    this.streams = new Streams(
      database,
      streamStore,
      new Destinations(secretBox, options.guard),
      tenants,
      options.maxPerTenant,
      options.deleted ?? (() => undefined),
    );
    this.deliveries = new Deliveries(
      database,
      streamStore,
      deliveryStore,
      options.queued,
      {
        store: new RedeliveryStore(database),
        chunkRows: options.redeliveryChunkRows,
        lanes: options.redeliveryLanes ?? 1,
        recorded: options.redeliveryRecorded ?? (() => undefined),
      },
      options.logger,
    );
    this.testEvents = new TestEvents(database, streamStore, deliveryStore, tenants, options.queued);
    this.signingSecrets = new SigningSecrets(database, streamStore, secretBox);
    this.outbox = new EventOutbox(streamStore, deliveryStore, tenants, options.queued);
  }

  /**
   * Writes each change's event and one pending delivery per enabled stream subscribed to its type,
   * inside the caller's transaction (see EventOutbox).
   */
  record(trx: Tx, events: readonly EventInput[]): Promise<void> {
    return this.outbox.record(trx, events);
  }

  /** How many deliveries one event of `type` of the tenant makes now (see EventOutbox). */
  deliveriesPerEvent(tenantId: string, type: string): Promise<number> {
    return this.outbox.deliveriesPerEvent(tenantId, type);
  }

  /** Deliveries due now across every stream, and when the oldest fell due: the outbox's backlog. */
  dueBacklog(): Promise<{ due: number; oldestDueAt: string | undefined }> {
    return this.deliveryStore.dueBacklog(now());
  }
}
