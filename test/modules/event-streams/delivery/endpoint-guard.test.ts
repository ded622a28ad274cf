import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../../../src/config.ts';
import { EndpointGuard, nonPublicRange } from '../../../../src/modules/event-streams/delivery/endpoint-guard.ts';
import { EventStreamService } from '../../../../src/modules/event-streams/service.ts';
import { createCertificateAuthority, issueServerCertificate } from '../../../../src/tls/dev-ca.ts';
import { createTestDatabase, databaseKinds, type TestDatabase } from '../../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../../helpers/dns-server.ts';
import { freePort } from '../../../helpers/server-process.ts';
import { startTestServer, type TestServer } from '../../../helpers/server.ts';
import { startWebhookReceiver, waitUntil, type WebhookReceiver } from '../../../helpers/webhook-receiver.ts';

const root = path.resolve(import.meta.dirname, '../../../..');

/** Public, so accepted when a stream is saved; never connected to (streams using it get no events). */
const PUBLIC_IP = '93.184.215.14';

/** Production settings: DELIVERY_ALLOW_HTTP unset, so every endpoint is checked. */
const deliveryEnv = (dns: TestDnsServer) => ({
  DNS_SERVERS: dns.address,
  DELIVERY_RETRY_SCHEDULE_MS: '50,100,200',
  DELIVERY_POLL_MS: '20',
  DELIVERY_TIMEOUT_MS: '2000',
});

const webhook = (url: string) => ({
  type: 'webhook',
  configuration: { webhook_endpoint: url, webhook_authorization: { method: 'bearer', token: 'ssrf-test-token' } },
});

/** A TCP listener that counts the connections it accepts: proof that nothing reached it. */
async function startTcpListener(
  host: string,
): Promise<{ port: number; connections: () => number; close(): Promise<void> }> {
  let count = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    count++;
    sockets.add(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => count,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('webhook endpoint address classification', () => {
  it('tells public addresses from private, loopback, link-local, CGNAT and other special ranges, IPv4 and IPv6', () => {
    const expected: Record<string, string | undefined> = {
      '8.8.8.8': undefined,
      '93.184.215.14': undefined,
      '100.128.0.1': undefined,
      '172.32.0.1': undefined,
      '10.1.2.3': 'private',
      '172.16.0.1': 'private',
      '172.31.255.255': 'private',
      '192.168.1.1': 'private',
      '100.64.0.1': 'shared (CGNAT)',
      '100.127.255.255': 'shared (CGNAT)',
      '127.0.0.1': 'loopback',
      '127.255.0.9': 'loopback',
      '169.254.169.254': 'link-local',
      '0.0.0.0': 'unspecified',
      '224.0.0.1': 'multicast',
      '255.255.255.255': 'broadcast',
      '240.0.0.1': 'reserved',
      '192.0.2.1': 'documentation',
      '198.18.0.1': 'benchmarking',
      '2606:4700::1111': undefined,
      '::ffff:8.8.8.8': undefined,
      '::': 'unspecified',
      '::1': 'loopback',
      '::ffff:127.0.0.1': 'IPv4-mapped loopback',
      '::ffff:7f00:1': 'IPv4-mapped loopback',
      '::ffff:10.0.0.1': 'IPv4-mapped private',
      '64:ff9b::a9fe:a9fe': 'NAT64 link-local',
      '2002:c0a8:101::1': '6to4 private',
      'fd00::1': 'unique-local',
      'fe80::1%eth0': 'link-local',
      'ff02::1': 'multicast',
      '2001:db8::1': 'documentation',
      '2001::1': 'IETF protocol',
      '::127.0.0.1': 'reserved',
    };
    for (const [ip, range] of Object.entries(expected)) assert.equal(nonPublicRange(ip), range, ip);
  });

  it('reads DELIVERY_ALLOWED_HOSTS and refuses malformed entries at startup', () => {
    const config = loadConfig({
      DELIVERY_ALLOWED_HOSTS: ' hooks.internal, *.corp.example,10.0.0.0/8 , fd00::/8,127.0.0.1',
    });
    assert.deepEqual(config.deliveryAllowedHosts, [
      'hooks.internal',
      '*.corp.example',
      '10.0.0.0/8',
      'fd00::/8',
      '127.0.0.1',
    ]);
    assert.deepEqual(loadConfig({}).deliveryAllowedHosts, []);
    for (const bad of ['10.0.0.0/33', 'fd00::/129', 'not a host', '*.', 'http://x.example']) {
      assert.throws(
        () => loadConfig({ DELIVERY_ALLOWED_HOSTS: bad }),
        (e: Error) => e instanceof ConfigError && e.message.startsWith('DELIVERY_ALLOWED_HOSTS: '),
        bad,
      );
    }
  });

  it('allows listed names, suffixes and networks, and nothing else', async () => {
    const guard = new EndpointGuard({
      allowedHosts: ['hooks.internal', '*.corp.example', '10.0.0.0/8', 'fd00::/8'],
      dnsServers: [],
    });
    for (const host of [
      'hooks.internal',
      'a.corp.example',
      'b.a.corp.example',
      '10.9.8.7',
      '[::ffff:10.0.0.1]',
      '[fd12::1]',
      PUBLIC_IP,
    ]) {
      await guard.check(host);
    }
    for (const host of ['127.0.0.1', '[::1]', '192.168.0.1', '[fe80::1]', 'localhost', 'app.localhost']) {
      await assert.rejects(guard.check(host), { name: 'EndpointRefused' }, host);
    }
  });
});

for (const kind of databaseKinds()) {
  describe(`webhook endpoints must be public (${kind})`, () => {
    let dns: TestDnsServer;
    let server: TestServer;
    const streamsToDelete: string[] = [];
    before(async () => {
      dns = await startDnsServer();
      dns.setA('public.test', PUBLIC_IP);
      dns.setA('internal.test', '10.0.0.7');
      server = await startTestServer(kind, deliveryEnv(dns));
    });
    after(async () => {
      await server.close();
      await dns.close();
    });
    afterEach(async () => {
      for (const id of streamsToDelete.splice(0))
        await server.request({ method: 'DELETE', url: `/api/v2/event-streams/${id}` });
    });

    const countStreams = async () =>
      Number(
        (
          await server.services.database.db
            .selectFrom('event_streams')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const refusal = (reason: string) => ({
      statusCode: 400,
      error: 'Bad Request',
      message: `Payload validation error: '${reason}' on property destination.configuration.webhook_endpoint (URL of the webhook).`,
      errorCode: 'invalid_body',
    });
    const deliveryOf = (streamId: string) =>
      server.services.database.db
        .selectFrom('deliveries')
        .selectAll()
        .where('stream_id', '=', streamId)
        .executeTakeFirst();
    const attemptsOf = (streamId: string) =>
      server.services.database.db
        .selectFrom('delivery_attempts')
        .selectAll()
        .where('stream_id', '=', streamId)
        .orderBy('seq')
        .execute();
    let userCount = 0;
    const createUser = async () => {
      const response = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: {
          connection: 'Username-Password-Authentication',
          password: 'correct horse battery',
          email: `ssrf${++userCount}-${Date.now()}@example.com`,
        },
      });
      assert.equal(response.statusCode, 201, response.body);
    };

    it('refuses, on create and update, endpoints that are or resolve to non-public addresses, storing nothing', async () => {
      const before = await countStreams();
      const refused: Record<string, string> = {
        'https://10.0.0.1/hook': 'Webhook endpoints must be public: 10.0.0.1 is a non-public address (private)',
        'https://172.20.1.2/hook': 'Webhook endpoints must be public: 172.20.1.2 is a non-public address (private)',
        'https://192.168.0.10/hook': 'Webhook endpoints must be public: 192.168.0.10 is a non-public address (private)',
        'https://100.64.1.1/hook':
          'Webhook endpoints must be public: 100.64.1.1 is a non-public address (shared (CGNAT))',
        'https://169.254.169.254/latest/meta-data':
          'Webhook endpoints must be public: 169.254.169.254 is a non-public address (link-local)',
        'https://127.0.0.1:8443/hook': 'Webhook endpoints must be public: 127.0.0.1 is a non-public address (loopback)',
        // The URL parser reads 2130706433 as 127.0.0.1, as the HTTP client would.
        'https://2130706433/hook': 'Webhook endpoints must be public: 127.0.0.1 is a non-public address (loopback)',
        'https://0.0.0.0/hook': 'Webhook endpoints must be public: 0.0.0.0 is a non-public address (unspecified)',
        'https://224.0.0.1/hook': 'Webhook endpoints must be public: 224.0.0.1 is a non-public address (multicast)',
        'https://255.255.255.255/hook':
          'Webhook endpoints must be public: 255.255.255.255 is a non-public address (broadcast)',
        'https://[::1]/hook': 'Webhook endpoints must be public: ::1 is a non-public address (loopback)',
        'https://[::]/hook': 'Webhook endpoints must be public: :: is a non-public address (unspecified)',
        'https://[::ffff:127.0.0.1]/hook':
          'Webhook endpoints must be public: ::ffff:7f00:1 is a non-public address (IPv4-mapped loopback)',
        'https://[::ffff:a00:1]/hook':
          'Webhook endpoints must be public: ::ffff:a00:1 is a non-public address (IPv4-mapped private)',
        'https://[fd00::1]/hook': 'Webhook endpoints must be public: fd00::1 is a non-public address (unique-local)',
        'https://[fe80::1]/hook': 'Webhook endpoints must be public: fe80::1 is a non-public address (link-local)',
        'https://localhost:8443/hook':
          'Webhook endpoints must be public: localhost resolves to 127.0.0.1, a non-public address (loopback)',
        'https://internal.test/hook':
          'Webhook endpoints must be public: internal.test resolves to 10.0.0.7, a non-public address (private)',
        'https://nowhere.test/hook': 'Webhook endpoint nowhere.test could not be resolved (ENOTFOUND)',
        'http://public.test/hook': 'String does not match pattern ^https://.*: http://public.test/hook',
      };
      for (const [endpoint, reason] of Object.entries(refused)) {
        const response = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: { destination: webhook(endpoint) },
        });
        assert.equal(response.statusCode, 400, endpoint);
        assert.deepEqual(response.json(), refusal(reason), endpoint);
      }
      assert.equal(await countStreams(), before, 'nothing stored');

      // Public literals and names are accepted (disabled: no event is ever sent to them).
      for (const endpoint of [
        `https://${PUBLIC_IP}/hook`,
        'https://public.test/hook',
        'https://[2606:4700::1111]/hook',
        'https://PUBLIC.test./hook',
      ]) {
        const response = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: { status: 'disabled', destination: webhook(endpoint) },
        });
        assert.equal(response.statusCode, 201, `${endpoint}: ${response.body}`);
        streamsToDelete.push(response.json().id);
      }

      const stream = streamsToDelete[0]!;
      const original = (await server.request({ url: `/api/v2/event-streams/${stream}` })).json();
      const patched = await server.request({
        method: 'PATCH',
        url: `/api/v2/event-streams/${stream}`,
        payload: { name: 'renamed', destination: webhook('https://internal.test/hook') },
      });
      assert.equal(patched.statusCode, 400);
      assert.deepEqual(
        patched.json(),
        refusal('Webhook endpoints must be public: internal.test resolves to 10.0.0.7, a non-public address (private)'),
      );
      assert.deepEqual(
        (await server.request({ url: `/api/v2/event-streams/${stream}` })).json(),
        original,
        'the stream is unchanged',
      );
    });

    it('refuses at delivery a name that resolved to a public address when saved and to loopback now (DNS rebinding)', async () => {
      const listener = await startTcpListener('127.0.0.1');
      try {
        dns.setA('rebind.test', PUBLIC_IP);
        const created = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: {
            name: 'rebind',
            subscriptions: [{ event_type: 'user.created' }],
            destination: webhook(`https://rebind.test:${listener.port}/hook`),
          },
        });
        assert.equal(created.statusCode, 201, created.body);
        const stream = created.json();
        streamsToDelete.push(stream.id);

        dns.setA('rebind.test', '127.0.0.1');
        await createUser();
        await waitUntil(
          async () => (await deliveryOf(stream.id))?.status === 'failed',
          10_000,
          () => 'the delivery to fail',
        );
        const attempts = await attemptsOf(stream.id);
        assert.equal(attempts.length, 1, 'refused once, not retried');
        assert.equal(attempts[0]!.status, 'failed');
        assert.equal(
          attempts[0]!.error_message,
          'Refused: rebind.test resolves to 127.0.0.1, a non-public address (loopback)',
        );
        assert.equal(listener.connections(), 0, 'no connection reached the loopback listener');

        const listed = (await server.request({ url: `/api/v2/event-streams/${stream.id}/deliveries` })).json();
        assert.equal(listed.deliveries.length, 1);
        assert.deepEqual(
          listed.deliveries[0].attempts.map((a: { error_message: string }) => a.error_message),
          [attempts[0]!.error_message],
        );
      } finally {
        await listener.close();
      }
    });

    it('refuses at delivery literal loopback endpoints saved while an allow list permitted them (IPv4, IPv6, IPv4-mapped)', async () => {
      const v4 = await startTcpListener('127.0.0.1');
      const v6 = await startTcpListener('::1');
      try {
        // Saved by a node allowing loopback; delivered by the server's worker, which does not.
        const permissive = new EventStreamService(
          server.services.database,
          server.services.secretBox,
          server.services.tenants,
          {
            guard: new EndpointGuard({ allowedHosts: ['127.0.0.0/8', '::1'], dnsServers: [] }),
            queued: async () => undefined,
            maxPerTenant: server.services.config.eventStreamsMax,
            redeliveryChunkRows: server.services.config.eventStreamRedeliveryChunkRows,
          },
        );
        const endpoints = {
          [`https://127.0.0.1:${v4.port}/hook`]: 'Refused: 127.0.0.1 is a non-public address (loopback)',
          [`https://[::1]:${v6.port}/hook`]: 'Refused: ::1 is a non-public address (loopback)',
          [`https://[::ffff:127.0.0.1]:${v4.port}/hook`]:
            'Refused: ::ffff:7f00:1 is a non-public address (IPv4-mapped loopback)',
        };
        const ids = new Map<string, string>();
        for (const endpoint of Object.keys(endpoints)) {
          const stream = await permissive.streams.create(server.tenant.id, {
            subscriptions: [{ event_type: 'user.created' }],
            destination: webhook(endpoint) as never,
          });
          streamsToDelete.push(stream.id);
          ids.set(endpoint, stream.id);
        }
        await createUser();
        for (const [endpoint, message] of Object.entries(endpoints)) {
          const id = ids.get(endpoint)!;
          await waitUntil(
            async () => (await deliveryOf(id))?.status === 'failed',
            10_000,
            () => `the delivery to ${endpoint} to fail`,
          );
          const attempts = await attemptsOf(id);
          assert.deepEqual(
            attempts.map((a) => [a.status, a.error_message]),
            [['failed', message]],
            endpoint,
          );
        }
        assert.equal(v4.connections() + v6.connections(), 0, 'no connection reached a loopback listener');
      } finally {
        await v4.close();
        await v6.close();
      }
    });
  });

  describe(`allow-listed private endpoints receive events over HTTPS (${kind})`, () => {
    const CLIENT_ID = 'ssrf-admin';
    const CLIENT_SECRET = 'ssrf-admin-secret-0123456789-abcdefghijklmn';
    let database: TestDatabase;
    let dns: TestDnsServer;
    let receiver: WebhookReceiver;
    let child: ChildProcess;
    let base: string;
    let token: string;

    before(async () => {
      database = await createTestDatabase(kind);
      dns = await startDnsServer();
      dns.setA('hooks.internal', '127.0.0.1');
      const ca = createCertificateAuthority();
      const caFile = path.join(database.dataDir, 'receiver-ca.pem');
      fs.writeFileSync(caFile, ca.cert);
      receiver = await startWebhookReceiver({ tls: issueServerCertificate(ca, ['127.0.0.1', 'hooks.internal']) });
      const port = await freePort();
      // A real server process: NODE_EXTRA_CA_CERTS, read at process start, is how an operator trusts
      // the internal CA of an allow-listed receiver.
      child = spawn(process.execPath, ['bin/tenantry.mjs', 'serve'], {
        cwd: root,
        env: {
          PATH: process.env.PATH ?? '',
          PORT: String(port),
          DATA_DIR: database.dataDir,
          DATABASE_URL: database.databaseUrl ?? '',
          BOOTSTRAP_CLIENT_ID: CLIENT_ID,
          BOOTSTRAP_CLIENT_SECRET: CLIENT_SECRET,
          LOG_LEVEL: 'silent',
          NODE_EXTRA_CA_CERTS: caFile,
          DNS_SERVERS: dns.address,
          DELIVERY_ALLOWED_HOSTS: 'hooks.internal,127.0.0.0/8',
          DELIVERY_POLL_MS: '20',
          DELIVERY_RETRY_SCHEDULE_MS: '50',
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('Tenantry serves') && resolve());
        child.on('exit', () => reject(new Error('server exited before it was ready')));
      });
      base = `http://127.0.0.1:${port}`;
      const response = await fetch(`${base}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          grant_type: 'client_credentials',
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          audience: `https://localhost:${port}/api/v2/`,
        }),
      });
      token = ((await response.json()) as { access_token: string }).access_token;
    });
    after(async () => {
      if (child && child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await receiver?.close();
      await dns?.close();
      await database?.drop();
    });

    const api = async (method: string, url: string, body?: unknown) => {
      const response = await fetch(`${base}${url}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
    };

    it('delivers to an allowed network and an allowed name, and still refuses what is not listed', async () => {
      const port = new URL(receiver.url).port;
      const byAddress = await api('POST', '/api/v2/event-streams', {
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(`https://127.0.0.1:${port}/hook`),
      });
      assert.equal(byAddress.status, 201, JSON.stringify(byAddress.body));
      const byName = await api('POST', '/api/v2/event-streams', {
        subscriptions: [{ event_type: 'user.created' }],
        destination: webhook(`https://hooks.internal:${port}/hook`),
      });
      assert.equal(byName.status, 201, JSON.stringify(byName.body));
      const unlisted = await api('POST', '/api/v2/event-streams', { destination: webhook('https://[::1]/hook') });
      assert.equal(unlisted.status, 400);
      assert.equal(
        unlisted.body.message,
        "Payload validation error: 'Webhook endpoints must be public: ::1 is a non-public address (loopback)' on property destination.configuration.webhook_endpoint (URL of the webhook).",
      );

      const user = await api('POST', '/api/v2/users', {
        connection: 'Username-Password-Authentication',
        email: 'allowed@example.com',
        password: 'correct horse battery',
      });
      assert.equal(user.status, 201);
      const requests = await receiver.waitFor((r) => r.length >= 2, 15_000);
      assert.deepEqual(new Set(requests.map((r) => r.json().a0stream)), new Set([byAddress.body.id, byName.body.id]));
      for (const request of requests) {
        assert.equal(request.json().data.object.user_id, user.body.user_id);
        assert.equal(request.headers.authorization, 'Bearer ssrf-test-token');
      }
    });
  });
}
