import { sql, type ExpressionBuilder, type Selectable } from 'kysely';
import type { Database, Tx } from '../../db/database.ts';
import { insertInSlices, now, nowAfter, uniqueOr } from '../../db/database.ts';
import type { DeliveriesTable, DeliveryAttemptsTable, EventsTable, EventStreamsTable, Schema } from '../../db/schema.ts';
import { decodeCursor, encodeCursor } from '../../http/cursor.ts';
import { ApiError, badRequest, conflict } from '../../http/errors.ts';
import { idPattern, newId } from '../../ids.ts';
import { EndpointRefused, EndpointUnresolved, type EndpointGuard } from './delivery/endpoint-guard.ts';
import type { SecretBox } from '../../secret-box.ts';
import { envelope, sourceFor, type Envelope } from './envelope.ts';
import type {
  Authorization, CreateSigningSecretBody, CreateStreamBody, DeliveriesQuery, Destination, EventType, RedeliverBody,
  SigningSecretCreated, SigningSecretList, TestBody, UpdateStreamBody,
} from './schema.ts';
import { live, newSigningSecret, rotate, without, withoutSecret, type StoredSigningSecret } from './signing-secret-rotation.ts';

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

export interface PublicDestination {
  type: 'webhook';
  configuration: { webhook_endpoint: string; webhook_authorization: Record<string, string> };
}

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

export const streamNotFound = () => new ApiError(404, 'The requested stream does not exist.');
export const eventNotFound = () => new ApiError(404, 'The event does not exist.');
const nameTaken = () =>
  conflict('You have reached the maximum number of event streams for your account OR Event stream name already in use.');
const notRedeliverable = () => conflict('The event is not in a state that allows redelivery.');
const signingSecretNotFound = () => new ApiError(404, 'The signing secret does not exist.');

/** How long a replaced signing secret keeps signing when the rotation does not say. */
const DEFAULT_SIGNING_OVERLAP_SECONDS = 86_400;

const DEFAULT_TAKE = 50;



const isoMs = (value: string): string => new Date(value).toISOString();

/** What one user change (or a test) hands the outbox. */
export interface EventInput {
  tenantId: string;
  type: string;
  data: unknown;
}

/** Sample payload of test events sent without `data`. */
function sampleData(type: string): unknown {
  const user = {
    user_id: 'svc|507f1f77bcf86cd799439020',
    email: 'john.doe@example.com',
    email_verified: false,
    name: 'John Doe',
    nickname: 'john.doe',
    picture: 'https://example.com/avatar.png',
    identities: [{ connection: 'Username-Password-Authentication', user_id: '507f1f77bcf86cd799439020', provider: 'svc', isSocial: false }],
    created_at: '2025-01-01T00:00:00.000Z',
    updated_at: '2025-01-01T00:00:00.000Z',
  };
  if (type.startsWith('user.')) return { object: user };
  return { object: { id: 'sample_1234567890', name: 'sample' } };
}

/**
 * Headers the sender sets itself, or that steer the connection: a custom authorization header may not
 * replace them (a forged `webhook-signature`, a `host` aimed at another virtual host, a broken framing).
 */
const RESERVED_HEADERS = new Set([
  'host', 'content-type', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'expect',
  'user-agent', 'webhook-id', 'webhook-timestamp', 'webhook-signature',
]);

export class EventStreamService {
  constructor(
    private readonly database: Database,
    private readonly secretBox: SecretBox,
    /** `guard` undefined: development mode (DELIVERY_ALLOW_HTTP), where endpoints may be http:// and at any address. */
    private readonly options: { guard: EndpointGuard | undefined },
  ) {}

  private readonly queuedListeners: Array<(trx: Tx) => Promise<void>> = [];

  /** Called inside every transaction that queues deliveries, so the workers can be woken once it commits. */
  onQueued(listener: (trx: Tx) => Promise<void>): void {
    this.queuedListeners.push(listener);
  }

  private async queued(trx: Tx): Promise<void> {
    for (const listener of this.queuedListeners) await listener(trx);
  }

  // ---------------------------------------------------------------------------------------------
  // Streams

  async create(tenantId: string, input: CreateStreamBody): Promise<EventStream> {
    const { destination, secret } = this.sealDestination(await this.checkWebhook(input.destination), undefined);
    const at = now();
    const row: Selectable<EventStreamsTable> = {
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
    };
    await uniqueOr(this.database.db.insertInto('event_streams').values(row).execute(), nameTaken);
    return present(row);
  }

  async get(tenantId: string, id: string): Promise<EventStream> {
    return present(await this.row(this.database.db, tenantId, id));
  }

  async list(tenantId: string, options: { from?: string; take?: number }): Promise<{ eventStreams: EventStream[]; next?: string }> {
    const take = options.take ?? DEFAULT_TAKE;
    let query = this.database.db.selectFrom('event_streams').selectAll().where('tenant_id', '=', tenantId);
    if (options.from !== undefined) query = query.where('id', '>', decodeCursor(options.from, (id) => idPattern.eventStream.test(id)));
    const rows = await query.orderBy('id').limit(take + 1).execute();
    const page = rows.slice(0, take);
    const last = page[page.length - 1];
    return { eventStreams: page.map(present), ...(rows.length > take && last ? { next: encodeCursor(last.id) } : {}) };
  }

  async update(tenantId: string, id: string, input: UpdateStreamBody): Promise<EventStream> {
    const webhook = input.destination === undefined ? undefined : await this.checkWebhook(input.destination);
    return uniqueOr(
      this.database.db.transaction().execute(async (trx) => {
        const current = await this.row(trx, tenantId, id, true);
        const changed: Selectable<EventStreamsTable> = { ...current, updated_at: nowAfter(current.updated_at) };
        if (input.name !== undefined) changed.name = input.name;
        // Setting the status (enabled again after the server disabled it) starts the stream's failures over.
        if (input.status !== undefined) {
          Object.assign(changed, { status: input.status, consecutive_failures: 0, circuit_open_until: null, status_reason: null });
        }
        if (input.subscriptions !== undefined) changed.subscriptions = JSON.stringify(input.subscriptions);
        if (webhook !== undefined) {
          const checked = this.sealDestination(webhook, current);
          changed.destination = JSON.stringify(checked.destination);
          changed.secret = checked.secret;
        }
        await trx
          .updateTable('event_streams')
          .set({
            name: changed.name, status: changed.status, subscriptions: changed.subscriptions,
            destination: changed.destination, secret: changed.secret, updated_at: changed.updated_at,
            consecutive_failures: changed.consecutive_failures, circuit_open_until: changed.circuit_open_until, status_reason: changed.status_reason,
          })
          .where('tenant_id', '=', tenantId)
          .where('id', '=', id)
          .execute();
        return present(changed);
      }),
      nameTaken,
    );
  }

  /** Deliveries and their attempts go with the stream (foreign keys cascade). */
  async delete(tenantId: string, id: string): Promise<void> {
    const removed = await this.database.db.deleteFrom('event_streams').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    if (removed.numDeletedRows === 0n) throw streamNotFound();
  }

  /** The stream's webhook with its secret opened: for the delivery worker only. */
  openSecret(sealed: string | null): string | undefined {
    return sealed === null ? undefined : this.secretBox.open(sealed);
  }

  private async row(db: Database['db'] | Tx, tenantId: string, id: string, lock = false): Promise<Selectable<EventStreamsTable>> {
    const row = await db
      .selectFrom('event_streams')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .$if(lock && this.database.dialect === 'postgres', (q) => q.forUpdate())
      .executeTakeFirst();
    if (!row) throw streamNotFound();
    return row;
  }

  /**
   * Everything about a destination that needs no stored stream, DNS included: run before any
   * transaction opens, so a slow resolver never holds a lock.
   */
  private async checkWebhook(input: Destination): Promise<{ endpoint: string; auth: Authorization }> {
    if (input.type !== 'webhook') {
      throw new ApiError(400, `Destination type '${input.type}' is not supported by this server; use 'webhook'.`, 'operation_not_supported');
    }
    const { webhook_endpoint: endpoint, webhook_authorization: auth } = input.configuration;
    if (endpoint === undefined) {
      throw badRequest.body("Payload validation error: 'Missing required property: webhook_endpoint' on property destination.configuration.");
    }
    if (auth === undefined) {
      throw badRequest.body("Payload validation error: 'Missing required property: webhook_authorization' on property destination.configuration.");
    }
    await this.checkEndpoint(endpoint);
    return { endpoint, auth };
  }

  /**
   * The stored secret is kept when the PATCH leaves it out only while it would still go where it was
   * given: the same method and the same origin. Anyone allowed to update a stream must not be able to
   * send its secret to an address of their choosing without knowing it.
   */
  private sealDestination(
    { endpoint, auth }: { endpoint: string; auth: Authorization },
    current: Selectable<EventStreamsTable> | undefined,
  ): { destination: PublicDestination; secret: string | null } {
    const stored = current ? (JSON.parse(current.destination) as PublicDestination).configuration : undefined;
    const kept = stored?.webhook_authorization.method === auth.method && current?.secret ? current.secret : null;
    const missing = (name: string, why?: string) => {
      const where = `on property destination.configuration.webhook_authorization${why === undefined ? '' : `: ${why}`}`;
      return badRequest.body(`Payload validation error: 'Missing required property: ${name}' ${where}.`);
    };
    const sealed = (secret: string | undefined, name: string): string => {
      if (secret !== undefined) return this.secretBox.seal(secret);
      if (kept === null) throw missing(name);
      const [from, to] = [originOf(stored!.webhook_endpoint), originOf(endpoint)];
      if (from === to) return kept;
      const why = `the stored ${name} is only sent to the origin it was given for (${from})`;
      throw missing(name, `${why}; send it again to move webhook_endpoint to ${to}`);
    };
    let publicAuth: Record<string, string>;
    let secret: string;
    switch (auth.method) {
      case 'bearer':
        publicAuth = { method: 'bearer' };
        secret = sealed(auth.token, 'token');
        break;
      case 'basic':
        if (auth.username === undefined) throw missing('username');
        publicAuth = { method: 'basic', username: auth.username };
        secret = sealed(auth.password, 'password');
        break;
      case 'custom_header':
        if (auth.header_key === undefined) throw missing('header_key');
        if (RESERVED_HEADERS.has(auth.header_key.toLowerCase()) || auth.header_key.toLowerCase().startsWith('proxy-')) {
          throw badRequest.body(
            `Payload validation error: 'header_key ${auth.header_key} is set by the server itself and cannot carry the secret' ` +
            'on property destination.configuration.webhook_authorization.',
          );
        }
        publicAuth = { method: 'custom_header', header_key: auth.header_key };
        secret = sealed(auth.header_value, 'header_value');
        break;
    }
    return { destination: { type: 'webhook', configuration: { webhook_endpoint: endpoint, webhook_authorization: publicAuth } }, secret };
  }

  /** https:// only, at public addresses or allow-listed ones (see EndpointGuard); anything in development mode. */
  private async checkEndpoint(endpoint: string): Promise<void> {
    const refuse = (reason: string) =>
      badRequest.body(`Payload validation error: '${reason}' on property destination.configuration.webhook_endpoint (URL of the webhook).`);
    const pattern = () => refuse(`String does not match pattern ^https://.*: ${endpoint}`);
    let url: URL;
    try {
      url = new URL(endpoint);
    } catch {
      throw pattern();
    }
    const { guard } = this.options;
    if (guard === undefined) {
      if (url.protocol !== 'https:' && url.protocol !== 'http:') throw pattern();
      return;
    }
    if (url.protocol !== 'https:') throw pattern();
    try {
      await guard.check(url.hostname);
    } catch (error) {
      if (error instanceof EndpointRefused) throw refuse(`Webhook endpoints must be public: ${error.message}`);
      if (error instanceof EndpointUnresolved) throw refuse(`Webhook endpoint ${error.message}`);
      throw error;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Signing secrets (Standard Webhooks; a Tenantry extension)

  async signingSecrets(tenantId: string, streamId: string): Promise<SigningSecretList> {
    const row = await this.row(this.database.db, tenantId, streamId);
    return { signing_secrets: live(this.openSigning(row.signing_secrets), now()).map(withoutSecret) };
  }

  /** A new current secret, returned this once; the one it replaces keeps signing for the overlap. */
  async createSigningSecret(tenantId: string, streamId: string, input: CreateSigningSecretBody): Promise<SigningSecretCreated> {
    return this.database.db.transaction().execute(async (trx) => {
      const row = await this.row(trx, tenantId, streamId, true);
      const at = now();
      const fresh = newSigningSecret(at);
      const secrets = rotate(this.openSigning(row.signing_secrets), fresh, at, input.overlap_seconds ?? DEFAULT_SIGNING_OVERLAP_SECONDS);
      await this.storeSigning(trx, tenantId, streamId, secrets);
      return { id: fresh.id, secret: fresh.secret, created_at: fresh.created_at };
    });
  }

  async deleteSigningSecret(tenantId: string, streamId: string, secretId: string): Promise<void> {
    await this.database.db.transaction().execute(async (trx) => {
      const row = await this.row(trx, tenantId, streamId, true);
      const secrets = live(this.openSigning(row.signing_secrets), now());
      if (!secrets.some((s) => s.id === secretId)) throw signingSecretNotFound();
      await this.storeSigning(trx, tenantId, streamId, without(secrets, secretId));
    });
  }

  /** Deliveries go unsigned from now on. */
  async deleteSigningSecrets(tenantId: string, streamId: string): Promise<void> {
    const updated = await this.database.db
      .updateTable('event_streams')
      .set({ signing_secrets: null })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', streamId)
      .executeTakeFirst();
    if (updated.numUpdatedRows === 0n) throw streamNotFound();
  }

  /** A stream's stored signing secrets, newest first, expired ones included (see `live`); none: unsigned. */
  openSigning(sealed: string | null): StoredSigningSecret[] {
    return sealed === null ? [] : (JSON.parse(this.secretBox.open(sealed)) as StoredSigningSecret[]);
  }

  private async storeSigning(trx: Tx, tenantId: string, streamId: string, secrets: StoredSigningSecret[]): Promise<void> {
    const sealed = secrets.length === 0 ? null : this.secretBox.seal(JSON.stringify(secrets));
    await trx.updateTable('event_streams').set({ signing_secrets: sealed }).where('tenant_id', '=', tenantId).where('id', '=', streamId).execute();
  }

  // ---------------------------------------------------------------------------------------------
  // Outbox

  /**
   * Writes each change's event and one pending delivery per enabled stream subscribed to its type,
   * inside the caller's transaction: the changes and their events commit (or roll back) together.
   * A batch (an import of thousands of users) reads each tenant's streams once and is written in
   * multi-row inserts; a change no stream subscribes to writes nothing.
   */
  async record(trx: Tx, inputs: readonly EventInput[]): Promise<void> {
    const events: Array<Selectable<EventsTable>> = [];
    const deliveries: Array<Selectable<DeliveriesTable>> = [];
    const byTenant = new Map<string, EventInput[]>();
    for (const input of inputs) {
      const ofTenant = byTenant.get(input.tenantId);
      if (ofTenant) ofTenant.push(input);
      else byTenant.set(input.tenantId, [input]);
    }
    for (const [tenantId, ofTenant] of byTenant) {
      const streams = await trx
        .selectFrom('event_streams')
        .select(['id', 'subscriptions'])
        .where('tenant_id', '=', tenantId)
        .where('status', '=', 'enabled')
        .execute();
      if (streams.length === 0) continue;
      // Event type → the streams subscribed to it, each once.
      const subscribed = new Map<string, Set<string>>();
      for (const stream of streams) {
        for (const { event_type } of JSON.parse(stream.subscriptions) as Array<{ event_type: string }>) {
          const ids = subscribed.get(event_type) ?? new Set<string>();
          subscribed.set(event_type, ids.add(stream.id));
        }
      }
      let source: string | undefined;
      for (const input of ofTenant) {
        const targets = subscribed.get(input.type);
        if (targets === undefined) continue;
        source ??= sourceFor((await trx.selectFrom('tenants').select('domain').where('id', '=', tenantId).executeTakeFirstOrThrow()).domain);
        const at = now();
        const id = newId.event();
        events.push({ id, tenant_id: tenantId, type: input.type, time: at, source, data: JSON.stringify(input.data), purpose: null });
        for (const streamId of targets) deliveries.push(newDelivery(streamId, id, input.type, at));
      }
    }
    if (events.length === 0) return;
    await insertInSlices(trx, 'events', events);
    await insertInSlices(trx, 'deliveries', deliveries);
    await this.queued(trx);
  }

  async test(tenantId: string, streamId: string, input: TestBody): Promise<Delivery> {
    return this.database.db.transaction().execute(async (trx) => {
      const stream = await this.row(trx, tenantId, streamId);
      if (stream.status !== 'enabled') throw conflict('Test events are not delivered to disabled event streams.');
      const tenant = await trx.selectFrom('tenants').select('domain').where('id', '=', tenantId).executeTakeFirstOrThrow();
      const at = now();
      const event = {
        id: newId.event(), tenant_id: tenantId, type: input.event_type, time: at, source: sourceFor(tenant.domain),
        data: JSON.stringify(input.data ?? sampleData(input.event_type)), purpose: 'test',
      };
      await trx.insertInto('events').values(event).execute();
      await trx.insertInto('deliveries').values(newDelivery(streamId, event.id, input.event_type, at)).execute();
      await this.queued(trx);
      return { id: event.id, event_stream_id: streamId, event_type: input.event_type, status: 'pending', attempts: [], event: envelope(event, streamId) };
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Deliveries log and redelivery

  async deliveries(tenantId: string, streamId: string, query: DeliveriesQuery): Promise<{ deliveries: Delivery[]; next?: string }> {
    await this.row(this.database.db, tenantId, streamId);
    const statuses = list(query.statuses);
    const types = list(query.event_types);
    const take = query.take ?? DEFAULT_TAKE;
    // Only failed deliveries are logged (the original's "delivery failure" list).
    if (statuses && !statuses.includes('failed')) return { deliveries: [] };
    let q = this.database.db.selectFrom('deliveries').selectAll().where('stream_id', '=', streamId).where('status', '=', 'failed');
    if (types) q = q.where('event_type', 'in', types);
    if (query.date_from !== undefined) q = q.where('event_time', '>=', isoMs(query.date_from));
    if (query.date_to !== undefined) q = q.where('event_time', '<', isoMs(query.date_to));
    if (query.from !== undefined) q = q.where('event_id', '>', decodeCursor(query.from, (id) => idPattern.event.test(id)));
    const rows = await q.orderBy('event_id').limit(take + 1).execute();
    const page = rows.slice(0, take);
    const last = page[page.length - 1];
    return { deliveries: await this.present(page), ...(rows.length > take && last ? { next: encodeCursor(last.event_id) } : {}) };
  }

  async delivery(tenantId: string, streamId: string, eventId: string): Promise<Delivery> {
    await this.row(this.database.db, tenantId, streamId);
    const row = await this.database.db
      .selectFrom('deliveries')
      .selectAll()
      .where('stream_id', '=', streamId)
      .where('event_id', '=', eventId)
      .executeTakeFirst();
    if (!row) throw eventNotFound();
    const [delivery] = await this.present([row]);
    return delivery!;
  }

  /**
   * Queues every failed delivery matching the filter again: one INSERT … SELECT of the `retrying`
   * attempt rows and one UPDATE, in one transaction; no delivery is loaded into memory.
   */
  async redeliver(tenantId: string, streamId: string, filter: RedeliverBody): Promise<void> {
    const at = now();
    await this.database.db.transaction().execute(async (trx) => {
      await this.row(trx, tenantId, streamId, true);
      const matching = (eb: ExpressionBuilder<Schema, 'deliveries'>) => {
        const conditions = [eb('stream_id', '=', streamId), eb('status', '=', 'failed')];
        if (filter.event_types && filter.event_types.length > 0) conditions.push(eb('event_type', 'in', filter.event_types));
        if (filter.date_from !== undefined) conditions.push(eb('event_time', '>=', isoMs(filter.date_from)));
        if (filter.date_to !== undefined) conditions.push(eb('event_time', '<', isoMs(filter.date_to)));
        return eb.and(conditions);
      };
      if (filter.statuses && !filter.statuses.includes('failed')) return;
      await this.queueAgain(trx, matching, at);
    });
  }

  async redeliverOne(tenantId: string, streamId: string, eventId: string): Promise<void> {
    const at = now();
    await this.database.db.transaction().execute(async (trx) => {
      await this.row(trx, tenantId, streamId, true);
      const row = await trx
        .selectFrom('deliveries')
        .select('status')
        .where('stream_id', '=', streamId)
        .where('event_id', '=', eventId)
        .$if(this.database.dialect === 'postgres', (q) => q.forUpdate())
        .executeTakeFirst();
      if (!row) throw eventNotFound();
      if (row.status !== 'failed') throw notRedeliverable();
      await this.queueAgain(trx, (eb) => eb.and([eb('stream_id', '=', streamId), eb('event_id', '=', eventId), eb('status', '=', 'failed')]), at);
    });
  }

  private async queueAgain(
    trx: Tx,
    matching: (eb: ExpressionBuilder<Schema, 'deliveries'>) => ReturnType<ExpressionBuilder<Schema, 'deliveries'>['and']>,
    at: string,
  ): Promise<void> {
    await trx
      .insertInto('delivery_attempts')
      .columns(['stream_id', 'event_id', 'seq', 'status', 'timestamp'])
      .expression(
        trx
          .selectFrom('deliveries')
          .select((eb) => [
            'stream_id',
            'event_id',
            eb('attempt_seq', '+', 1).as('seq'),
            sql<string>`${'retrying'}`.as('status'),
            sql<string>`${at}`.as('timestamp'),
          ])
          .where(matching),
      )
      .execute();
    await trx
      .updateTable('deliveries')
      .set((eb) => ({
        status: 'pending',
        attempt_count: 0,
        attempt_seq: eb('attempt_seq', '+', 1),
        next_attempt_at: at,
        claimed_until: null,
        updated_at: at,
      }))
      .where(matching)
      .execute();
    await this.queued(trx);
  }

  private async present(rows: Array<Selectable<DeliveriesTable>>): Promise<Delivery[]> {
    if (rows.length === 0) return [];
    const streamId = rows[0]!.stream_id;
    const ids = rows.map((r) => r.event_id);
    const [events, attempts] = await Promise.all([
      this.database.db.selectFrom('events').selectAll().where('id', 'in', ids).execute(),
      this.database.db
        .selectFrom('delivery_attempts')
        .selectAll()
        .where('stream_id', '=', streamId)
        .where('event_id', 'in', ids)
        .where('status', 'in', ['failed', 'retrying'])
        .orderBy('seq')
        .execute(),
    ]);
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

function newDelivery(streamId: string, eventId: string, type: string, at: string): Selectable<DeliveriesTable> {
  return {
    stream_id: streamId, event_id: eventId, event_type: type as EventType, event_time: at, status: 'pending',
    attempt_count: 0, attempt_seq: 0, next_attempt_at: at, claimed_until: null, updated_at: at,
  };
}

function presentAttempt(a: Selectable<DeliveryAttemptsTable>): Attempt {
  return {
    status: a.status,
    ...(a.error_message === null ? {} : { error_message: a.error_message }),
    timestamp: a.timestamp,
    ...(a.duration === null ? {} : { duration: Number(a.duration) }),
  };
}

/**
 * Where a request to the endpoint goes: scheme, host and port as WHATWG URL (and so the sender) reads
 * them — host lower-cased, default port dropped, userinfo ignored. A trailing dot makes another host.
 */
const originOf = (endpoint: string): string => new URL(endpoint).origin;

function list(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const values = raw.split(',').map((v) => v.trim()).filter((v) => v !== '');
  return values.length === 0 ? undefined : values;
}

function present(row: Selectable<EventStreamsTable>): EventStream {
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

export type { Authorization };
