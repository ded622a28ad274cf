import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { databaseKinds } from './helpers/databases.ts';
import { ADMIN_SECRET, startTestServer, type TestServer } from './helpers/server.ts';

/**
 * Waits until a tenant's bucket (refilled at 1 a second) has the token its first grant spent back:
 * addTenant and the server's admin token are granted through /oauth/token, which draws on the bucket.
 */
const refilled = () => new Promise((resolve) => setTimeout(resolve, 1_100));

for (const kind of databaseKinds()) {
  describe(`HTTP errors, rate limits, logs (${kind})`, () => {
    let server: TestServer;
    const logLines: string[] = [];
    before(async () => {
      const logStream = new PassThrough();
      logStream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString().split('\n').filter(Boolean)));
      server = await startTestServer(
        kind,
        { RATE_LIMIT_SIZE: '5', RATE_LIMIT_PER_SECOND: '1', BODY_LIMIT_BYTES: '2048', LOG_LEVEL: 'info' },
        { logStream },
      );
      await refilled();
    });
    after(() => server.close());

    it('answers malformed JSON, wrong content types, oversized bodies and unknown routes with the error shape', async () => {
      const malformed = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        headers: { 'content-type': 'application/json' },
        payload: '{"connection":',
      });
      assert.deepEqual(malformed.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: 'Invalid request payload JSON format',
        errorCode: 'invalid_body',
      });
      const wrongType = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        headers: { 'content-type': 'text/plain' },
        payload: 'hello',
      });
      assert.equal(wrongType.statusCode, 415);
      assert.equal(wrongType.json().error, 'Unsupported Media Type');
      const big = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: { connection: 'x'.repeat(4096) },
      });
      assert.equal(big.statusCode, 413);
      assert.equal(big.json().error, 'Payload Too Large');
      const unknown = await server.request({ url: '/api/v2/no-such-thing' });
      assert.deepEqual(unknown.json(), { statusCode: 404, error: 'Not Found', message: 'Not Found' });
      const proto = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        headers: { 'content-type': 'application/json' },
        payload:
          '{"__proto__":{"polluted":true},"connection":"Username-Password-Authentication","email":"p@example.com","password":"long-enough-pw"}',
      });
      assert.equal(proto.statusCode, 201);
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    });

    it('answers a path it cannot decode, or a path parameter past 512 characters, with the error shape and without echoing the path', async () => {
      const undecodable = await server.request({ url: '/api/v2/users/%E0%A4%A' });
      assert.deepEqual(undecodable.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: 'The request path is not valid percent-encoded UTF-8.',
        errorCode: 'invalid_uri',
      });
      const long = await server.request({ url: `/api/v2/users/${'x'.repeat(600)}` });
      assert.deepEqual(long.json(), {
        statusCode: 414,
        error: 'URI Too Long',
        message: 'A path parameter is longer than 512 characters.',
        errorCode: 'invalid_uri',
      });
    });

    it('limits each tenant with a token bucket and reports it on every response', async () => {
      const other = await server.addTenant('limited', 'limited.test');
      await refilled();
      const statuses: number[] = [];
      let last;
      for (let i = 0; i < 8; i++) {
        last = await server.request({
          url: '/api/v2/users-by-email?email=a%40b.co',
          token: other.token,
          headers: { host: 'limited.test' },
        });
        statuses.push(last.statusCode);
        assert.equal(last.headers['x-ratelimit-limit'], '5');
        const reset = Number(last.headers['x-ratelimit-reset']);
        assert.ok(
          Number.isInteger(reset) && Math.abs(reset - Date.now() / 1000) < 30,
          `reset ${reset} is absolute epoch seconds`,
        );
      }
      assert.deepEqual(statuses.slice(0, 5), [200, 200, 200, 200, 200]);
      assert.equal(statuses[7], 429);
      assert.equal(last!.headers['x-ratelimit-remaining'], '0');
      assert.deepEqual(last!.json(), {
        statusCode: 429,
        error: 'Too Many Requests',
        message: 'Global limit has been reached',
        errorCode: 'too_many_requests',
      });
      // Another tenant's bucket is untouched.
      const fresh = await server.addTenant('fresh', 'fresh.test');
      await refilled();
      const theirs = await server.request({
        url: '/api/v2/users-by-email?email=a%40b.co',
        token: fresh.token,
        headers: { host: 'fresh.test' },
      });
      assert.equal(theirs.statusCode, 200);
      assert.equal(theirs.headers['x-ratelimit-remaining'], '4');
      // Requests without a valid token draw on their address's bucket, never on the tenant's, and carry its headers.
      for (const token of [null, 'not-a-token', `${fresh.token.slice(0, -4)}AAAA`]) {
        const refused = await server.request({
          url: '/api/v2/users-by-email?email=a%40b.co',
          token,
          headers: { host: 'fresh.test' },
        });
        assert.equal(refused.statusCode, 401);
        assert.equal(refused.headers['x-ratelimit-limit'], '100');
      }
      const after = await server.request({
        url: '/api/v2/users-by-email?email=a%40b.co',
        token: fresh.token,
        headers: { host: 'fresh.test' },
      });
      assert.equal(after.headers['x-ratelimit-remaining'], '3');
    });

    it('logs JSON lines with request ids and never the credentials', async () => {
      await server.request({
        url: '/api/v2/users-by-email?email=a%40b.co',
        headers: { 'x-request-id': 'trace-me-123' },
      });
      await server.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { host: server.domain },
        payload: { grant_type: 'client_credentials', client_id: 'x', client_secret: ADMIN_SECRET },
      });
      const all = logLines.join('\n');
      assert.ok(logLines.length > 0);
      const traced = logLines.map((l) => JSON.parse(l)).filter((l) => l.reqId === 'trace-me-123');
      assert.ok(traced.length >= 1, 'the incoming x-request-id is the request id of its log lines');
      assert.ok(traced.some((l) => l.req?.headers?.authorization === '[redacted]'));
      assert.ok(!all.includes(server.adminToken), 'the bearer token never appears in logs');
      assert.ok(!all.includes(ADMIN_SECRET), 'client secrets never appear in logs');
    });

    it('serves /health without a tenant or token', async () => {
      const health = await server.app.inject({ url: '/health', headers: { host: 'anything.test' } });
      assert.deepEqual(health.json(), { status: 'ok' });
    });
  });
}
