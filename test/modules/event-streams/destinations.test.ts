import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import {
  startWebhookReceiver,
  waitUntil,
  type ReceivedRequest,
  type WebhookReceiver,
} from '../../helpers/webhook-receiver.ts';

const DELIVERY_ENV = {
  DELIVERY_ALLOW_HTTP: 'true',
  DELIVERY_RETRY_SCHEDULE_MS: '50,100,200',
  DELIVERY_POLL_MS: '20',
  DELIVERY_TIMEOUT_MS: '2000',
};

/** Each authorization kind: how it is written with a secret, without one, and how a receiver sees the secret. */
const KINDS = [
  {
    method: 'bearer',
    field: 'token',
    withSecret: (secret: string) => ({ method: 'bearer', token: secret }),
    withoutSecret: { method: 'bearer' },
    received: (r: ReceivedRequest) => r.headers.authorization,
    expected: (secret: string) => `Bearer ${secret}`,
  },
  {
    method: 'basic',
    field: 'password',
    withSecret: (secret: string) => ({ method: 'basic', username: 'admin', password: secret }),
    withoutSecret: { method: 'basic', username: 'admin' },
    received: (r: ReceivedRequest) => r.headers.authorization,
    expected: (secret: string) => `Basic ${Buffer.from(`admin:${secret}`).toString('base64')}`,
  },
  {
    method: 'custom_header',
    field: 'header_value',
    withSecret: (secret: string) => ({ method: 'custom_header', header_key: 'x-hook-secret', header_value: secret }),
    withoutSecret: { method: 'custom_header', header_key: 'x-hook-secret' },
    received: (r: ReceivedRequest) => r.headers['x-hook-secret'],
    expected: (secret: string) => secret,
  },
] as const;

const webhook = (endpoint: string, authorization: Record<string, string>) => ({
  type: 'webhook',
  configuration: { webhook_endpoint: endpoint, webhook_authorization: authorization },
});

// A stored webhook secret is write-only: whoever may update a stream must not be able to send it to an
// address of their choosing without knowing it. It is kept only while the endpoint keeps its origin.
for (const kind of databaseKinds()) {
  describe(`event streams: a stored secret stays with its endpoint's origin (${kind})`, () => {
    let server: TestServer;
    let oldReceiver: WebhookReceiver;
    let newReceiver: WebhookReceiver;
    before(async () => {
      server = await startTestServer(kind, DELIVERY_ENV);
      oldReceiver = await startWebhookReceiver();
      newReceiver = await startWebhookReceiver();
    });
    after(async () => {
      await oldReceiver.close();
      await newReceiver.close();
      await server.close();
    });

    const create = async (name: string, destination: unknown) => {
      const response = await server.request({
        method: 'POST',
        url: '/api/v2/event-streams',
        payload: { name, destination },
      });
      assert.equal(response.statusCode, 201, response.body);
      return response.json();
    };
    const patch = (id: string, destination: unknown) =>
      server.request({ method: 'PATCH', url: `/api/v2/event-streams/${id}`, payload: { destination } });
    const stored = (id: string) =>
      server.services.database.db
        .selectFrom('event_streams')
        .selectAll()
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
    /** Sends a test event and returns the request that carried it, at whichever receiver it reached. */
    const deliverTest = async (id: string, receiver: WebhookReceiver): Promise<ReceivedRequest> => {
      const payload = { event_type: 'user.created' };
      const sent = await server.request({ method: 'POST', url: `/api/v2/event-streams/${id}/test`, payload });
      assert.equal(sent.statusCode, 202, sent.body);
      const eventId = sent.json().id as string;
      const requests = await receiver.waitFor((all) => all.some((r) => r.json().id === eventId));
      await waitUntil(async () => {
        const row = await server.services.database.db
          .selectFrom('deliveries')
          .select('status')
          .where('stream_id', '=', id)
          .where('event_id', '=', eventId)
          .executeTakeFirst();
        return row?.status === 'delivered';
      });
      return requests.find((r) => r.json().id === eventId)!;
    };
    const received = (receiver: WebhookReceiver, streamId: string) =>
      receiver.requests.filter((r) => r.json().a0stream === streamId);

    for (const auth of KINDS) {
      it(`${auth.method}: moving to another scheme, host or port needs the ${auth.field}; the same origin keeps it`, async () => {
        const oldPort = new URL(oldReceiver.url).port;
        const created = await create(`origin-${auth.method}`, webhook(oldReceiver.url, auth.withSecret('old-secret')));
        const sealed = (await stored(created.id)).secret;

        const elsewhere = {
          scheme: `https://127.0.0.1:${oldPort}/hook`,
          host: `http://localhost:${oldPort}/hook`,
          port: newReceiver.url,
        };
        for (const [change, endpoint] of Object.entries(elsewhere)) {
          const refused = await patch(created.id, webhook(endpoint, auth.withoutSecret));
          assert.equal(refused.statusCode, 400, `${change}: ${refused.body}`);
          assert.deepEqual(refused.json(), {
            statusCode: 400,
            error: 'Bad Request',
            message:
              `Payload validation error: 'Missing required property: ${auth.field}' ` +
              'on property destination.configuration.webhook_authorization: ' +
              `the stored ${auth.field} is only sent to the origin it was given for (${new URL(oldReceiver.url).origin}); ` +
              `send it again to move webhook_endpoint to ${new URL(endpoint).origin}.`,
            errorCode: 'invalid_body',
          });
          assert.deepEqual(
            (await server.request({ url: `/api/v2/event-streams/${created.id}` })).json(),
            created,
            `${change}: unchanged`,
          );
          assert.equal((await stored(created.id)).secret, sealed, `${change}: the stored secret is untouched`);
        }
        // Changing the method is no way around it either: the secret belongs to the method it was given with.
        const otherMethod = KINDS.find((k) => k.method !== auth.method)!;
        const switched = await patch(created.id, webhook(oldReceiver.url, otherMethod.withoutSecret));
        assert.equal(switched.statusCode, 400, switched.body);
        assert.equal(switched.json().errorCode, 'invalid_body');
        assert.deepEqual((await server.request({ url: `/api/v2/event-streams/${created.id}` })).json(), created);

        const first = await deliverTest(created.id, oldReceiver);
        assert.equal(auth.received(first), auth.expected('old-secret'), 'the old receiver still gets the old secret');
        assert.deepEqual(received(newReceiver, created.id), [], 'nothing reached the other port');

        // Same origin, another path and query: the stored secret is kept, not sealed again.
        const moved = await patch(
          created.id,
          webhook(`${new URL(oldReceiver.url).origin}/moved?to=here`, auth.withoutSecret),
        );
        assert.equal(moved.statusCode, 200, moved.body);
        assert.equal(
          moved.json().destination.configuration.webhook_endpoint,
          `${new URL(oldReceiver.url).origin}/moved?to=here`,
        );
        assert.equal((await stored(created.id)).secret, sealed);
        const second = await deliverTest(created.id, oldReceiver);
        assert.equal(second.url, '/moved?to=here');
        assert.equal(auth.received(second), auth.expected('old-secret'));

        // Another origin with its secret sent again: the new receiver gets the new secret, the old one nothing.
        const before = received(oldReceiver, created.id).length;
        const rehomed = await patch(created.id, webhook(newReceiver.url, auth.withSecret('new-secret')));
        assert.equal(rehomed.statusCode, 200, rehomed.body);
        const third = await deliverTest(created.id, newReceiver);
        assert.equal(auth.received(third), auth.expected('new-secret'));
        assert.equal(received(oldReceiver, created.id).length, before, 'the old receiver got nothing more');
        assert.equal(
          JSON.stringify(received(newReceiver, created.id).map(auth.received)).includes('old-secret'),
          false,
        );
      });
    }

    it('compares origins as the sender reaches them: other spellings of one origin keep the secret, others need it', async () => {
      const base = 'https://hooks.example.test/in';
      const created = await create('origin-spellings', webhook(base, { method: 'bearer', token: 'kept-token' }));
      const sealed = (await stored(created.id)).secret;
      const sameOrigin = [
        'HTTPS://HOOKS.Example.TEST:443/in',
        'https://hooks.example.test:443/other?x=1',
        'https://hooks.ex%61mple.test/in',
        // Userinfo is not part of where the request goes; the sender ignores it.
        'https://someone@hooks.example.test/in',
      ];
      for (const endpoint of sameOrigin) {
        const kept = await patch(created.id, webhook(endpoint, { method: 'bearer' }));
        assert.equal(kept.statusCode, 200, `${endpoint}: ${kept.body}`);
        assert.equal((await stored(created.id)).secret, sealed, `${endpoint}: the stored secret is kept`);
      }
      const current = (await server.request({ url: `/api/v2/event-streams/${created.id}` })).json();
      const otherOrigin = [
        // A trailing dot names the same DNS host but may be served (and certified) as another: not assumed the same.
        'https://hooks.example.test./in',
        'https://hooks.example.test:8443/in',
        'http://hooks.example.test/in',
        'http://hooks.example.test:443/in',
        'https://example.test/in',
        'https://hooks.example.test.evil.test/in',
        // Looks like the old host, goes to another.
        'https://hooks.example.test@evil.test/in',
        'https://hooks.example.test:443@evil.test/in',
        'https://evil.test\\@hooks.example.test/in',
        'https://evil.test#@hooks.example.test/in',
      ];
      for (const endpoint of otherOrigin) {
        const refused = await patch(created.id, webhook(endpoint, { method: 'bearer' }));
        assert.equal(refused.statusCode, 400, `${endpoint}: ${refused.body}`);
        assert.equal(refused.json().errorCode, 'invalid_body');
        assert.match(
          refused.json().message,
          /only sent to the origin it was given for \(https:\/\/hooks\.example\.test\)/,
        );
        assert.deepEqual(
          (await server.request({ url: `/api/v2/event-streams/${created.id}` })).json(),
          current,
          `${endpoint}: unchanged`,
        );
        assert.equal((await stored(created.id)).secret, sealed, `${endpoint}: the stored secret is untouched`);
      }
    });

    it('refuses a custom header that would replace one the sender sets itself', async () => {
      for (const headerKey of [
        'Host',
        'content-length',
        'Transfer-Encoding',
        'webhook-signature',
        'Webhook-Timestamp',
        'proxy-authorization',
      ]) {
        const refused = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: {
            name: 'reserved',
            subscriptions: [{ event_type: 'user.created' }],
            destination: webhook(oldReceiver.url, {
              method: 'custom_header',
              header_key: headerKey,
              header_value: 'v',
            }),
          },
        });
        assert.equal(refused.statusCode, 400, `${headerKey}: ${refused.body}`);
        assert.equal(refused.json().errorCode, 'invalid_body');
        assert.match(refused.json().message, /is set by the server itself/);
      }
      const streams = (await server.request({ url: '/api/v2/event-streams' })).json().eventStreams as Array<{
        name: string;
      }>;
      assert.ok(!streams.some((stream) => stream.name === 'reserved'));
    });
  });
}
