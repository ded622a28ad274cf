import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Management, ManagementClient, ManagementError } from 'auth0';
import { databaseKinds } from '../../helpers/databases.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';
import { startWebhookReceiver, waitUntil, type WebhookReceiver } from '../../helpers/webhook-receiver.ts';

const DELIVERY_ENV = {
  DELIVERY_ALLOW_HTTP: 'true',
  DELIVERY_RETRY_SCHEDULE_MS: '50,100,200',
  DELIVERY_POLL_MS: '20',
  DELIVERY_TIMEOUT_MS: '2000',
  DELIVERY_LEASE_MS: '10000',
};

/** The SDK models only the response shape of webhook_authorization; the original accepts the secret on writes. */
const bearer = (token: string) =>
  ({ method: 'bearer', token }) as unknown as Management.EventStreamWebhookAuthorizationResponse;

// Every event-stream operation of the official SDK (auth0 v7.1.0), over HTTPS, as a customer calls them:
// the paths, query parameters and bodies are the SDK's own, and the answers must fit its declared types.
for (const kind of databaseKinds()) {
  describe(`event streams through the official SDK over HTTPS (${kind})`, () => {
    let https: HttpsTestServer;
    let client: ManagementClient;
    let receiver: WebhookReceiver;
    before(async () => {
      https = await startHttpsTestServer(kind, DELIVERY_ENV);
      client = new ManagementClient({ domain: https.domain, token: https.server.adminToken });
      receiver = await startWebhookReceiver();
    });
    after(async () => {
      await receiver.close();
      await https.close();
    });

    const webhook = (token = 'sdk-bearer-token'): Management.EventStreamWebhookDestination => ({
      type: 'webhook',
      configuration: { webhook_endpoint: receiver.url, webhook_authorization: bearer(token) },
    });
    const deliveryStatus = async (streamId: string, eventId: string) =>
      (
        await https.server.services.database.db
          .selectFrom('deliveries')
          .select('status')
          .where('stream_id', '=', streamId)
          .where('event_id', '=', eventId)
          .executeTakeFirst()
      )?.status;

    it('create, get, list (paged), update and delete', async () => {
      const { data: created, rawResponse: createdResponse } = await client.eventStreams
        .create({
          name: 'sdk-stream',
          subscriptions: [{ event_type: 'user.created' }],
          destination: webhook(),
        })
        .withRawResponse();
      assert.equal(createdResponse.status, 201);
      assert.match(created.id ?? '', /^est_[1-9A-HJ-NP-Za-km-z]{22}$/);
      assert.equal(created.name, 'sdk-stream');
      assert.equal(created.status, 'enabled');
      assert.deepEqual(created.subscriptions, [{ event_type: 'user.created' }]);
      assert.deepEqual(created.destination, {
        type: 'webhook',
        configuration: { webhook_endpoint: receiver.url, webhook_authorization: { method: 'bearer' } },
      });
      assert.equal(typeof created.created_at, 'string');
      assert.equal(created.updated_at, created.created_at);

      assert.deepEqual(await client.eventStreams.get(created.id!), created);

      const second = await client.eventStreams.create({
        name: 'sdk-second',
        status: 'disabled',
        subscriptions: [{ event_type: 'user.deleted' }],
        destination: {
          type: 'webhook',
          configuration: {
            webhook_endpoint: receiver.url,
            webhook_authorization: {
              method: 'basic',
              username: 'admin',
              password: 'sdk-password',
            } as unknown as Management.EventStreamWebhookBasicAuth,
          },
        },
      });
      assert.equal(second.status, 'disabled');
      assert.deepEqual(second.destination?.configuration, {
        webhook_endpoint: receiver.url,
        webhook_authorization: { method: 'basic', username: 'admin' },
      });

      // One stream a page: the SDK follows `next` through the `from` parameter.
      const page = await client.eventStreams.list({ take: 1 });
      assert.equal(page.data.length, 1);
      assert.equal(page.hasNextPage(), true);
      const seen: string[] = [];
      for await (const stream of page) seen.push(stream.id!);
      assert.deepEqual(seen.sort(), [created.id, second.id].sort());
      const all = await client.eventStreams.list();
      assert.equal(all.hasNextPage(), false);
      assert.equal(all.data.length, 2);

      const updated = await client.eventStreams.update(created.id!, {
        name: 'sdk-renamed',
        subscriptions: [{ event_type: 'user.updated' }],
        status: 'disabled',
      });
      assert.equal(updated.name, 'sdk-renamed');
      assert.deepEqual(updated.subscriptions, [{ event_type: 'user.updated' }]);
      assert.equal(updated.status, 'disabled');
      assert.equal(updated.created_at, created.created_at);
      assert.ok(updated.updated_at! > created.updated_at!);
      // A destination resent without its secret keeps the stored one (Terraform resends it whole, the SDK
      // may not); moving the endpoint takes the secret again.
      const resent = await client.eventStreams.update(created.id!, {
        destination: {
          type: 'webhook',
          configuration: { webhook_endpoint: receiver.url, webhook_authorization: { method: 'bearer' } },
        },
      });
      assert.deepEqual(resent.destination, created.destination);
      const moved = await client.eventStreams.update(created.id!, {
        destination: {
          type: 'webhook',
          configuration: { webhook_endpoint: `${receiver.url}/moved`, webhook_authorization: bearer('moved-token') },
        },
      });
      assert.equal(
        (moved.destination as Management.EventStreamWebhookDestination).configuration.webhook_endpoint,
        `${receiver.url}/moved`,
      );

      assert.equal((await client.eventStreams.delete(second.id!).withRawResponse()).rawResponse.status, 204);
      await client.eventStreams.delete(created.id!);
      await assert.rejects(client.eventStreams.get(created.id!), (error: unknown) => {
        assert.ok(error instanceof Management.NotFoundError, String(error));
        assert.equal(error.statusCode, 404);
        assert.deepEqual(error.body, {
          statusCode: 404,
          error: 'Not Found',
          message: 'The requested stream does not exist.',
        });
        return true;
      });
      assert.deepEqual((await client.eventStreams.list()).data, []);
    });

    it('refuses bad input through the SDK error classes, changing nothing', async () => {
      await assert.rejects(
        client.eventStreams.create({
          name: 'x',
          destination: {
            type: 'webhook',
            configuration: { webhook_endpoint: 'not a url', webhook_authorization: bearer('t') },
          },
        }),
        (error: unknown) => {
          assert.ok(error instanceof Management.BadRequestError, String(error));
          assert.equal((error.body as { errorCode?: string }).errorCode, 'invalid_body');
          return true;
        },
      );
      await assert.rejects(client.eventStreams.get('est_invalid_id_1234567890'), (error: unknown) => {
        // The SDK declares no 400 for get: it surfaces as its base error class.
        assert.ok(error instanceof ManagementError, String(error));
        assert.equal(error.statusCode, 400);
        assert.equal((error.body as { errorCode?: string }).errorCode, 'invalid_uri');
        return true;
      });
      assert.deepEqual((await client.eventStreams.list()).data, []);
    });

    it('refuses to move a stream to another endpoint without its secret, through the SDK error classes', async () => {
      const stream = await client.eventStreams.create({
        name: 'sdk-origin',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(),
      });
      try {
        const elsewhere = receiver.url.replace('127.0.0.1', 'localhost');
        await assert.rejects(
          client.eventStreams.update(stream.id!, {
            destination: {
              type: 'webhook',
              configuration: { webhook_endpoint: elsewhere, webhook_authorization: { method: 'bearer' } },
            },
          }),
          (error: unknown) => {
            assert.ok(error instanceof Management.BadRequestError, String(error));
            assert.equal(error.statusCode, 400);
            const body = error.body as { errorCode?: string; message?: string };
            assert.equal(body.errorCode, 'invalid_body');
            assert.match(body.message ?? '', /the stored token is only sent to the webhook_endpoint it was given for/);
            return true;
          },
        );
        assert.deepEqual(await client.eventStreams.get(stream.id!), stream);
      } finally {
        await client.eventStreams.delete(stream.id!);
      }
    });

    it('test sends a test event and answers the declared delivery record', async () => {
      const stream = await client.eventStreams.create({
        name: 'sdk-test',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(),
      });
      const before = receiver.requests.length;
      const { data: delivery, rawResponse } = await client.eventStreams
        .test(stream.id!, { event_type: 'user.created', data: { object: { user_id: 'svc|sdk-test' } } })
        .withRawResponse();
      assert.equal(rawResponse.status, 202);
      assert.equal(delivery.event_stream_id, stream.id);
      assert.equal(delivery.event_type, 'user.created');
      assert.equal(delivery.status, 'pending');
      assert.deepEqual(delivery.attempts, []);
      assert.equal(delivery.event?.id, delivery.id);
      assert.equal(delivery.event?.type, 'user.created');
      assert.equal(delivery.event?.specversion, '1.0');
      assert.deepEqual(delivery.event?.data, { object: { user_id: 'svc|sdk-test' } });
      const requests = await receiver.waitFor((r) => r.length > before);
      const sent = requests[before]!;
      assert.equal(sent.headers.authorization, 'Bearer sdk-bearer-token');
      assert.deepEqual(sent.json(), delivery.event);
      await client.eventStreams.delete(stream.id!);
    });

    it('deliveries.list / getHistory and redeliveries.create / createById', async () => {
      const stream = await client.eventStreams.create({
        name: 'sdk-deliveries',
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(),
      });
      // The endpoint refuses the next three events (a 4xx fails at once), then accepts everything.
      receiver.program([400, 400, 400], 204);
      const before = receiver.requests.length;
      const users = [];
      for (let i = 0; i < 3; i++) {
        users.push(
          await client.users.create({
            connection: 'Username-Password-Authentication',
            email: `sdk-delivery-${i}@example.com`,
            password: 'correct horse battery',
          }),
        );
      }
      const refused = await receiver.waitFor((r) => r.length >= before + 3);
      const eventIds = refused.slice(before).map((r) => r.json().id as string);
      for (const id of eventIds)
        await waitUntil(
          async () => (await deliveryStatus(stream.id!, id)) === 'failed',
          10_000,
          () => `${id} failed`,
        );

      // Two a page, with the SDK's comma-separated filters; it follows `next` through `from`.
      const page = await client.eventStreams.deliveries.list(stream.id!, {
        statuses: 'failed',
        event_types: 'user.created,user.deleted',
        take: 2,
      });
      assert.equal(page.data.length, 2);
      assert.equal(page.hasNextPage(), true);
      const listed: Management.EventStreamDelivery[] = [];
      for await (const delivery of page) listed.push(delivery);
      assert.deepEqual(listed.map((d) => d.id).sort(), [...eventIds].sort());
      for (const delivery of listed) {
        assert.equal(delivery.event_stream_id, stream.id);
        assert.equal(delivery.status, 'failed');
        assert.equal(delivery.event_type, 'user.created');
        assert.equal(delivery.attempts.length, 1);
        assert.equal(delivery.attempts[0]!.status, 'failed');
        assert.match(delivery.attempts[0]!.error_message ?? '', /400/);
        assert.equal(typeof delivery.attempts[0]!.timestamp, 'string');
        assert.equal(typeof delivery.attempts[0]!.duration, 'number');
        assert.equal(delivery.event?.id, delivery.id);
        assert.ok(
          users.some((u) => u.user_id === (delivery.event?.data as { object: { user_id: string } }).object.user_id),
        );
      }
      const future = new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      assert.deepEqual((await client.eventStreams.deliveries.list(stream.id!, { date_from: future })).data, []);
      assert.equal((await client.eventStreams.deliveries.list(stream.id!, { date_to: future })).data.length, 3);

      const [first, ...rest] = eventIds as [string, ...string[]];
      const history = await client.eventStreams.deliveries.getHistory(stream.id!, first);
      assert.deepEqual(
        history,
        listed.find((d) => d.id === first),
      );
      await assert.rejects(
        client.eventStreams.deliveries.getHistory(stream.id!, 'evt_1111111111111111111111'),
        (error: unknown) => {
          assert.ok(error instanceof Management.NotFoundError, String(error));
          assert.equal((error.body as { message: string }).message, 'The event does not exist.');
          return true;
        },
      );

      // One event by id: no body, and the SDK declares no answer.
      const byId = await client.eventStreams.redeliveries.createById(stream.id!, first).withRawResponse();
      assert.equal(byId.rawResponse.status, 202);
      assert.equal(byId.data, undefined);
      await waitUntil(
        async () => (await deliveryStatus(stream.id!, first)) === 'delivered',
        10_000,
        () => `${first} redelivered`,
      );
      await assert.rejects(client.eventStreams.redeliveries.createById(stream.id!, first), (error: unknown) => {
        assert.ok(error instanceof Management.ConflictError, String(error));
        assert.equal(
          (error.body as { message: string }).message,
          'The event is not in a state that allows redelivery.',
        );
        return true;
      });

      // The rest by filter: the answer echoes the filter.
      const filter = {
        date_from: '2020-01-01T00:00:00Z',
        statuses: ['failed' as const],
        event_types: ['user.created' as const],
      };
      const redelivery = await client.eventStreams.redeliveries.create(stream.id!, filter).withRawResponse();
      assert.equal(redelivery.rawResponse.status, 202);
      assert.deepEqual(redelivery.data, filter);
      for (const id of rest)
        await waitUntil(
          async () => (await deliveryStatus(stream.id!, id)) === 'delivered',
          10_000,
          () => `${id} redelivered`,
        );
      const resent = receiver.requests.slice(before + 3).map((r) => r.json().id as string);
      assert.deepEqual([...resent].sort(), [...eventIds].sort(), 'each refused event was sent once more');
      assert.deepEqual((await client.eventStreams.deliveries.list(stream.id!)).data, []);
      assert.deepEqual(await client.eventStreams.redeliveries.create(stream.id!), {});

      await assert.rejects(
        client.eventStreams.redeliveries.create('est_1111111111111111111111', {}),
        (error: unknown) => {
          assert.ok(error instanceof Management.NotFoundError, String(error));
          return true;
        },
      );
      await client.eventStreams.delete(stream.id!);
    });
  });
}
