import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { EndpointGuard } from '../../../src/modules/event-streams/delivery/endpoint-guard.ts';
import { ApiError } from '../../../src/http/errors.ts';
import { EventStreamService } from '../../../src/modules/event-streams/service.ts';
import { importUsers } from '../../../src/modules/users/import.ts';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { startWebhookReceiver, waitUntil, type WebhookReceiver } from '../../helpers/webhook-receiver.ts';

const DELIVERY_ENV = {
  DELIVERY_ALLOW_HTTP: 'true',
  DELIVERY_RETRY_SCHEDULE_MS: '50,100,200',
  DELIVERY_POLL_MS: '20',
  DELIVERY_TIMEOUT_MS: '2000',
};

for (const kind of databaseKinds()) {
  describe(`event streams (${kind})`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    const streamsToDelete: string[] = [];
    before(async () => {
      server = await startTestServer(kind, DELIVERY_ENV);
    });
    after(() => server.close());
    afterEach(async () => {
      for (const id of streamsToDelete.splice(0))
        await server.request({ method: 'DELETE', url: `/api/v2/event-streams/${id}` });
      await receiver?.close();
    });

    const webhook = (
      url: string,
      auth: Record<string, string> = { method: 'bearer', token: 'secret-bearer-token' },
    ) => ({
      type: 'webhook',
      configuration: { webhook_endpoint: url, webhook_authorization: auth },
    });
    const createStream = async (payload: Record<string, unknown>) => {
      const response = await server.request({ method: 'POST', url: '/api/v2/event-streams', payload });
      assert.equal(response.statusCode, 201, response.body);
      const stream = response.json();
      streamsToDelete.push(stream.id);
      return stream;
    };
    let userCount = 0;
    const createUser = (email = `user${++userCount}-${Date.now()}@example.com`) =>
      server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: { connection: 'Username-Password-Authentication', password: 'correct horse battery', email },
      });
    const deliveryRow = (streamId: string, eventId: string) =>
      server.services.database.db
        .selectFrom('deliveries')
        .selectAll()
        .where('stream_id', '=', streamId)
        .where('event_id', '=', eventId)
        .executeTakeFirst();
    const attemptRows = (streamId: string, eventId: string) =>
      server.services.database.db
        .selectFrom('delivery_attempts')
        .selectAll()
        .where('stream_id', '=', streamId)
        .where('event_id', '=', eventId)
        .orderBy('seq')
        .execute();
    const waitForStatus = async (streamId: string, eventId: string, status: string) =>
      waitUntil(
        async () => (await deliveryRow(streamId, eventId))?.status === status,
        5000,
        () => `delivery ${eventId} to become ${status}`,
      );

    /** A stream whose receiver refused its first two events (400: failed at once, no retry), then accepts. */
    const streamWithTwoFailedEvents = async (name: string) => {
      receiver = await startWebhookReceiver();
      receiver.program([400, 400], 204);
      const stream = await createStream({
        name,
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url),
      });
      await createUser();
      await createUser();
      await receiver.waitFor((r) => r.length >= 2);
      const ids = receiver.requests.map((r) => r.json().id as string);
      for (const id of ids) await waitForStatus(stream.id, id, 'failed');
      return { stream, ids };
    };

    it('creates, reads, lists, updates and deletes streams; secrets are write-only', async () => {
      receiver = await startWebhookReceiver();
      const created = await createStream({
        name: 'crud-stream',
        subscriptions: [{ event_type: 'user.updated' }],
        destination: webhook(receiver.url),
      });
      assert.match(created.id, /^est_[1-9A-HJ-NP-Za-km-z]{22}$/);
      assert.deepEqual(Object.keys(created), [
        'id',
        'status',
        'name',
        'subscriptions',
        'created_at',
        'updated_at',
        'destination',
      ]);
      assert.equal(created.status, 'enabled');
      assert.deepEqual(created.destination, {
        type: 'webhook',
        configuration: { webhook_endpoint: receiver.url, webhook_authorization: { method: 'bearer' } },
      });
      const row = await server.services.database.db
        .selectFrom('event_streams')
        .selectAll()
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      assert.ok(
        !row.secret!.includes('secret-bearer-token') && !row.destination.includes('secret-bearer-token'),
        'sealed at rest',
      );

      const got = await server.request({ url: `/api/v2/event-streams/${created.id}` });
      assert.equal(got.statusCode, 200);
      assert.deepEqual(got.json(), created);
      assert.ok(!got.body.includes('secret-bearer-token'));

      const second = await createStream({
        name: 'crud-second',
        status: 'disabled',
        subscriptions: [{ event_type: 'user.deleted' }],
        destination: webhook(receiver.url, { method: 'basic', username: 'admin', password: 'pw-secret' }),
      });
      assert.equal(second.status, 'disabled');
      assert.deepEqual(second.destination.configuration.webhook_authorization, { method: 'basic', username: 'admin' });
      const dup = await server.request({
        method: 'POST',
        url: '/api/v2/event-streams',
        payload: { name: 'crud-stream', destination: webhook(receiver.url) },
      });
      assert.equal(dup.statusCode, 409);

      const page1 = await server.request({ url: '/api/v2/event-streams?take=1' });
      assert.equal(page1.statusCode, 200);
      assert.equal(page1.json().eventStreams.length, 1);
      assert.equal(typeof page1.json().next, 'string');
      const page2 = await server.request({ url: `/api/v2/event-streams?take=1&from=${page1.json().next}` });
      assert.equal(page2.json().eventStreams.length, 1);
      assert.notEqual(page2.json().eventStreams[0].id, page1.json().eventStreams[0].id);
      const all = await server.request({ url: '/api/v2/event-streams' });
      assert.equal(all.json().next, undefined);

      const patched = await server.request({
        method: 'PATCH',
        url: `/api/v2/event-streams/${created.id}`,
        payload: { subscriptions: [{ event_type: 'user.created' }], status: 'disabled' },
      });
      assert.equal(patched.statusCode, 200, patched.body);
      assert.deepEqual(patched.json().subscriptions, [{ event_type: 'user.created' }]);
      assert.equal(patched.json().status, 'disabled');
      assert.equal(patched.json().created_at, created.created_at);
      assert.ok(patched.json().updated_at > created.updated_at);

      const bad = await server.request({ url: '/api/v2/event-streams/est_invalid_id_1234567890' });
      assert.equal(bad.statusCode, 400);
      assert.deepEqual(bad.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message:
          "Path validation error: 'Object didn't pass validation for format event-stream-id: est_invalid_id_1234567890' on property id (Unique identifier for the event stream).",
        errorCode: 'invalid_uri',
      });
      const missing = await server.request({ url: '/api/v2/event-streams/est_1111111111111111111111' });
      assert.equal(missing.statusCode, 404);
      assert.deepEqual(missing.json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'The requested stream does not exist.',
      });

      const deleted = await server.request({ method: 'DELETE', url: `/api/v2/event-streams/${second.id}` });
      assert.equal(deleted.statusCode, 204);
      assert.equal((await server.request({ url: `/api/v2/event-streams/${second.id}` })).statusCode, 404);
    });

    it('checks scopes and refuses plain-http or loopback endpoints unless the development setting allows them', async () => {
      const { token } = await server.clientWithScopes(['read:event_streams']);
      const refused = await server.request({
        method: 'POST',
        url: '/api/v2/event-streams',
        token,
        payload: { destination: webhook('https://example.com/hook') },
      });
      assert.equal(refused.statusCode, 403);
      assert.equal(refused.json().message, 'Insufficient scope, expected any of: create:event_streams');
      // example.com is allow-listed by name, so checking it asks no DNS server.
      const guard = new EndpointGuard({ allowedHosts: ['example.com'], dnsServers: [] });
      const strict = new EventStreamService(
        server.services.database,
        server.services.secretBox,
        server.services.tenants,
        {
          guard,
          queued: async () => undefined,
          maxPerTenant: server.services.config.eventStreamsMax,
          redeliveryChunkRows: server.services.config.eventStreamRedeliveryChunkRows,
        },
      );
      for (const endpoint of ['http://example.com/hook', 'https://127.0.0.1/hook', 'https://localhost/hook']) {
        await assert.rejects(
          strict.streams.create(server.tenant.id, { destination: webhook(endpoint) as never }),
          (e: ApiError) => e.statusCode === 400 && e.errorCode === 'invalid_body',
        );
      }
      const ok = await strict.streams.create(server.tenant.id, {
        name: 'strict-ok',
        destination: webhook('https://example.com/hook') as never,
      });
      streamsToDelete.push(ok.id);
      const noSecret = await server.request({
        method: 'POST',
        url: '/api/v2/event-streams',
        payload: { destination: webhook('https://example.com/hook', { method: 'bearer' }) },
      });
      assert.equal(noSecret.statusCode, 400);
    });

    it("delivers a user.created event as a CloudEvents envelope with the stream's authorization", async () => {
      receiver = await startWebhookReceiver();
      const stream = await createStream({
        name: 'deliver',
        subscriptions: [{ event_type: 'user.created' }, { event_type: 'user.deleted' }],
        destination: webhook(receiver.url),
      });
      const created = await createUser();
      assert.equal(created.statusCode, 201);
      const user = created.json();
      const [request] = await receiver.waitFor((r) => r.length >= 1);
      assert.equal(request!.method, 'POST');
      assert.equal(request!.headers.authorization, 'Bearer secret-bearer-token');
      assert.match(String(request!.headers['content-type']), /^application\/json/);
      const event = request!.json();
      assert.deepEqual(Object.keys(event), [
        'id',
        'source',
        'specversion',
        'type',
        'time',
        'data',
        'a0tenant',
        'a0stream',
      ]);
      assert.match(event.id, /^evt_[1-9A-HJ-NP-Za-km-z]{22}$/);
      assert.equal(event.source, `urn:svc:${server.domain}`);
      assert.equal(event.specversion, '1.0');
      assert.equal(event.type, 'user.created');
      assert.equal(event.a0tenant, server.tenant.id);
      assert.equal(event.a0stream, stream.id);
      assert.deepEqual(event.data.object, user);
      await waitForStatus(stream.id, event.id, 'delivered');

      const removed = await server.request({
        method: 'DELETE',
        url: `/api/v2/users/${encodeURIComponent(user.user_id)}`,
      });
      assert.equal(removed.statusCode, 204);
      const requests = await receiver.waitFor((r) => r.length >= 2);
      assert.equal(requests[1]!.json().type, 'user.deleted');
      assert.equal(requests[1]!.json().data.object.user_id, user.user_id);
    });

    it('sends basic and custom-header credentials', async () => {
      receiver = await startWebhookReceiver();
      await createStream({
        name: 'basic',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url, { method: 'basic', username: 'admin', password: 'p4ss' }),
      });
      await createStream({
        name: 'custom',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url, {
          method: 'custom_header',
          header_key: 'x-webhook-secret',
          header_value: 'v4lue',
        }),
      });
      await createUser();
      const requests = await receiver.waitFor((r) => r.length >= 2);
      assert.ok(
        requests.some((r) => r.headers.authorization === `Basic ${Buffer.from('admin:p4ss').toString('base64')}`),
      );
      assert.ok(requests.some((r) => r.headers['x-webhook-secret'] === 'v4lue'));
      assert.equal(requests[0]!.json().id, requests[1]!.json().id, 'one event, one id, on every stream');
    });

    it('retries a 500 and records every attempt; the same event id is sent each time', async () => {
      receiver = await startWebhookReceiver();
      receiver.program([500, 503], 204);
      const stream = await createStream({
        name: 'retry',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url),
      });
      await createUser();
      const requests = await receiver.waitFor((r) => r.length >= 3);
      const ids = new Set(requests.map((r) => r.json().id));
      assert.equal(ids.size, 1);
      const [eventId] = [...ids] as string[];
      await waitForStatus(stream.id, eventId!, 'delivered');
      const attempts = await attemptRows(stream.id, eventId!);
      assert.deepEqual(
        attempts.map((a) => a.status),
        ['failed', 'failed', 'delivered'],
      );
      assert.match(attempts[0]!.error_message!, /500/);
      assert.ok(requests[1]!.at - requests[0]!.at >= 45, 'waits the first retry delay');
      assert.deepEqual((await server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries` })).json(), {
        deliveries: [],
      });
    });

    it('gives up after four failed attempts and lists the delivery as failed', async () => {
      receiver = await startWebhookReceiver();
      receiver.program([], 502);
      const stream = await createStream({
        name: 'exhaust',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url),
      });
      await createUser();
      const [first] = await receiver.waitFor((r) => r.length >= 1);
      const eventId = first!.json().id as string;
      await waitForStatus(stream.id, eventId, 'failed');
      assert.equal(receiver.requests.length, 4);
      const listed = await server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries` });
      assert.equal(listed.statusCode, 200);
      const [delivery] = listed.json().deliveries;
      assert.equal(delivery.id, eventId);
      assert.equal(delivery.status, 'failed');
      assert.equal(delivery.attempts.length, 4);
      for (const a of delivery.attempts) {
        assert.equal(a.status, 'failed');
        assert.equal(typeof a.duration, 'number');
        assert.ok(a.error_message.length <= 54);
      }
    });

    it("bounds a page of failed deliveries by its events' size, and the next page resumes after it", async () => {
      receiver = await startWebhookReceiver();
      receiver.program([], 400);
      const stream = await createStream({
        name: 'large',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url),
      });
      // Four events of about 0.4 MB each: two fit under the page's 1 MiB, three do not.
      const large = 400_000;
      for (let i = 0; i < 4; i++) {
        const created = await server.request({
          method: 'POST',
          url: '/api/v2/users',
          payload: {
            connection: 'Username-Password-Authentication',
            password: 'correct horse battery',
            email: `large${i}-${Date.now()}@example.com`,
            user_metadata: { blob: 'x'.repeat(large) },
          },
        });
        assert.equal(created.statusCode, 201, created.body);
      }
      assert.equal((await createUser()).statusCode, 201);
      const requests = await receiver.waitFor((r) => r.length >= 5);
      for (const r of requests) await waitForStatus(stream.id, r.json().id as string, 'failed');

      const pages: Array<{ deliveries: Array<{ id: string; event: { data: unknown } }>; next?: string }> = [];
      let from: string | undefined;
      do {
        const url = `/api/v2/event-streams/${stream.id}/deliveries?take=100${from ? `&from=${from}` : ''}`;
        const response = await server.request({ url });
        assert.equal(response.statusCode, 200, response.body);
        pages.push(response.json());
        from = pages[pages.length - 1]!.next;
      } while (from !== undefined && pages.length < 10);

      const sizes = pages.map((p) => p.deliveries.map((d) => JSON.stringify(d.event.data).length));
      assert.ok(pages.length >= 2, `one page held ${sizes[0]!.length} events of ${sizes[0]!.join(', ')} characters`);
      for (const page of sizes)
        assert.ok(page.length === 1 || page.reduce((a, b) => a + b, 0) <= 1024 * 1024, `a page of ${page.join(', ')}`);
      const listed = pages.flatMap((p) => p.deliveries.map((d) => d.id));
      assert.deepEqual([...listed].sort(), requests.map((r) => r.json().id as string).sort(), 'each one listed once');
      assert.equal(pages[pages.length - 1]!.next, undefined);
    });

    it('fails a 4xx at once, logs it, and redelivers it on request with a retrying attempt', async () => {
      receiver = await startWebhookReceiver();
      receiver.program([400], 204);
      const stream = await createStream({
        name: 'reject',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url),
      });
      await createUser();
      const [first] = await receiver.waitFor((r) => r.length >= 1);
      const eventId = first!.json().id as string;
      await waitForStatus(stream.id, eventId, 'failed');
      assert.equal(receiver.requests.length, 1, 'no retries after a 4xx');

      const listed = (
        await server.request({
          url: `/api/v2/event-streams/${stream.id}/deliveries?statuses=failed&event_types=user.created`,
        })
      ).json();
      assert.equal(listed.deliveries.length, 1);
      assert.deepEqual(Object.keys(listed.deliveries[0]), [
        'id',
        'event_stream_id',
        'event_type',
        'status',
        'attempts',
        'event',
      ]);
      assert.equal(listed.deliveries[0].event.id, eventId);
      assert.deepEqual(
        (
          await server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries?event_types=user.deleted` })
        ).json(),
        { deliveries: [] },
      );
      const future = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      assert.equal(
        (await server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries?date_from=${future}` })).json()
          .deliveries.length,
        0,
      );
      assert.equal(
        (await server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries?date_to=${future}` })).json()
          .deliveries.length,
        1,
      );
      const single = await server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries/${eventId}` });
      assert.equal(single.statusCode, 200);
      assert.deepEqual(single.json(), listed.deliveries[0]);
      const unknown = await server.request({
        url: `/api/v2/event-streams/${stream.id}/deliveries/evt_1111111111111111111111`,
      });
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.json().message, 'The event does not exist.');

      const again = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${stream.id}/redeliver/${eventId}`,
      });
      assert.equal(again.statusCode, 202);
      assert.deepEqual(again.json(), {});
      const requests = await receiver.waitFor((r) => r.length >= 2);
      assert.equal(requests[1]!.json().id, eventId);
      await waitForStatus(stream.id, eventId, 'delivered');
      assert.deepEqual(
        (await attemptRows(stream.id, eventId)).map((a) => a.status),
        ['failed', 'retrying', 'delivered'],
      );
      const twice = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${stream.id}/redeliver/${eventId}`,
      });
      assert.equal(twice.statusCode, 409);
      assert.equal(twice.json().message, 'The event is not in a state that allows redelivery.');
    });

    it('redelivers every failed delivery matching a filter', async () => {
      const { stream, ids } = await streamWithTwoFailedEvents('bulk');
      const filter = { statuses: ['failed'], event_types: ['user.created'], date_from: '2020-01-01T00:00:00Z' };
      const response = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${stream.id}/redeliver`,
        payload: filter,
      });
      assert.equal(response.statusCode, 202);
      assert.deepEqual(response.json(), filter);
      await receiver.waitFor((r) => r.length >= 4);
      for (const id of ids) {
        await waitForStatus(stream.id, id, 'delivered');
        assert.deepEqual(
          (await attemptRows(stream.id, id)).map((a) => a.status),
          ['failed', 'retrying', 'delivered'],
        );
      }
      const empty = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${stream.id}/redeliver`,
        payload: {},
      });
      assert.equal(empty.statusCode, 202);
      assert.deepEqual(empty.json(), {});
    });

    it('counts the failed deliveries a redelivery would queue, and reports attempts per bucket as the original, backlog and health', async () => {
      const { stream, ids } = await streamWithTwoFailedEvents('stats');

      const count = (query: string) =>
        server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries/count${query}` });
      assert.deepEqual((await count('')).json(), { count: 2 });
      assert.deepEqual((await count('?statuses=failed&event_types=user.created')).json(), { count: 2 });
      assert.deepEqual((await count('?event_types=user.deleted')).json(), { count: 0 });
      assert.deepEqual((await count('?statuses=delivered')).json(), { count: 0 });
      const future = new Date(Date.now() + 3600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      assert.deepEqual((await count(`?date_from=${future}`)).json(), { count: 0 });
      assert.equal((await count('?take=5')).statusCode, 400, 'paging has no meaning for a count');

      const stats = await server.request({ url: `/api/v2/event-streams/${stream.id}/stats` });
      assert.equal(stats.statusCode, 200, stats.body);
      const body = stats.json();
      // The original's keys in its order, then the backlog and health Tenantry adds.
      assert.deepEqual(Object.keys(body), ['id', 'name', 'window', 'buckets', 'metrics', 'backlog', 'health']);
      assert.deepEqual(Object.keys(body.window), ['date_from', 'date_to', 'bucket_interval']);
      for (const metric of body.metrics)
        assert.deepEqual(Object.keys(metric), ['name', 'window_total', 'type', 'data']);
      assert.deepEqual([body.id, body.name], [stream.id, 'stats']);
      assert.equal(body.window.bucket_interval.scale_factor, 86400, 'days over the 14 days of the default');
      const hour = 3600_000;
      assert.equal(Date.parse(body.window.date_to), Math.floor(Date.now() / hour) * hour + hour);
      assert.equal(Date.parse(body.window.date_to) - Date.parse(body.window.date_from), 14 * 24 * hour + hour);
      assert.ok(body.buckets.length === 15 || body.buckets.length === 16, body.buckets.length);
      for (const bucket of body.buckets) assert.match(bucket, /^\d{4}-\d\d-\d\dT00:00:00\.000Z$/);
      const metric = (answer: typeof body, name: string) =>
        answer.metrics.find((m: { name: string }) => m.name === name);
      const failed = metric(body, 'svc.event_streams.failed_deliveries');
      const delivered = metric(body, 'svc.event_streams.successful_deliveries');
      assert.deepEqual(
        body.metrics.map((m: { name: string }) => m.name),
        ['svc.event_streams.successful_deliveries', 'svc.event_streams.failed_deliveries'],
      );
      assert.equal(failed.window_total, 2);
      assert.equal(failed.type, 'sum');
      assert.equal(failed.data.length, body.buckets.length);
      assert.equal(failed.data.at(-1) + (failed.data.at(-2) ?? 0), 2, 'today (or yesterday, just past midnight)');
      assert.equal(delivered.window_total, 0);
      assert.deepEqual(body.backlog, { pending: 0 });
      assert.equal(body.health.consecutive_failures, 2);

      // Redelivered: the attempts that deliver appear in the same window, here in minute buckets.
      await server.request({ method: 'POST', url: `/api/v2/event-streams/${stream.id}/redeliver`, payload: {} });
      for (const id of ids) await waitForStatus(stream.id, id, 'delivered');
      const after = (await server.request({ url: `/api/v2/event-streams/${stream.id}/stats?scale_factor=60` })).json();
      assert.equal(after.window.bucket_interval.scale_factor, 60);
      assert.equal(after.buckets.length, 182, 'the 3 hours before now and the current minute, whole minutes');
      assert.equal(metric(after, 'svc.event_streams.successful_deliveries').window_total, 2);
      assert.equal(metric(after, 'svc.event_streams.failed_deliveries').window_total, 2);
      assert.equal(after.health.consecutive_failures, 0);
      assert.deepEqual((await count('')).json(), { count: 0 });

      // A window without attempts still lists its buckets, each 0.
      const past = await server.request({
        url: `/api/v2/event-streams/${stream.id}/stats?date_from=2020-01-01T00:00:00Z&date_to=2020-01-01T01:00:00Z`,
      });
      assert.deepEqual(past.json().buckets, ['2020-01-01T00:00:00.000Z', '2020-01-01T01:00:00.000Z']);
      assert.deepEqual(
        past.json().metrics.map((m: { data: number[] }) => m.data),
        [
          [0, 0],
          [0, 0],
        ],
      );
      for (const [query, message] of [
        ['date_from=2020-01-01T00:00:00Z&date_to=2020-02-01T01:00:00Z', /longer than 31 days/],
        ['scale_factor=60&date_from=2020-01-01T00:00:00Z&date_to=2020-01-02T00:01:00Z', /longer than 24 hours/],
        ['date_from=2020-01-02T00:00:00Z&date_to=2020-01-01T00:00:00Z', /date_from must be before date_to/],
        ['scale_factor=30', /scale_factor \(Tenantry: the bucket size in seconds, 60, 3600 or 86400/],
        ['scale_factor=3600.5', /scale_factor/],
        ['window=60', /window/],
      ] as const) {
        const refused = await server.request({ url: `/api/v2/event-streams/${stream.id}/stats?${query}` });
        assert.equal(refused.statusCode, 400, query);
        assert.equal(refused.json().errorCode, 'invalid_query_string', query);
        assert.match(refused.json().message, message, query);
      }
      // Offsets as clients outside UTC send them, milliseconds included: the same hour as 2020-01-01T00:00Z.
      const offset = await server.request({
        url: `/api/v2/event-streams/${stream.id}/stats?date_from=${encodeURIComponent('2020-01-01T01:00:00.000+01:00')}&date_to=${encodeURIComponent('2020-01-01T02:00:00+01:00')}`,
      });
      assert.equal(offset.statusCode, 200, offset.body);
      assert.deepEqual(
        [offset.json().window.date_from, offset.json().window.date_to],
        ['2020-01-01T00:00:00.000Z', '2020-01-01T01:00:00.000Z'],
      );
      // An offset without its colon passes the format but is no RFC 3339 time: said so, not "before date_to".
      const noColon = await server.request({
        url: `/api/v2/event-streams/${stream.id}/stats?date_from=${encodeURIComponent('2020-01-01T00:00:00+01')}`,
      });
      assert.equal(noColon.statusCode, 400);
      assert.match(noColon.json().message, /date_from must be an RFC 3339 date-time/);
      assert.equal(
        (await server.request({ url: '/api/v2/event-streams/est_1111111111111111111111/stats' })).statusCode,
        404,
      );
      // Another tenant's admin, on its own domain: the stream is not found, and nothing of it is shown.
      const otherTenant = await server.addTenant('other-stats', 'other-stats.test');
      const elsewhere = await server.app.inject({
        url: `/api/v2/event-streams/${stream.id}/stats`,
        headers: { host: 'other-stats.test', authorization: `Bearer ${otherTenant.token}` },
      });
      assert.equal(elsewhere.statusCode, 404);
      assert.deepEqual(elsewhere.json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'The requested stream does not exist.',
      });
      const reader = await server.clientWithScopes(['read:event_streams']);
      assert.equal(
        (await server.request({ url: `/api/v2/event-streams/${stream.id}/stats`, token: reader.token })).statusCode,
        200,
      );
      const other = await server.clientWithScopes(['read:users']);
      assert.equal(
        (await server.request({ url: `/api/v2/event-streams/${stream.id}/stats`, token: other.token })).statusCode,
        403,
      );
      assert.equal(
        (await server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries/count`, token: other.token }))
          .statusCode,
        403,
      );
    });

    it('takes a leap second as a window bound, and an event type repeated past the databases’ parameter limits', async () => {
      const { stream } = await streamWithTwoFailedEvents('leap-and-repeats');
      const base = `/api/v2/event-streams/${stream.id}`;
      // RFC 3339 allows 23:59:60, and so does the date-time format; Date.parse does not.
      const leap = '2016-12-31T23:59:60Z';
      const listed = await server.request({ url: `${base}/deliveries?date_to=${leap}` });
      assert.equal(listed.statusCode, 200, listed.body);
      assert.deepEqual(listed.json(), { deliveries: [] });
      const counted = await server.request({ url: `${base}/deliveries/count?date_from=${leap}` });
      assert.equal(counted.statusCode, 200, counted.body);
      assert.deepEqual(counted.json(), { count: 2 });
      const stats = await server.request({ url: `${base}/stats?date_from=2016-12-31T23:00:00Z&date_to=${leap}` });
      assert.equal(stats.statusCode, 200, stats.body);
      assert.equal(stats.json().window.date_to, '2017-01-01T00:00:00.000Z');
      const noneYet = await server.request({
        method: 'POST',
        url: `${base}/redeliver`,
        payload: { date_to: leap },
      });
      assert.equal(noneYet.statusCode, 202, noneYet.body);

      // 60,000 bound parameters: past SQLite's 32,766 and, doubled, PostgreSQL's 65,535.
      const repeated = Array.from({ length: 60_000 }, () => 'user.created');
      const many = await server.request({
        url: `${base}/deliveries/count?event_types=${repeated.slice(0, 150).join(',')}`,
      });
      assert.deepEqual(many.json(), { count: 2 });
      for (const types of [repeated, [...repeated, ...repeated.slice(0, 8_000)]]) {
        const redelivered = await server.request({
          method: 'POST',
          url: `${base}/redeliver`,
          payload: { event_types: types },
        });
        assert.equal(redelivered.statusCode, 202, redelivered.body.slice(0, 300));
      }
    });

    it('sends test events: 202 with a pending delivery record, then delivered', async () => {
      receiver = await startWebhookReceiver();
      const stream = await createStream({
        name: 'tests',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url),
      });
      const response = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${stream.id}/test`,
        payload: { event_type: 'user.updated' },
      });
      assert.equal(response.statusCode, 202, response.body);
      const body = response.json();
      assert.equal(body.id, body.event.id);
      assert.equal(body.event_stream_id, stream.id);
      assert.equal(body.event_type, 'user.updated');
      assert.equal(body.status, 'pending');
      assert.deepEqual(body.attempts, []);
      assert.equal(body.event.a0purpose, 'test');
      assert.equal(typeof body.event.data.object.user_id, 'string');
      // The original's test response orders the event's keys otherwise than its deliveries do.
      assert.deepEqual(Object.keys(body.event), [
        'specversion',
        'id',
        'source',
        'type',
        'time',
        'data',
        'a0purpose',
        'a0stream',
        'a0tenant',
      ]);
      const [request] = await receiver.waitFor((r) => r.length >= 1);
      assert.deepEqual(request!.json(), body.event);
      assert.deepEqual(Object.keys(request!.json()), [
        'id',
        'source',
        'specversion',
        'type',
        'time',
        'data',
        'a0tenant',
        'a0stream',
        'a0purpose',
      ]);

      const custom = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${stream.id}/test`,
        payload: { event_type: 'user.created', data: { object: { hello: 'world' } } },
      });
      assert.equal(custom.statusCode, 202);
      const requests = await receiver.waitFor((r) => r.length >= 2);
      assert.deepEqual(requests[1]!.json().data, { object: { hello: 'world' } });
    });

    it('PATCH /users/{id} emits user.updated with the changed user', async () => {
      receiver = await startWebhookReceiver();
      await createStream({
        name: 'updates',
        subscriptions: [{ event_type: 'user.updated' }],
        destination: webhook(receiver.url),
      });
      const user = (await createUser()).json();
      const patched = await server.request({
        method: 'PATCH',
        url: `/api/v2/users/${encodeURIComponent(user.user_id)}`,
        payload: { given_name: 'Changed', user_metadata: { a: 1 } },
      });
      assert.equal(patched.statusCode, 200, patched.body);
      assert.equal(patched.json().given_name, 'Changed');
      const [request] = await receiver.waitFor((r) => r.length >= 1);
      assert.equal(request!.json().type, 'user.updated');
      assert.deepEqual(request!.json().data.object, patched.json());
      const { token } = await server.clientWithScopes(['read:users']);
      assert.equal(
        (
          await server.request({
            method: 'PATCH',
            url: `/api/v2/users/${encodeURIComponent(user.user_id)}`,
            token,
            payload: { given_name: 'x' },
          })
        ).statusCode,
        403,
      );
    });

    it("claims a delivery again once a crashed worker's lease has expired", async () => {
      receiver = await startWebhookReceiver();
      const stream = await createStream({
        name: 'lease',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url),
      });
      const db = server.services.database.db;
      // A lease far in the future, as a worker that claimed the delivery and died would leave.
      await server.services.database.db.transaction().execute(async (trx) => {
        await server.services.eventStreams.record(trx, [
          { tenantId: server.tenant.id, type: 'user.created', data: { object: { user_id: 'svc|lease' } } },
        ]);
        await trx
          .updateTable('deliveries')
          .set({ claimed_until: new Date(Date.now() + 300).toISOString() })
          .where('stream_id', '=', stream.id)
          .execute();
      });
      await new Promise((r) => setTimeout(r, 150));
      assert.equal(receiver.requests.length, 0, 'not sent while the lease runs');
      const [request] = await receiver.waitFor((r) => r.length >= 1);
      assert.equal(request!.json().data.object.user_id, 'svc|lease');
      const row = await db
        .selectFrom('deliveries')
        .selectAll()
        .where('stream_id', '=', stream.id)
        .executeTakeFirstOrThrow();
      await waitForStatus(stream.id, row.event_id, 'delivered');
    });

    it("records an event for every imported user, in the import batch's transaction, for the subscribed enabled streams only", async () => {
      receiver = await startWebhookReceiver();
      const created = await createStream({
        name: 'import-created',
        subscriptions: [{ event_type: 'user.created' }, { event_type: 'user.created' }],
        destination: webhook(receiver.url),
      });
      const both = await createStream({
        name: 'import-both',
        subscriptions: [{ event_type: 'user.deleted' }, { event_type: 'user.created' }],
        destination: webhook(`${receiver.url}/both`),
      });
      await createStream({
        name: 'import-deleted',
        subscriptions: [{ event_type: 'user.deleted' }],
        destination: webhook(`${receiver.url}/deleted`),
      });
      await createStream({
        name: 'import-disabled',
        status: 'disabled',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(`${receiver.url}/disabled`),
      });
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-import-'));
      const file = path.join(dir, 'users.ndjson');
      const count = 25;
      const stamp = Date.now();
      const emails = Array.from({ length: count }, (_, i) => `imported-${stamp}-${i}@example.com`);
      fs.writeFileSync(file, emails.map((email) => JSON.stringify({ email, email_verified: true })).join('\n'));
      try {
        // Batches of 10: three transactions, the last of 5.
        const summary = await importUsers(server.services.users, server.tenant.id, file, 10);
        assert.equal(summary.imported, count);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
      const requests = await receiver.waitFor((r) => r.length >= count * 2);
      // Wait a little longer: nothing more may arrive (no duplicate, nothing for the other streams).
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(requests.length, count * 2);
      const byStream = (id: string) => requests.map((r) => r.json()).filter((e) => e.a0stream === id);
      for (const stream of [created, both]) {
        const events = byStream(stream.id);
        assert.deepEqual(events.map((e) => e.data.object.email).sort(), [...emails].sort());
        assert.ok(events.every((e) => e.type === 'user.created' && /^evt_/.test(e.id)));
        assert.equal(new Set(events.map((e) => e.id)).size, count, 'one event per user');
      }
      // The same event goes to both streams.
      assert.deepEqual(
        byStream(created.id)
          .map((e) => e.id)
          .sort(),
        byStream(both.id)
          .map((e) => e.id)
          .sort(),
      );
      assert.equal(requests.filter((r) => r.url?.endsWith('/both')).length, count);
    });

    it('writes no event for a change that rolls back (duplicate user → 409)', async () => {
      receiver = await startWebhookReceiver();
      await createStream({
        name: 'rollback',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(receiver.url),
      });
      const email = `dup-${Date.now()}@example.com`;
      assert.equal(
        (
          await server.request({
            method: 'POST',
            url: '/api/v2/users',
            payload: {
              connection: 'Username-Password-Authentication',
              password: 'correct horse battery',
              email,
              user_id: 'dupdupdup',
            },
          })
        ).statusCode,
        201,
      );
      await receiver.waitFor((r) => r.length >= 1);
      const count = async () =>
        Number(
          (
            await server.services.database.db
              .selectFrom('events')
              .select((eb) => eb.fn.countAll().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const before = await count();
      const dup = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: {
          connection: 'Username-Password-Authentication',
          password: 'correct horse battery',
          email,
          user_id: 'dupdupdup',
        },
      });
      assert.equal(dup.statusCode, 409);
      assert.equal(await count(), before);
    });
  });
}

for (const kind of databaseKinds()) {
  describe(`event streams per tenant are bounded (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind, { DELIVERY_WORKER: 'false', EVENT_STREAMS_MAX: '3' });
    });
    after(() => server.close());

    // Every user write queues one delivery per subscribed stream, in its own transaction, and each is a
    // POST to an address the client chose: without a bound, one client's streams made every write of its
    // tenant as long as it liked, and every event a flood of requests to one host.
    it("refuses a stream past EVENT_STREAMS_MAX with the original's 409, also when they are created at once", async () => {
      const payloadOf = (name: string) => ({
        name,
        subscriptions: [{ event_type: 'user.created' }],
        destination: {
          type: 'webhook',
          configuration: {
            webhook_endpoint: 'https://93.184.216.34/hook',
            webhook_authorization: { method: 'bearer', token: 'secret-bearer-token' },
          },
        },
      });
      const create = (name: string) =>
        server.request({ method: 'POST', url: '/api/v2/event-streams', payload: payloadOf(name) });
      const statuses = (await Promise.all(['a', 'b', 'c', 'd', 'e'].map(create))).map((r) => r.statusCode).sort();
      assert.deepEqual(statuses, [201, 201, 201, 409, 409]);
      const refused = await create('f');
      assert.deepEqual(refused.json(), {
        statusCode: 409,
        error: 'Conflict',
        message:
          'You have reached the maximum number of event streams for your account OR Event stream name already in use.',
      });
      const listed = (await server.request({ url: '/api/v2/event-streams' })).json().eventStreams;
      assert.equal(listed.length, 3);
      // Deleting one makes room again; another tenant has its own bound.
      const deleted = await server.request({ method: 'DELETE', url: `/api/v2/event-streams/${listed[0].id}` });
      assert.equal(deleted.statusCode, 204);
      assert.equal((await create('g')).statusCode, 201);
      assert.equal((await create('h')).statusCode, 409);
      const other = await server.addTenant('bounded-other', 'bounded-other.test');
      const elsewhere = await server.app.inject({
        method: 'POST',
        url: '/api/v2/event-streams',
        headers: { host: 'bounded-other.test', authorization: `Bearer ${other.token}` },
        payload: payloadOf('a'),
      });
      assert.equal(elsewhere.statusCode, 201, elsewhere.body);
    });
  });
}
