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
// address of their choosing without knowing it. It is kept only while the endpoint stays the same.
for (const kind of databaseKinds()) {
  describe(`event streams: a stored secret stays with its endpoint (${kind})`, () => {
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
      it(`${auth.method}: moving to another scheme, host, port, path or query needs the ${auth.field}; the same endpoint keeps it`, async () => {
        const oldPort = new URL(oldReceiver.url).port;
        const created = await create(`origin-${auth.method}`, webhook(oldReceiver.url, auth.withSecret('old-secret')));
        const sealed = (await stored(created.id)).secret;

        const origin = new URL(oldReceiver.url).origin;
        const elsewhere = {
          scheme: `https://127.0.0.1:${oldPort}/hook`,
          host: `http://localhost:${oldPort}/hook`,
          port: newReceiver.url,
          // One host often serves many receivers by path (hooks.slack.com/services/…).
          path: `${origin}/moved`,
          query: `${oldReceiver.url}?to=here`,
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
              `the stored ${auth.field} is only sent to the webhook_endpoint it was given for; ` +
              'send it again to change webhook_endpoint.',
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

        // The same endpoint spelled otherwise (a dot segment, a fragment): the stored secret is kept, not sealed again.
        const respelled = `${origin}/x/..${new URL(oldReceiver.url).pathname}#f`;
        const kept = await patch(created.id, webhook(respelled, auth.withoutSecret));
        assert.equal(kept.statusCode, 200, kept.body);
        assert.equal(kept.json().destination.configuration.webhook_endpoint, respelled);
        assert.equal((await stored(created.id)).secret, sealed);
        const second = await deliverTest(created.id, oldReceiver);
        assert.equal(second.url, new URL(oldReceiver.url).pathname);
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

    it('compares endpoints as the sender reaches them: other spellings of one endpoint keep the secret, others need it', async () => {
      const base = 'https://hooks.example.test/in';
      const created = await create('endpoint-spellings', webhook(base, { method: 'bearer', token: 'kept-token' }));
      const sealed = (await stored(created.id)).secret;
      const sameEndpoint = [
        'HTTPS://HOOKS.Example.TEST:443/in',
        'https://hooks.ex%61mple.test/in',
        'https://hooks.example.test/a/../in',
        // Userinfo and fragment are not part of where the request goes; the sender sends neither.
        'https://someone@hooks.example.test/in',
        'https://hooks.example.test/in#x',
      ];
      for (const endpoint of sameEndpoint) {
        const kept = await patch(created.id, webhook(endpoint, { method: 'bearer' }));
        assert.equal(kept.statusCode, 200, `${endpoint}: ${kept.body}`);
        assert.equal((await stored(created.id)).secret, sealed, `${endpoint}: the stored secret is kept`);
      }
      const current = (await server.request({ url: `/api/v2/event-streams/${created.id}` })).json();
      const otherEndpoint = [
        // Another receiver on the same host: many hosts serve one per path or query.
        'https://hooks.example.test/in/other',
        'https://hooks.example.test/IN',
        'https://hooks.example.test/%69n',
        'https://hooks.example.test/in?x=1',
        'https://hooks.example.test/in/',
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
      for (const endpoint of otherEndpoint) {
        const refused = await patch(created.id, webhook(endpoint, { method: 'bearer' }));
        assert.equal(refused.statusCode, 400, `${endpoint}: ${refused.body}`);
        assert.equal(refused.json().errorCode, 'invalid_body');
        assert.match(refused.json().message, /only sent to the webhook_endpoint it was given for/);
        assert.deepEqual(
          (await server.request({ url: `/api/v2/event-streams/${created.id}` })).json(),
          current,
          `${endpoint}: unchanged`,
        );
        assert.equal((await stored(created.id)).secret, sealed, `${endpoint}: the stored secret is untouched`);
      }
    });

    it('refuses a token or header value holding CR, LF or another control character, and stores nothing', async () => {
      const before = (await server.request({ url: '/api/v2/event-streams' })).json().eventStreams.length as number;
      const secrets: Array<Record<string, string>> = [
        { method: 'bearer', token: 'abc\r\nX-Injected: yes' },
        { method: 'custom_header', header_key: 'x-hook-secret', header_value: 'abc\n' },
      ];
      for (const authorization of secrets) {
        const refused = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: { name: 'crlf', destination: webhook(oldReceiver.url, authorization) },
        });
        assert.equal(refused.statusCode, 400, refused.body);
        assert.equal(refused.json().errorCode, 'invalid_body');
        assert.match(refused.json().message, /may hold only characters allowed in an HTTP header value/);
        assert.ok(!refused.body.includes('Injected'), 'the secret is not echoed');
      }
      assert.equal((await server.request({ url: '/api/v2/event-streams' })).json().eventStreams.length, before);
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
