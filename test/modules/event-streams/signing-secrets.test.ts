import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { ManagementClient } from 'auth0';
import { databaseKinds } from '../../helpers/databases.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import {
  startWebhookReceiver,
  verifies,
  type ReceivedRequest,
  type WebhookReceiver,
} from '../../helpers/webhook-receiver.ts';

const DELIVERY_ENV = {
  DELIVERY_ALLOW_HTTP: 'true',
  DELIVERY_RETRY_SCHEDULE_MS: '50,100,200',
  DELIVERY_POLL_MS: '20',
  DELIVERY_TIMEOUT_MS: '2000',
};

const signatureCount = (request: ReceivedRequest) =>
  String(request.headers['webhook-signature'] ?? '')
    .split(' ')
    .filter(Boolean).length;
const webhookHeaders = (request: ReceivedRequest) =>
  Object.keys(request.headers).filter((h) => h.startsWith('webhook-'));

for (const kind of databaseKinds()) {
  describe(`Standard Webhooks signatures (${kind})`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    let streamId: string;
    let streamRecord: unknown;
    const logs: string[] = [];
    const secrets: string[] = [];

    before(async () => {
      const logStream = new PassThrough();
      logStream.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
      server = await startTestServer(kind, { ...DELIVERY_ENV, LOG_LEVEL: 'trace' }, { logStream });
      receiver = await startWebhookReceiver();
      const created = await server.request({
        method: 'POST',
        url: '/api/v2/event-streams',
        payload: {
          name: 'signed',
          subscriptions: [{ event_type: 'user.created' }],
          destination: {
            type: 'webhook',
            configuration: {
              webhook_endpoint: receiver.url,
              webhook_authorization: { method: 'bearer', token: 'signing-test-token' },
            },
          },
        },
      });
      assert.equal(created.statusCode, 201, created.body);
      streamId = created.json().id;
      streamRecord = created.json();
    });
    after(async () => {
      await receiver.close();
      await server.close();
    });

    const url = (suffix = '') => `/api/v2/event-streams/${streamId}/signing-secrets${suffix}`;
    const listSecrets = async () => {
      const response = await server.request({ url: url() });
      assert.equal(response.statusCode, 200, response.body);
      return response.json().signing_secrets as Array<{ id: string; created_at: string; expires_at?: string }>;
    };
    const createSecret = async (payload?: Record<string, unknown>) => {
      const response = await server.request({ method: 'POST', url: url(), ...(payload ? { payload } : {}) });
      assert.equal(response.statusCode, 201, response.body);
      const body = response.json() as { id: string; secret: string; created_at: string };
      secrets.push(body.secret);
      return body;
    };
    /** Sends a test event (with non-ASCII data: the signature covers the exact bytes) and returns what the receiver got. */
    const deliverOne = async () => {
      const seen = receiver.requests.length;
      const sent = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${streamId}/test`,
        payload: { event_type: 'user.created', data: { object: { name: 'Zoë 🚀 “quoted”' } } },
      });
      assert.equal(sent.statusCode, 202, sent.body);
      const requests = await receiver.waitFor((r) => r.length > seen);
      const request = requests[seen]!;
      assert.equal(request.json().id, sent.json().id);
      return request;
    };

    it('sends no webhook-* headers while a stream has no signing secret', async () => {
      assert.deepEqual(await listSecrets(), []);
      const request = await deliverOne();
      assert.deepEqual(webhookHeaders(request), []);
      assert.equal(request.headers.authorization, 'Bearer signing-test-token');
    });

    it('signs with a new secret, shown once and sealed at rest; the stream record keeps the original shape', async () => {
      const response = await server.request({ method: 'POST', url: url() });
      assert.equal(response.statusCode, 201, response.body);
      const created = response.json();
      secrets.push(created.secret);
      assert.deepEqual(Object.keys(created), ['id', 'secret', 'created_at']);
      assert.match(created.id, /^whk_[1-9A-HJ-NP-Za-km-z]{22}$/);
      assert.match(created.secret, /^whsec_[A-Za-z0-9+/]+={0,2}$/);
      assert.equal(Buffer.from(created.secret.slice(6), 'base64').length, 32);

      const listed = await server.request({ url: url() });
      assert.deepEqual(listed.json(), { signing_secrets: [{ id: created.id, created_at: created.created_at }] });
      assert.ok(!listed.body.includes(created.secret.slice(6)), 'never returned again');
      const row = await server.services.database.db
        .selectFrom('event_streams')
        .select('signing_secrets')
        .where('id', '=', streamId)
        .executeTakeFirstOrThrow();
      assert.ok(row.signing_secrets && !row.signing_secrets.includes(created.secret.slice(6)), 'sealed at rest');
      assert.deepEqual((await server.request({ url: `/api/v2/event-streams/${streamId}` })).json(), streamRecord);

      const before = Math.floor(Date.now() / 1000);
      const request = await deliverOne();
      const after = Math.floor(Date.now() / 1000);
      assert.deepEqual(webhookHeaders(request).sort(), ['webhook-id', 'webhook-signature', 'webhook-timestamp']);
      assert.equal(request.headers['webhook-id'], request.json().id);
      const timestamp = Number(request.headers['webhook-timestamp']);
      assert.ok(
        Number.isInteger(timestamp) && timestamp >= before && timestamp <= after,
        `timestamp ${timestamp} in [${before}, ${after}]`,
      );
      assert.equal(signatureCount(request), 1);
      assert.ok(verifies(request.headers, request.body, created.secret), 'the signature verifies with the secret');
      assert.ok(!verifies(request.headers, `${request.body} `, created.secret), 'and not over another body');
      assert.ok(
        !verifies({ ...request.headers, 'webhook-timestamp': String(timestamp + 1) }, request.body, created.secret),
        'nor another timestamp',
      );
      assert.ok(
        !verifies(request.headers, request.body, `whsec_${Buffer.alloc(32, 7).toString('base64')}`),
        'nor with another secret',
      );
    });

    it('rotates: both secrets sign during the overlap; removal, a zero overlap or expiry leave one', async () => {
      const [first] = await listSecrets();
      const firstSecret = secrets.at(-1)!;
      const second = await createSecret({ overlap_seconds: 3600 });
      const listed = await listSecrets();
      assert.deepEqual(
        listed.map((s) => s.id),
        [second.id, first!.id],
      );
      assert.equal(listed[0]!.expires_at, undefined);
      const expiresIn = Date.parse(listed[1]!.expires_at!) - Date.now();
      assert.ok(
        expiresIn > 3500_000 && expiresIn <= 3600_000,
        `the previous secret expires in an hour (${expiresIn} ms)`,
      );

      let request = await deliverOne();
      assert.equal(signatureCount(request), 2);
      assert.ok(verifies(request.headers, request.body, firstSecret), 'a receiver still on the old secret verifies');
      assert.ok(
        verifies(request.headers, request.body, second.secret),
        'a receiver already on the new secret verifies',
      );

      const removed = await server.request({ method: 'DELETE', url: url(`/${first!.id}`) });
      assert.equal(removed.statusCode, 204);
      assert.deepEqual(
        (await listSecrets()).map((s) => s.id),
        [second.id],
      );
      request = await deliverOne();
      assert.equal(signatureCount(request), 1);
      assert.ok(verifies(request.headers, request.body, second.secret));
      assert.ok(!verifies(request.headers, request.body, firstSecret));
      const again = await server.request({ method: 'DELETE', url: url(`/${first!.id}`) });
      assert.equal(again.statusCode, 404);
      assert.deepEqual(again.json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'The signing secret does not exist.',
      });

      const third = await createSecret({ overlap_seconds: 0 });
      assert.deepEqual(
        (await listSecrets()).map((s) => s.id),
        [third.id],
      );
      request = await deliverOne();
      assert.equal(signatureCount(request), 1);
      assert.ok(verifies(request.headers, request.body, third.secret));

      const fourth = await createSecret({ overlap_seconds: 1 });
      assert.deepEqual(
        (await listSecrets()).map((s) => s.id),
        [fourth.id, third.id],
      );
      const expiry = Date.parse((await listSecrets())[1]!.expires_at!);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiry - Date.now()) + 50));
      assert.deepEqual(
        (await listSecrets()).map((s) => s.id),
        [fourth.id],
        'an expired secret is gone',
      );
      request = await deliverOne();
      assert.equal(signatureCount(request), 1);
      assert.ok(verifies(request.headers, request.body, fourth.secret));
      assert.ok(!verifies(request.headers, request.body, third.secret));

      // Two secrets at most: a rotation during an overlap drops the oldest.
      const fifth = await createSecret({ overlap_seconds: 3600 });
      const sixth = await createSecret({ overlap_seconds: 3600 });
      assert.deepEqual(
        (await listSecrets()).map((s) => s.id),
        [sixth.id, fifth.id],
      );
      // Taking back the newest makes the previous one current again, with no expiry.
      assert.equal((await server.request({ method: 'DELETE', url: url(`/${sixth.id}`) })).statusCode, 204);
      assert.deepEqual(await listSecrets(), [{ id: fifth.id, created_at: fifth.created_at }]);
      request = await deliverOne();
      assert.equal(signatureCount(request), 1);
      assert.ok(verifies(request.headers, request.body, fifth.secret));
    });

    it('DELETE /signing-secrets turns signing off', async () => {
      const response = await server.request({ method: 'DELETE', url: url() });
      assert.equal(response.statusCode, 204);
      assert.equal(response.body, '');
      assert.deepEqual(await listSecrets(), []);
      const request = await deliverOne();
      assert.deepEqual(webhookHeaders(request), []);
      assert.equal((await server.request({ method: 'DELETE', url: url() })).statusCode, 204, 'again: still off');
    });

    it("refuses bad input, missing scopes and other tenants' streams, changing nothing", async () => {
      const kept = await createSecret();
      const unchanged = await listSecrets();
      for (const payload of [
        { overlap_seconds: -1 },
        { overlap_seconds: 2_592_001 },
        { overlap_seconds: 1.5 },
        { overlap_seconds: '60' },
        { secret: 'whsec_mine' },
      ]) {
        const response = await server.request({ method: 'POST', url: url(), payload });
        assert.equal(response.statusCode, 400, JSON.stringify(payload));
        assert.equal(response.json().errorCode, 'invalid_body');
        assert.match(response.json().message, /^Payload validation error: '.+'/);
      }
      const badId = await server.request({ method: 'DELETE', url: url('/whk_bad') });
      assert.deepEqual(badId.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message:
          "Path validation error: 'Object didn't pass validation for format signing-secret-id: whk_bad' on property secret_id (Unique identifier for the signing secret).",
        errorCode: 'invalid_uri',
      });
      const missing = await server.request({
        method: 'POST',
        url: '/api/v2/event-streams/est_1111111111111111111111/signing-secrets',
      });
      assert.deepEqual(missing.json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'The requested stream does not exist.',
      });

      const reader = await server.clientWithScopes(['read:event_streams']);
      assert.equal((await server.request({ url: url(), token: reader.token })).statusCode, 200);
      for (const [method, path] of [
        ['POST', url()],
        ['DELETE', url()],
        ['DELETE', url(`/${kept.id}`)],
      ] as const) {
        const response = await server.request({ method, url: path, token: reader.token });
        assert.equal(response.statusCode, 403);
        assert.equal(response.json().message, 'Insufficient scope, expected any of: update:event_streams');
      }
      const writer = await server.clientWithScopes(['update:event_streams']);
      assert.equal(
        (await server.request({ url: url(), token: writer.token })).statusCode,
        403,
        'listing needs read:event_streams',
      );

      const other = await server.addTenant('signing-other', 'signing-other.test');
      for (const [method, path] of [
        ['GET', url()],
        ['POST', url()],
        ['DELETE', url()],
        ['DELETE', url(`/${kept.id}`)],
      ] as const) {
        const response = await server.request({
          method,
          url: path,
          token: other.token,
          headers: { host: 'signing-other.test' },
        });
        assert.equal(response.statusCode, 404, `${method} ${path}`);
      }
      assert.deepEqual(await listSecrets(), unchanged, 'nothing changed');
    });

    it('documents the operations in the OpenAPI document and never logs a secret', async () => {
      const doc = (await server.request({ url: '/api/v2/openapi.json' })).json();
      const collection = doc.paths['/api/v2/event-streams/{id}/signing-secrets'];
      assert.equal(collection.get.operationId, 'listEventStreamSigningSecrets');
      assert.equal(collection.post.operationId, 'createEventStreamSigningSecret');
      assert.equal(collection.delete.operationId, 'deleteEventStreamSigningSecrets');
      assert.equal(
        doc.paths['/api/v2/event-streams/{id}/signing-secrets/{secret_id}'].delete.operationId,
        'deleteEventStreamSigningSecret',
      );
      assert.ok(collection.post.requestBody.content['application/json'].schema.properties.overlap_seconds);

      assert.ok(
        logs.some((line) => line.includes('signing-secrets')),
        'requests were logged',
      );
      assert.ok(secrets.length >= 6);
      for (const secret of secrets)
        assert.ok(!logs.some((line) => line.includes(secret.slice(6))), 'no secret in the logs');
    });
  });

  describe(`signed streams through the official SDK (${kind})`, () => {
    let https: HttpsTestServer;
    let client: ManagementClient;
    before(async () => {
      https = await startHttpsTestServer(kind, DELIVERY_ENV);
      client = new ManagementClient({ domain: https.domain, token: https.server.adminToken });
    });
    after(() => https.close());

    it('gets, lists and updates a signed stream as before; the update keeps the signing secret', async () => {
      const created = await client.eventStreams.create({
        name: 'sdk-signed',
        subscriptions: [{ event_type: 'user.created' }],
        destination: {
          type: 'webhook',
          configuration: {
            webhook_endpoint: 'https://hooks.example.com/in',
            webhook_authorization: { method: 'bearer', token: 't0ken' } as never,
          },
        },
      });
      const signing = await https.server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${created.id}/signing-secrets`,
      });
      assert.equal(signing.statusCode, 201);
      assert.deepEqual(await client.eventStreams.get(created.id!), created);
      const page = await client.eventStreams.list();
      assert.deepEqual(
        page.data.find((s) => 'id' in s && s.id === created.id),
        created,
      );
      const updated = await client.eventStreams.update(created.id!, { name: 'sdk-signed-renamed' });
      assert.equal(updated.name, 'sdk-signed-renamed');
      const listed = await https.server.request({ url: `/api/v2/event-streams/${created.id}/signing-secrets` });
      assert.deepEqual(
        listed.json().signing_secrets.map((s: { id: string }) => s.id),
        [signing.json().id],
      );
    });
  });
}
