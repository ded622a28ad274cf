import type { Database } from '../../db/database.ts';
import { now, nowAfter, transaction } from '../../db/database.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';
import { eventStreamErrors } from '../../http/errors.ts';
import { idPattern, newId } from '../../ids.ts';
import type { Destinations, PublicDestination } from './destinations.ts';
import type { CreateStreamBody, UpdateStreamBody } from './schema.ts';
import type { StreamRead, StreamRow, StreamStore } from './store/streams.ts';
import type { TenantService } from '../tenants/service.ts';

export interface EventStream {
  id: string;
  status: 'enabled' | 'disabled';
  /** Only on a stream the server disabled (an extra member: the original has none). */
  status_reason?: string;
  name?: string;
  subscriptions: Array<{ event_type: string }>;
  created_at: string;
  updated_at: string;
  destination: PublicDestination;
}

const DEFAULT_TAKE = 50;

/** The tenant's stream, or the original's 404: what every operation on a stream starts with. */
export async function existingStream(
  store: StreamStore,
  tenantId: string,
  id: string,
  read?: StreamRead,
): Promise<StreamRow> {
  const row = await store.find(tenantId, id, read);
  if (!row) throw eventStreamErrors.streamNotFound();
  return row;
}

/** The event streams themselves: create, get, list, update (PATCH) and delete. */
export class Streams {
  constructor(
    private readonly database: Database,
    private readonly store: StreamStore,
    private readonly destinations: Destinations,
    private readonly tenants: Pick<TenantService, 'lock'>,
    private readonly maxPerTenant: number,
    /** Told of each stream marked deleted, once that commits: the removal of its rows can start at once. */
    private readonly deleted: () => void,
  ) {}

  async create(tenantId: string, input: CreateStreamBody): Promise<EventStream> {
    const { destination, secret } = this.destinations.seal(await this.destinations.check(input.destination), undefined);
    const at = now();
    const row: StreamRow = {
      id: newId.eventStream(),
      tenant_id: tenantId,
      name: input.name ?? null,
      status: input.status ?? 'enabled',
      subscriptions: JSON.stringify(input.subscriptions ?? []),
      destination: JSON.stringify(destination),
      secret,
      signing_secrets: null,
      created_at: at,
      updated_at: at,
      consecutive_failures: 0,
      circuit_open_until: null,
      status_reason: null,
      deletion_next_at: null,
      deletion_claimed_until: null,
    };
    await transaction(this.database, async (trx) => {
      // Every user write queues a delivery per subscribed stream, each a POST to an address the client
      // chose: the streams bound that fan-out. Creations of one tenant run one after another, so the
      // bound holds under concurrency.
      await this.tenants.lock(trx, tenantId);
      if ((await this.store.count(trx, tenantId)) >= this.maxPerTenant) throw eventStreamErrors.tooMany();
      await this.store.insert(row, trx);
    });
    return present(row);
  }

  async get(tenantId: string, id: string): Promise<EventStream> {
    return present(await existingStream(this.store, tenantId, id));
  }

  /** The secret of the stream's webhook authorization, in clear: never for the API, for seed export only. */
  async authorizationSecret(tenantId: string, id: string): Promise<string | undefined> {
    return this.destinations.open((await existingStream(this.store, tenantId, id)).secret);
  }

  async list(
    tenantId: string,
    options: { from?: string; take?: number },
  ): Promise<{ eventStreams: EventStream[]; next?: string }> {
    const take = options.take ?? DEFAULT_TAKE;
    const after =
      options.from === undefined ? undefined : decodeCursor(options.from, (id) => idPattern.eventStream.test(id));
    const rows = await this.store.page(tenantId, after, take + 1);
    const page = rows.slice(0, take);
    const last = page[page.length - 1];
    return { eventStreams: page.map(present), ...(rows.length > take && last ? { next: encodeCursor(last.id) } : {}) };
  }

  async update(tenantId: string, id: string, input: UpdateStreamBody): Promise<EventStream> {
    const webhook = input.destination === undefined ? undefined : await this.destinations.check(input.destination);
    return transaction(this.database, async (trx) => {
      const current = await existingStream(this.store, tenantId, id, { trx, lock: true });
      const changed: StreamRow = { ...current, updated_at: nowAfter(current.updated_at) };
      if (input.name !== undefined) changed.name = input.name;
      // Setting the status (enabled again after the server disabled it) starts the stream's failures over.
      if (input.status !== undefined) {
        Object.assign(changed, {
          status: input.status,
          consecutive_failures: 0,
          circuit_open_until: null,
          status_reason: null,
        });
      }
      if (input.subscriptions !== undefined) changed.subscriptions = JSON.stringify(input.subscriptions);
      if (webhook !== undefined) {
        const sealed = this.destinations.seal(webhook, current);
        changed.destination = JSON.stringify(sealed.destination);
        changed.secret = sealed.secret;
      }
      await this.store.update(trx, changed);
      return present(changed);
    });
  }

  /**
   * The stream is gone at once: marked deleted in one short statement, whatever its history. Its
   * deliveries and their attempts are removed afterwards, in chunks, in the background (deletions.ts).
   */
  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.store.markDeleting(tenantId, id, now()))) throw eventStreamErrors.streamNotFound();
    this.deleted();
  }
}

function present(row: StreamRow): EventStream {
  return {
    id: row.id,
    status: row.status,
    ...(row.status_reason === null ? {} : { status_reason: row.status_reason }),
    ...(row.name === null ? {} : { name: row.name }),
    subscriptions: JSON.parse(row.subscriptions) as Array<{ event_type: string }>,
    created_at: row.created_at,
    updated_at: row.updated_at,
    destination: JSON.parse(row.destination) as PublicDestination,
  };
}
