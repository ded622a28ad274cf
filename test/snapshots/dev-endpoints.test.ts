import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { databaseKinds } from '../helpers/databases.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const OPERATOR_TOKEN = 'operator-token-0123456789-abcdefghijklmnop';
const ENDPOINTS = ['/_tenantry/reset', '/_tenantry/snapshot', '/_tenantry/restore'];

/** One raw HTTP/1.1 exchange: HTTP clients normalise URLs, so odd spellings have to be written by hand. */
function raw(port: number, target: string, headers = ''): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.setTimeout(5000, () => socket.destroy(new Error(`no answer to ${target}`)));
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0)));
    const body = '{}';
    socket.write(
      `POST ${target} HTTP/1.1\r\nHost: tenant.test\r\n${headers}Content-Type: application/json\r\n` +
        `Connection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
  });
}

/** Every spelling a router or a proxy might take for the endpoints. */
const spellings = (path: string) => [
  path,
  `${path}/`,
  path.toUpperCase(),
  path.replace('_', '%5F'),
  path.replace('_', '%5f'),
  path.replace('/reset', '%2Freset').replace('/snapshot', '%2Fsnapshot').replace('/restore', '%2Frestore'),
  `/${path}`,
  path.replace('/_tenantry/', '/_tenantry/./'),
  `/api/v2/..${path}`,
  `${path}?x=1`,
  `${path};x`,
];

const usersByEmail = async (server: TestServer, email: string) =>
  (await server.request({ url: `/api/v2/users-by-email?email=${email}` })).json() as unknown[];

for (const kind of databaseKinds()) {
  describe(`development endpoints: reset, snapshot, restore over HTTP (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind, { TENANTRY_DEV_ENDPOINTS: 'true', TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN });
      // The baseline reset() returns to: the state right after start-up, as startServer() takes it.
      await server.services.snapshots.markBaseline();
    });
    after(() => server.close());

    const operator = (url: string, payload?: object, token = OPERATOR_TOKEN) =>
      server.request({ method: 'POST', url, payload: payload ?? {}, token });

    it('saves a named snapshot, restores it after a delete, and resets to the start-up state', async () => {
      const created = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: {
          connection: 'Username-Password-Authentication',
          email: 'kept@example.com',
          password: 'horse battery',
        },
      });
      assert.equal(created.statusCode, 201);
      const saved = await operator('/_tenantry/snapshot', { name: 'with-kept' });
      assert.equal(saved.statusCode, 200, saved.body);
      assert.equal(saved.json().name, 'with-kept');
      const userId = created.json().user_id as string;
      assert.equal((await server.request({ method: 'DELETE', url: `/api/v2/users/${userId}` })).statusCode, 204);
      assert.deepEqual(await usersByEmail(server, 'kept@example.com'), []);

      const restored = await operator('/_tenantry/restore', { name: 'with-kept' });
      assert.equal(restored.statusCode, 200, restored.body);
      assert.equal((await usersByEmail(server, 'kept@example.com')).length, 1);

      assert.equal((await operator('/_tenantry/reset')).statusCode, 204);
      assert.deepEqual(await usersByEmail(server, 'kept@example.com'), []);
      // The admin token from before the reset still works: its client and keys are in the baseline.
      assert.equal((await server.request({ url: '/api/v2/users-by-email?email=a@b.c' })).statusCode, 200);
    });

    it('answers an unknown snapshot with 404 and a bad name with 400', async () => {
      const missing = await operator('/_tenantry/restore', { name: 'never-taken' });
      assert.equal(missing.statusCode, 404);
      assert.equal(missing.json().errorCode, 'inexistent_snapshot');
      assert.equal((await operator('/_tenantry/restore', { name: '../x' })).statusCode, 400);
      assert.equal((await operator('/_tenantry/restore', {})).statusCode, 400);
    });

    it('refuses every request without the operator token, with a wrong one, or with a tenant token', async () => {
      for (const url of ENDPOINTS) {
        for (const token of [null, 'wrong', `${OPERATOR_TOKEN}x`, OPERATOR_TOKEN.slice(1), server.adminToken]) {
          const refused = await server.request({ method: 'POST', url, payload: { name: 'x' }, token });
          assert.equal(refused.statusCode, 401, `${url} with ${String(token).slice(0, 12)}`);
        }
      }
    });
  });

  describe(`development endpoints are absent without TENANTRY_DEV_ENDPOINTS (${kind})`, () => {
    let server: TestServer;
    let port: number;
    before(async () => {
      // The operator token alone opens nothing.
      server = await startTestServer(kind, { TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN });
      await server.app.listen({ port: 0, host: '127.0.0.1' });
      port = (server.app.server.address() as net.AddressInfo).port;
    });
    after(() => server.close());

    it('answers 404 on every spelling, with and without the operator token', async () => {
      assert.equal(
        server.app.routeTable.some((r) => r.url.startsWith('/_tenantry')),
        false,
      );
      for (const path of ENDPOINTS) {
        for (const target of spellings(path)) {
          for (const headers of ['', `Authorization: Bearer ${OPERATOR_TOKEN}\r\n`]) {
            const status = await raw(port, target, headers);
            assert.ok(status === 404 || status === 400, `${target} answered ${status}`);
          }
        }
      }
      const injected = await server.request({ method: 'POST', url: '/_tenantry/reset', token: OPERATOR_TOKEN });
      assert.equal(injected.statusCode, 404);
    });
  });
}

describe('development endpoints configuration', () => {
  it('refuses TENANTRY_DEV_ENDPOINTS without an operator token of at least 32 characters', () => {
    assert.throws(() => loadConfig({ TENANTRY_DEV_ENDPOINTS: 'true' }), ConfigError);
    assert.throws(
      () => loadConfig({ TENANTRY_DEV_ENDPOINTS: 'true', TENANTRY_OPERATOR_TOKEN: 'short' }),
      /at least 32 characters/,
    );
    assert.equal(loadConfig({}).devEndpoints, false);
    assert.equal(
      loadConfig({ TENANTRY_DEV_ENDPOINTS: 'true', TENANTRY_OPERATOR_TOKEN: OPERATOR_TOKEN }).devEndpoints,
      true,
    );
  });
});
