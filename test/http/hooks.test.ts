import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import { registerRequestPipeline, type RequestPipeline } from '../../src/http/hooks.ts';
import { ALL_SCOPES } from '../../src/modules/oauth/scopes.ts';
import { databaseKinds } from '../helpers/databases.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/** The routes that may be served without a token; anything else found public is a hole. */
const PUBLIC_ROUTES = [
  /^\/oauth\/token$/,
  /^\/\.well-known\/jwks\.json$/,
  /^\/\.well-known\/openid-configuration$/,
  /^\/\.well-known\/oauth-authorization-server$/,
  /^\/u\/email-verification$/,
  /^\/health$/,
  /^\/health\/ready$/,
  /^\/docs(\/.*)?$/,
  /^\/console(\/(console\.js|console\.css|favicon\.svg))?$/,
  /^\/api\/v2\/openapi\.json$/,
  // Development only (TENANTRY_DEV_ENDPOINTS): they check the operator token themselves.
  /^\/_tenantry\/(reset|snapshot|restore)$/,
];

/** A concrete path for a route's URL: every parameter and wildcard filled. */
const concrete = (url: string) => url.replace(/:[A-Za-z_]+/g, 'x').replace(/\*/g, 'x');

function assertErrorShape(body: unknown, statusCode: number): void {
  const error = body as Record<string, unknown>;
  assert.equal(error.statusCode, statusCode);
  assert.equal(typeof error.error, 'string');
  assert.equal(typeof error.message, 'string');
}

/** One raw HTTP/1.1 exchange: HTTP clients normalise URLs, so odd spellings have to be written by hand. */
function raw(port: number, head: string, body = ''): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.setTimeout(5000, () => socket.destroy(new Error(`no answer to ${head.split('\r\n')[0]}`)));
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1] ?? 0);
      resolve({ status, text: received.slice(received.indexOf('\r\n\r\n') + 4) });
    });
    // No half-close: the server may drop a request whose client has ended its side before the answer.
    socket.write(`${head}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
}

const pipelineOf = (server: TestServer): RequestPipeline => server.services;

for (const kind of databaseKinds()) {
  describe(`deny by default, on the matched route (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      // The development endpoints on, so the route table's check covers them too.
      server = await startTestServer(kind, {
        ANONYMOUS_RATE_LIMIT_SIZE: '100000',
        TENANTRY_DEV_ENDPOINTS: 'true',
        TENANTRY_OPERATOR_TOKEN: 'operator-token-of-at-least-32-characters',
      });
    });
    after(() => server.close());

    it('serves only the declared public routes without a token', () => {
      const table = server.app.routeTable;
      assert.ok(table.length > 40, `the route table lists every route (${table.length})`);
      for (const route of table.filter((r) => r.public)) {
        assert.ok(
          PUBLIC_ROUTES.some((allowed) => allowed.test(route.url)),
          `${route.method} ${route.url} is public but not meant to be`,
        );
      }
      for (const route of table.filter((r) => !r.public)) {
        assert.ok(route.scopes && route.scopes.length > 0, `${route.method} ${route.url} declares its scopes`);
      }
    });

    it('answers every non-public route of the route table with 401 without a token, and 403 with a token lacking its scopes', async () => {
      const clients = new Map<string, string>();
      const tokenWithout = async (scopes: readonly string[]) => {
        const other = ALL_SCOPES.find((scope) => !scopes.includes(scope))!;
        if (!clients.has(other)) clients.set(other, (await server.clientWithScopes([other])).token);
        return clients.get(other)!;
      };
      let checked = 0;
      for (const route of server.app.routeTable.filter((r) => !r.public)) {
        const request = {
          method: route.method as 'GET',
          url: concrete(route.url),
          payload: route.method === 'GET' || route.method === 'HEAD' ? undefined : {},
        };
        const anonymous = await server.request({ ...request, token: null });
        assert.equal(anonymous.statusCode, 401, `${route.method} ${route.url} without a token`);
        if (route.method !== 'HEAD') assertErrorShape(anonymous.json(), 401);
        const garbage = await server.request({ ...request, token: 'eyJhbGciOiJub25lIn0.e30.' });
        assert.equal(garbage.statusCode, 401, `${route.method} ${route.url} with an unsigned token`);
        const weak = await server.request({ ...request, token: await tokenWithout(route.scopes ?? []) });
        assert.equal(weak.statusCode, 403, `${route.method} ${route.url} with a token lacking its scopes`);
        if (route.method !== 'HEAD') assert.equal(weak.json().errorCode, 'insufficient_scope');
        checked++;
      }
      assert.ok(checked > 30, `${checked} routes checked`);
    });

    it('authenticates a route added without a declaration, and grants it to no token', async () => {
      const app = Fastify();
      registerRequestPipeline(app, pipelineOf(server));
      let reached = 0;
      app.get('/api/v2/undeclared', async () => ++reached);
      app.get('/elsewhere', async () => ++reached);
      await app.ready();
      for (const url of ['/api/v2/undeclared', '/elsewhere']) {
        const anonymous = await app.inject({ url, headers: { host: server.domain } });
        assert.equal(anonymous.statusCode, 401, `${url} without a token`);
        const admin = await app.inject({
          url,
          headers: { host: server.domain, authorization: `Bearer ${server.adminToken}` },
        });
        assert.equal(admin.statusCode, 403, `${url} with every scope`);
      }
      assert.equal(reached, 0);
      await app.close();

      const misdeclared = Fastify();
      registerRequestPipeline(misdeclared, { ...pipelineOf(server) });
      misdeclared.get('/half-declared', { config: { tenantless: true } }, async () => 1);
      await assert.rejects(async () => {
        await misdeclared.ready();
      }, /tenantless routes must be public/);
    });

    describe('odd spellings over a raw socket', () => {
      let port: number;
      let userId: string;
      let segmentId: string;
      const state = async () =>
        JSON.stringify(
          await Promise.all([
            server.request({ url: '/api/v2/users-by-email?email=victim%40example.com' }).then((r) => r.json()),
            server.request({ url: '/api/v2/experimentation/segments' }).then((r) => r.json()),
            server.request({ url: '/api/v2/event-streams' }).then((r) => r.json()),
            server.request({ url: '/api/v2/custom-domains' }).then((r) => r.json()),
          ]),
        );

      before(async () => {
        await server.app.listen({ port: 0, host: '127.0.0.1' });
        port = (server.app.server.address() as net.AddressInfo).port;
        const user = await server.request({
          method: 'POST',
          url: '/api/v2/users',
          payload: {
            connection: 'Username-Password-Authentication',
            email: 'victim@example.com',
            password: 'Correct-Horse-9',
            verify_email: false,
          },
        });
        assert.equal(user.statusCode, 201, user.body);
        userId = user.json().user_id;
        const segment = await server.request({
          method: 'POST',
          url: '/api/v2/experimentation/segments',
          payload: { name: 'victims', rules: [{ match: { country: ['FR'] } }] },
        });
        assert.equal(segment.statusCode, 201, segment.body);
        segmentId = segment.json().id;
      });

      it('never reaches a handler without a token, however the path is spelled, and changes nothing', async () => {
        const before = await state();
        const host = server.domain;
        const id = encodeURIComponent(userId).replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`);
        const reads = [
          '/%61pi/v2/users-by-email?email=victim%40example.com',
          '/api/v%32/users-by-email?email=victim%40example.com',
          '/%2561pi/v2/users-by-email?email=victim%40example.com',
          '/api%2Fv2/users-by-email?email=victim%40example.com',
          `http://${host}/api/v2/users-by-email?email=victim%40example.com`,
          `https://${host}/api/v2/users-by-email?email=victim%40example.com`,
          `HTTP://${host.toUpperCase()}/%61pi/v2/users-by-email?email=victim%40example.com`,
          '//api/v2/users-by-email?email=victim%40example.com',
          '/api//v2/users-by-email?email=victim%40example.com',
          '/api/v2/users-by-email/?email=victim%40example.com',
          '/api/v2/users-by-email//?email=victim%40example.com',
          '/API/v2/users-by-email?email=victim%40example.com',
          '/Api/V2/Users-By-Email?email=victim%40example.com',
          '/api/v2/./users-by-email?email=victim%40example.com',
          '/api/v2/x/../users-by-email?email=victim%40example.com',
          '/api/v2/users-by-email;x?email=victim%40example.com',
          '/api/v2/users-by-email%3Fx?email=victim%40example.com',
          '/api/v2/users-by-email#frag?email=victim%40example.com',
          `/api/v2/users/${id}`,
          `/%61pi/v2/experimentation/segments/${segmentId}`,
          '/%61pi/v2/event-streams',
          '/%61pi/v2/custom-domains',
          '/%61pi/v2/attack-protection/captcha',
        ];
        const writes: Array<[string, string, string]> = [
          [
            'POST',
            '/%61pi/v2/experimentation/segments',
            JSON.stringify({ name: 'planted', rules: [{ match: { country: ['FR'] } }] }),
          ],
          [
            'POST',
            `http://${host}/api/v2/experimentation/segments`,
            JSON.stringify({ name: 'planted', rules: [{ match: { country: ['FR'] } }] }),
          ],
          [
            'POST',
            '/api/v%32/event-streams',
            JSON.stringify({
              destination: { type: 'webhook', configuration: { webhook_endpoint: 'https://attacker.example/' } },
            }),
          ],
          ['PATCH', `/%61pi/v2/experimentation/segments/${segmentId}`, JSON.stringify({ name: 'renamed' })],
          ['PATCH', `/api/v2/users/${id}`, JSON.stringify({ email: 'attacker@example.com' })],
          ['PATCH', '/api/v2/attack-protection/captcha/', JSON.stringify({ active_provider_id: 'simple_captcha' })],
          ['DELETE', `/%61pi/v2/users/${id}`, ''],
          ['DELETE', `https://${host}/api/v2/users/${userId}`, ''],
          ['DELETE', `/api/v2/experimentation/segments/${segmentId}/`, ''],
          ['DELETE', `//api/v2/experimentation/segments/${segmentId}`, ''],
          ['POST', '/%61pi/v2/tickets/email-verification', JSON.stringify({ user_id: userId })],
        ];
        const answers: string[] = [];
        for (const path of reads) {
          for (const hostHeader of [host, host.toUpperCase(), `${host}.`]) {
            const { status, text } = await raw(port, `GET ${path} HTTP/1.1\r\nHost: ${hostHeader}`);
            answers.push(`${status} GET ${path} (Host: ${hostHeader})`);
            assert.ok(
              [400, 401, 404].includes(status),
              `GET ${path} (Host: ${hostHeader}) answered ${status}: ${text}`,
            );
            if (text.startsWith('{')) assertErrorShape(JSON.parse(text), status);
          }
        }
        for (const [method, path, body] of writes) {
          for (const contentType of ['application/json', 'Application/JSON; charset=utf-8']) {
            const { status, text } = await raw(
              port,
              `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: ${contentType}`,
              body,
            );
            answers.push(`${status} ${method} ${path}`);
            assert.ok([400, 401, 404].includes(status), `${method} ${path} answered ${status}: ${text}`);
          }
        }
        // The spellings the router does match are the ones that must be refused for want of a token.
        assert.ok(answers.filter((a) => a.startsWith('401')).length >= 20, answers.join('\n'));
        assert.equal(await state(), before);
      });

      it('refuses a request that names two hosts (RFC 9112 §3.2), whichever tenant its token is of', async () => {
        // A proxy in front may route by the last Host line, or by an absolute target's authority, while
        // the tenant here would be the first Host line's: such a request is a 400, never served.
        const other = await server.addTenant('hosts-other', 'hosts-other.test');
        const host = server.domain;
        const mine = `Authorization: Bearer ${server.adminToken}`;
        const theirs = `Authorization: Bearer ${other.token}`;
        const path = '/api/v2/event-streams';
        const refused: string[] = [
          `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nHost: hosts-other.test\r\n${mine}`,
          `GET ${path} HTTP/1.1\r\nHost: hosts-other.test\r\nHost: ${host}\r\n${theirs}`,
          `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nhost: ${host}\r\n${mine}`,
          `GET http://hosts-other.test${path} HTTP/1.1\r\nHost: ${host}\r\n${mine}`,
          `GET https://hosts-other.test${path} HTTP/1.1\r\nHost: ${host}\r\n${mine}`,
          `GET http://${host}${path} HTTP/1.1\r\nHost: hosts-other.test\r\n${theirs}`,
          `GET http://${host}:8443${path} HTTP/1.1\r\nHost: ${host}\r\n${mine}`,
          `POST http://hosts-other.test${path} HTTP/1.1\r\nHost: ${host}\r\n${mine}\r\nContent-Type: application/json`,
          `GET http://hosts-other.test/oauth/token HTTP/1.1\r\nHost: ${host}`,
          `GET http://hosts-other.test/.well-known/openid-configuration HTTP/1.1\r\nHost: ${host}`,
        ];
        for (const head of refused) {
          const { status, text } = await raw(port, head, head.startsWith('POST') ? '{}' : '');
          assert.equal(status, 400, `${head.split('\r\n').slice(0, 3).join(' | ')}: ${text}`);
          assert.deepEqual(JSON.parse(text), {
            statusCode: 400,
            error: 'Bad Request',
            message:
              'The request names its host more than once (two Host headers, or an absolute target naming another host).',
            errorCode: 'invalid_headers',
          });
        }
        // One host, however spelled, is served as before.
        for (const head of [
          `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n${mine}`,
          `GET http://${host}${path} HTTP/1.1\r\nHost: ${host}\r\n${mine}`,
          `GET HTTP://${host.toUpperCase()}:80${path} HTTP/1.1\r\nHost: ${host}\r\n${mine}`,
          `GET https://${host}${path} HTTP/1.1\r\nHost: ${host}:443\r\n${mine}`,
          `GET ${path} HTTP/1.1\r\nHost: hosts-other.test\r\n${theirs}`,
        ]) {
          const { status, text } = await raw(port, head);
          assert.equal(status, 200, `${head.split('\r\n')[0]}: ${text}`);
        }
      });

      it("answers what the HTTP parser refuses in the API's error shape, and closes the connection", async () => {
        const host = server.domain;
        const mine = `Authorization: Bearer ${server.adminToken}`;
        const malformed = [
          `GET /api/v2/event-streams HTTP/1.1\r\nHost: ${host}\r\nBad Header: x\r\n${mine}`,
          `GET /api/v2/event-streams HTTP/1.1\r\nHost: ${host}\r\nX-Odd: a\u0001b\r\n${mine}`,
          `GET /api/v2/event streams HTTP/1.1\r\nHost: ${host}\r\n${mine}`,
        ];
        for (const head of malformed) {
          const { status, text } = await raw(port, head);
          assert.equal(status, 400, `${head.split('\r\n')[0]}: ${text}`);
          const body = JSON.parse(text);
          assertErrorShape(body, 400);
          assert.equal(body.errorCode, 'invalid_request');
          assert.match(body.message, /^The request is not valid HTTP\/1\.1: \S.*\.$/);
          assert.ok(!text.includes(server.adminToken), 'the refusal does not repeat the request');
        }
        const { status, text } = await raw(
          port,
          `GET /api/v2/event-streams HTTP/1.1\r\nHost: ${host}\r\nX-Big: ${'a'.repeat(20_000)}`,
        );
        assert.equal(status, 431, text);
        assert.deepEqual(JSON.parse(text), {
          statusCode: 431,
          error: 'Request Header Fields Too Large',
          message: "The request's headers are larger than the server accepts.",
          errorCode: 'invalid_headers',
        });
      });
    });
  });
}
