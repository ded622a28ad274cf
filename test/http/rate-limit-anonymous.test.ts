import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { clientAddress } from '../../src/http/client-address.ts';
import { databaseKinds } from '../helpers/databases.ts';
import { ADMIN_ID, ADMIN_SECRET, startTestServer, type TestServer } from '../helpers/server.ts';

const USERS = '/api/v2/users-by-email?email=a%40b.co';

/** A client-credentials grant at the server's tenant, from `remoteAddress`. */
const grantFrom = (server: TestServer, remoteAddress: string, clientId: string, clientSecret: string) =>
  server.app.inject({
    method: 'POST',
    url: '/oauth/token',
    remoteAddress,
    headers: { host: server.domain },
    payload: {
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
      audience: `https://${server.domain}/api/v2/`,
    },
  });

it('client addresses: IPv4 one by one, IPv6 by its /64', () => {
  assert.equal(clientAddress('203.0.113.9'), '203.0.113.9');
  assert.equal(clientAddress('::ffff:203.0.113.9'), '203.0.113.9');
  assert.equal(clientAddress('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  assert.equal(clientAddress('2001:DB8:1:2::99'), '2001:db8:1:2::/64');
  assert.equal(clientAddress('2001:db8::1'), '2001:db8:0:0::/64');
  assert.equal(clientAddress('fe80::1%eth0'), 'fe80:0:0:0::/64');
  assert.equal(clientAddress('::1'), '0:0:0:0::/64');
});

it('client addresses: a port written beside the address is not part of it', () => {
  assert.equal(clientAddress('203.0.113.9:1234'), '203.0.113.9');
  assert.equal(clientAddress('[2001:db8:1:2::99]:443'), '2001:db8:1:2::/64');
  assert.equal(clientAddress('[::ffff:203.0.113.9]:80'), '203.0.113.9');
  assert.equal(clientAddress('[2001:db8::1]'), '2001:db8:0:0::/64');
});

for (const kind of databaseKinds()) {
  describe(`anonymous traffic cannot lock a tenant out (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind, {
        RATE_LIMIT_SIZE: '20',
        RATE_LIMIT_PER_SECOND: '1',
        ANONYMOUS_RATE_LIMIT_SIZE: '3',
        ANONYMOUS_RATE_LIMIT_PER_SECOND: '1',
        TOKEN_FAILURES_PER_CLIENT_PER_MINUTE: '3',
        TOKEN_FAILURES_PER_ADDRESS_PER_MINUTE: '5',
      });
      // The admin token's grant spent one of the tenant's bucket: refilled (1 a second) before counting.
      await new Promise((resolve) => setTimeout(resolve, 1_100));
    });
    after(() => server.close());

    it('limits requests without a valid token per address, and leaves the tenant its whole bucket', async () => {
      const from = (remoteAddress: string, token: string | null, headers: Record<string, string> = {}) =>
        server.request({ url: USERS, token, remoteAddress, headers });
      const flood = [];
      for (let i = 0; i < 40; i++)
        flood.push((await from('198.51.100.7', i % 2 ? null : 'forged.token.value')).statusCode);
      assert.deepEqual(flood.slice(0, 3), [401, 401, 401]);
      assert.ok(
        flood.slice(4).every((s) => s === 429),
        flood.join(','),
      );
      const refused = await from('198.51.100.7', null);
      assert.equal(refused.statusCode, 429);
      assert.deepEqual(refused.json(), {
        statusCode: 429,
        error: 'Too Many Requests',
        message: 'Global limit has been reached',
        errorCode: 'too_many_requests',
      });
      assert.ok(Number(refused.headers['retry-after']) >= 1);
      // Without TRUST_PROXY, a forged X-Forwarded-For buys no fresh bucket.
      assert.equal((await from('198.51.100.7', null, { 'x-forwarded-for': '192.0.2.1' })).statusCode, 429);
      // Another address is not held up, and the tenant's own client still has every token of its bucket.
      assert.equal((await from('198.51.100.8', null)).statusCode, 401);
      const mine = await from('198.51.100.7', server.adminToken);
      assert.equal(mine.statusCode, 200);
      assert.equal(mine.headers['x-ratelimit-limit'], '20');
      assert.equal(mine.headers['x-ratelimit-remaining'], '19');
    });

    it('limits failed client authentication per client and address, and per address, without slowing good grants', async () => {
      const grant = (remoteAddress: string, clientId: string, clientSecret: string) =>
        grantFrom(server, remoteAddress, clientId, clientSecret);
      // Good grants spend nothing of these buckets (the tenant's, see below).
      for (let i = 0; i < 8; i++) assert.equal((await grant('203.0.113.1', ADMIN_ID, ADMIN_SECRET)).statusCode, 200);

      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await grant('203.0.113.1', ADMIN_ID, `guess-${i}`)).statusCode);
      assert.deepEqual(statuses, [401, 401, 401]);
      // Now even the right secret is refused from there: a limit that let it through would tell which guess was right.
      const blocked = await grant('203.0.113.1', ADMIN_ID, ADMIN_SECRET);
      assert.equal(blocked.statusCode, 429);
      assert.equal(blocked.json().error, 'too_many_attempts');
      assert.equal(typeof blocked.json().error_description, 'string');
      assert.ok(
        Number(blocked.headers['retry-after']) >= 1 && Number(blocked.headers['retry-after']) <= 60,
        blocked.headers['retry-after'] as string,
      );
      assert.equal((await grant('203.0.113.1', ADMIN_ID, 'guess-more')).statusCode, 429);
      // The client itself is not locked out: from its own address it still gets tokens.
      assert.equal((await grant('203.0.113.2', ADMIN_ID, ADMIN_SECRET)).statusCode, 200);

      // Spraying guesses over many client ids from one address hits the per-address limit.
      const sprayed = [];
      for (let i = 0; i < 7; i++) sprayed.push((await grant('203.0.113.3', `client-${i}`, 'guess')).statusCode);
      assert.deepEqual(sprayed, [401, 401, 401, 401, 401, 429, 429]);
      assert.equal((await grant('203.0.113.3', ADMIN_ID, ADMIN_SECRET)).statusCode, 429);
      // Another tenant's client is not locked out of that address by guesses aimed at this tenant.
      const other = await server.addTenant('other-tenant', 'other-tenant.test');
      const client = await server.services.clients.create(other.tenant.id, { name: 'other', scopes: ['read:users'] });
      const theirs = await server.app.inject({
        method: 'POST',
        url: '/oauth/token',
        remoteAddress: '203.0.113.3',
        headers: { host: 'other-tenant.test' },
        payload: {
          grant_type: 'client_credentials',
          client_id: client.clientId,
          client_secret: client.clientSecret,
          audience: 'https://other-tenant.test/api/v2/',
        },
      });
      assert.equal(theirs.statusCode, 200, theirs.body);
    });

    it('refuses a client id no client could have before it names a bucket', async () => {
      const huge = await server.app.inject({
        method: 'POST',
        url: '/oauth/token',
        remoteAddress: '203.0.113.10',
        headers: { host: server.domain },
        payload: {
          grant_type: 'client_credentials',
          client_id: 'x'.repeat(100_000),
          client_secret: 's',
          audience: `https://${server.domain}/api/v2/`,
        },
      });
      assert.equal(huge.statusCode, 401);
      assert.deepEqual(huge.json(), { error: 'access_denied', error_description: 'Unauthorized' });
    });

    it('limits requests for hosts that name no tenant like any anonymous traffic', async () => {
      const statuses = [];
      for (let i = 0; i < 6; i++) {
        const response = await server.app.inject({
          url: USERS,
          remoteAddress: '198.51.100.40',
          headers: { host: `made-up-${i}.example` },
        });
        statuses.push(response.statusCode);
        if (response.statusCode === 404) assert.equal(response.json().errorCode, 'inexistent_tenant');
      }
      assert.deepEqual(statuses, [404, 404, 404, 429, 429, 429]);
    });

    it("names the unknown host in its 404, cut to a hostname's length", async () => {
      const named = await server.app.inject({
        url: USERS,
        remoteAddress: '198.51.100.41',
        headers: { host: 'nobody.example:8080' },
      });
      assert.equal(named.json().message, 'No tenant is served on host nobody.example:8080');
      const long = `${'a'.repeat(63)}.`.repeat(200);
      const huge = await server.app.inject({ url: USERS, remoteAddress: '198.51.100.42', headers: { host: long } });
      assert.equal(huge.statusCode, 404);
      assert.equal(huge.json().message, `No tenant is served on host ${long.slice(0, 260)}…`);
    });
  });
}

for (const kind of databaseKinds()) {
  describe(`the public routes: grants on the tenant's bucket, the others on the address's (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind, {
        RATE_LIMIT_SIZE: '6',
        RATE_LIMIT_PER_SECOND: '1',
        ANONYMOUS_RATE_LIMIT_SIZE: '3',
        ANONYMOUS_RATE_LIMIT_PER_SECOND: '1',
      });
    });
    after(() => server.close());

    const grant = (remoteAddress: string, clientSecret = ADMIN_SECRET) =>
      grantFrom(server, remoteAddress, ADMIN_ID, clientSecret);
    const remaining = (response: { headers: Record<string, unknown> }) =>
      Number(response.headers['x-ratelimit-remaining']);

    it("limits the JWKS, the issuer's metadata and the verification link per address, without touching the tenant's bucket", async () => {
      const before = await grant('203.0.113.50');
      assert.equal(before.statusCode, 200, before.body);
      const urls = [
        '/.well-known/jwks.json',
        '/.well-known/openid-configuration',
        '/.well-known/oauth-authorization-server',
        '/u/email-verification?ticket=made-up',
      ];
      for (const url of urls) {
        const remoteAddress = `198.51.100.${60 + urls.indexOf(url)}`;
        const statuses = [];
        for (let i = 0; i < 5; i++) {
          const response = await server.app.inject({ url, remoteAddress, headers: { host: server.domain } });
          statuses.push(response.statusCode);
          if (response.statusCode === 429) {
            assert.equal(response.json().errorCode, 'too_many_requests', url);
            assert.ok(Number(response.headers['retry-after']) >= 1, url);
          } else {
            assert.equal(response.headers['x-ratelimit-limit'], '3', url);
          }
        }
        const served = url.startsWith('/u/') ? 404 : 200;
        assert.deepEqual(statuses, [served, served, served, 429, 429], url);
        // Another address is served.
        const elsewhere = await server.app.inject({
          url,
          remoteAddress: `198.51.100.${80 + urls.indexOf(url)}`,
          headers: { host: server.domain },
        });
        assert.equal(elsewhere.statusCode, served, url);
      }
      // The floods spent nothing of the tenant's bucket: the next grant finds one fewer (or one more refilled).
      const after = await grant('203.0.113.50');
      assert.equal(after.statusCode, 200);
      assert.ok(
        [remaining(before) - 1, remaining(before)].includes(remaining(after)),
        `${remaining(before)} → ${remaining(after)}`,
      );
    });

    it("keeps each tenant's public routes apart, and apart from the address's unauthenticated calls", async () => {
      await server.addTenant('other-public', 'other-public.test');
      const jwks = (host: string) =>
        server.app.inject({ url: '/.well-known/jwks.json', remoteAddress: '198.51.100.90', headers: { host } });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await jwks(server.domain)).statusCode);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      // The same address, another tenant: its own bucket.
      assert.equal((await jwks('other-public.test')).statusCode, 200);
      // The same address and tenant, a call without a token: the address's bucket of such calls.
      const call = await server.app.inject({
        url: USERS,
        remoteAddress: '198.51.100.90',
        headers: { host: server.domain },
      });
      assert.equal(call.statusCode, 401);
    });

    it('draws refusals made before any client is named on the address, and refused grants on nothing', async () => {
      const early = [];
      for (let i = 0; i < 5; i++) {
        const response = await server.app.inject({
          method: 'POST',
          url: '/oauth/token',
          remoteAddress: '198.51.100.91',
          headers: { host: server.domain },
          payload: i % 2 ? { grant_type: 'password' } : { client_id: ADMIN_ID },
        });
        early.push(response.statusCode);
        if (response.statusCode === 429) assert.equal(response.json().error, 'too_many_requests');
      }
      assert.deepEqual(early, [400, 400, 400, 429, 429]);
      // A good grant from there is not held up by them.
      const granted = await grant('198.51.100.91');
      assert.equal(granted.statusCode, 200, granted.body);
      const left = remaining(granted);
      // Grants refused after the client authenticated (no audience) spend nothing of the tenant's bucket.
      for (let i = 0; i < 8; i++) {
        const refused = await server.app.inject({
          method: 'POST',
          url: '/oauth/token',
          remoteAddress: '198.51.100.92',
          headers: { host: server.domain },
          payload: { grant_type: 'client_credentials', client_id: ADMIN_ID, client_secret: ADMIN_SECRET },
        });
        assert.equal(refused.statusCode, 403, refused.body);
      }
      const next = await grant('198.51.100.92');
      assert.equal(next.statusCode, 200, next.body);
      assert.ok([left - 1, left].includes(remaining(next)), `${left} → ${remaining(next)}`);
    });

    it("draws each grant on the tenant's bucket, once the client authenticated, and refuses beyond it", async () => {
      // An address whose anonymous bucket is empty still gets tokens: grants do not draw on it.
      for (let i = 0; i < 4; i++)
        await server.app.inject({
          url: '/.well-known/jwks.json',
          remoteAddress: '198.51.100.70',
          headers: { host: server.domain },
        });
      const first = await grant('198.51.100.70');
      assert.equal(first.statusCode, 200, first.body);
      assert.equal(first.headers['x-ratelimit-limit'], '6');
      // Failed authentications spend nothing of it: nobody without the secret can drain a tenant.
      for (let i = 0; i < 3; i++) assert.equal((await grant('198.51.100.71', `guess-${i}`)).statusCode, 401);
      const statuses = [first.statusCode];
      const left = [remaining(first)];
      let refused;
      for (let i = 0; i < 12 && !refused; i++) {
        const response = await grant('198.51.100.70');
        statuses.push(response.statusCode);
        if (response.statusCode === 429) refused = response;
        else left.push(remaining(response));
      }
      assert.ok(refused, `no grant refused: ${statuses.join(',')}`);
      // Each grant spent one (a refill of one a second may give one back between two).
      for (let i = 1; i < left.length; i++) assert.ok(left[i]! <= left[i - 1]!, left.join(','));
      assert.ok(left.length <= 8, `${left.length} grants served from a bucket of 6: ${left.join(',')}`);
      assert.deepEqual(refused.json(), {
        error: 'too_many_requests',
        error_description: 'Global limit has been reached',
      });
      assert.equal(refused.headers['x-ratelimit-remaining'], '0');
      assert.ok(Number(refused.headers['retry-after']) >= 1);
      // The tenant's Management API calls share the bucket: the grants' flood is the tenant's own.
      const call = await server.app.inject({
        url: USERS,
        headers: { host: server.domain, authorization: `Bearer ${server.adminToken}` },
      });
      assert.equal(call.statusCode, 429);
    });
  });
}

describe('TRUST_PROXY: the client address behind a proxy', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer('sqlite', {
      ANONYMOUS_RATE_LIMIT_SIZE: '2',
      ANONYMOUS_RATE_LIMIT_PER_SECOND: '1',
      TRUST_PROXY: '127.0.0.1',
    });
  });
  after(() => server.close());

  it('counts each forwarded client apart when the proxy is trusted, and ignores the header from anyone else', async () => {
    const call = (remoteAddress: string, forwardedFor: string) =>
      server.request({ url: USERS, token: null, remoteAddress, headers: { 'x-forwarded-for': forwardedFor } });
    const viaProxy = [];
    for (let i = 0; i < 3; i++) viaProxy.push((await call('127.0.0.1', '192.0.2.10')).statusCode);
    assert.deepEqual(viaProxy, [401, 401, 429]);
    assert.equal((await call('127.0.0.1', '192.0.2.11')).statusCode, 401);
    // Not from the trusted proxy: the header is the client's own claim and counts for nothing.
    const direct = [];
    for (let i = 0; i < 3; i++) direct.push((await call('198.51.100.20', `192.0.2.${50 + i}`)).statusCode);
    assert.deepEqual(direct, [401, 401, 429]);
  });

  it('counts a client as one whatever source port its proxy writes beside its address', async () => {
    // Some proxies (Azure's among them) write `address:port` into X-Forwarded-For: each new connection
    // of one client comes with another port, and must not buy it a fresh bucket.
    const call = (forwardedFor: string) =>
      server.request({
        url: USERS,
        token: null,
        remoteAddress: '127.0.0.1',
        headers: { 'x-forwarded-for': forwardedFor },
      });
    for (const [spellings, label] of [
      [['192.0.2.30:40001', '192.0.2.30:40002', '192.0.2.30'], 'IPv4'],
      [['[2001:db8:7::1]:40001', '[2001:db8:7::2]:40002', '2001:db8:7::3'], 'IPv6'],
    ] as const) {
      const statuses = [];
      for (const forwardedFor of spellings) statuses.push((await call(forwardedFor)).statusCode);
      assert.deepEqual(statuses, [401, 401, 429], label);
    }
    // Nor do two clients whose addresses begin alike share one bucket because of their ports.
    assert.equal((await call('192.0.2.31:40001')).statusCode, 401);
  });
});

const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

describe('failed client authentications shared by two nodes through REDIS_URL', () => {
  let nodeA: TestServer;
  let nodeB: TestServer;
  let available = false;
  before(async () => {
    const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    available = await probe.connect().then(
      () => true,
      () => false,
    );
    probe.disconnect();
    if (!available) return;
    const settings = { REDIS_URL: redisUrl, TOKEN_FAILURES_PER_CLIENT_PER_MINUTE: '2' };
    nodeA = await startTestServer('sqlite', settings);
    nodeB = await startTestServer('sqlite', settings);
  });
  after(async () => {
    await nodeA?.close();
    await nodeB?.close();
  });

  it('refuses on one node what failed on the other', async (t) => {
    if (!available) {
      if (process.env.TEST_REDIS_URL) assert.fail(`TEST_REDIS_URL=${redisUrl} does not answer`);
      return t.skip(`no Redis at ${redisUrl}`);
    }
    // An address of this run only: the buckets outlive the run on the Redis server.
    const remoteAddress = `2001:db8:${randomBytes(2).toString('hex')}:${randomBytes(2).toString('hex')}::1`;
    const grant = (node: TestServer, secret: string) =>
      node.app.inject({
        method: 'POST',
        url: '/oauth/token',
        remoteAddress,
        headers: { host: node.domain },
        payload: {
          grant_type: 'client_credentials',
          client_id: ADMIN_ID,
          client_secret: secret,
          audience: `https://${node.domain}/api/v2/`,
        },
      });
    assert.equal((await grant(nodeA, 'wrong-1')).statusCode, 401);
    // A good grant gives back what its attempt took, on the shared bucket too.
    assert.equal((await grant(nodeB, ADMIN_SECRET)).statusCode, 200);
    assert.equal((await grant(nodeB, 'wrong-2')).statusCode, 401);
    assert.equal((await grant(nodeA, ADMIN_SECRET)).statusCode, 429);
    assert.equal((await grant(nodeB, ADMIN_SECRET)).statusCode, 429);
  });

  it('compares no more guesses than the limit when they are sent at once, to both nodes', async (t) => {
    if (!available) return t.skip(`no Redis at ${redisUrl}`);
    const remoteAddress = `2001:db8:${randomBytes(2).toString('hex')}:${randomBytes(2).toString('hex')}::2`;
    const guess = (node: TestServer, i: number) =>
      node.app.inject({
        method: 'POST',
        url: '/oauth/token',
        remoteAddress,
        headers: { host: node.domain },
        payload: {
          grant_type: 'client_credentials',
          client_id: ADMIN_ID,
          client_secret: `parallel-${i}`,
          audience: `https://${node.domain}/api/v2/`,
        },
      });
    const statuses = (await Promise.all(Array.from({ length: 20 }, (_, i) => guess(i % 2 ? nodeA : nodeB, i)))).map(
      (r) => r.statusCode,
    );
    assert.equal(statuses.filter((status) => status === 401).length, 2, statuses.join(','));
    assert.equal(statuses.filter((status) => status === 429).length, 18, statuses.join(','));
  });
});
