import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PassThrough } from 'node:stream';
import { decodeJwt } from 'jose';
import { ADMIN_ID, ADMIN_SECRET, startTestServer, type TestServer } from '../helpers/server.ts';
import { databaseKinds } from '../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';

const SELF_A = 'login.proxied-a.test';
const SELF_B = 'login.proxied-b.test';
const MANAGED = 'login.managed.test';

const refusal = (message: string) => ({
  statusCode: 403,
  error: 'Forbidden',
  message,
  errorCode: 'invalid_cname_api_key',
});

for (const kind of databaseKinds()) {
  describe(`custom domains: the cname-api-key of self-managed domains (${kind})`, () => {
    let server: TestServer;
    let dns: TestDnsServer;
    let logs = '';
    const keys: Record<string, string> = {};
    const ids: Record<string, string> = {};

    before(async () => {
      dns = await startDnsServer();
      const logStream = new PassThrough();
      logStream.on('data', (chunk: Buffer) => (logs += chunk.toString()));
      server = await startTestServer(
        kind,
        // A small bucket for anonymous traffic: refused keys draw on it (the last test floods it).
        {
          DNS_SERVERS: dns.address,
          LOG_LEVEL: 'info',
          ANONYMOUS_RATE_LIMIT_SIZE: '30',
          ANONYMOUS_RATE_LIMIT_PER_SECOND: '1',
        },
        { logStream },
      );
      // A second tenant, so that no host falls back to the only tenant.
      await server.addTenant('other-tenant', 'other.test');
      for (const [domain, type] of [
        [SELF_A, 'self_managed_certs'],
        [SELF_B, 'self_managed_certs'],
        [MANAGED, 'svc_managed_certs'],
      ] as const) {
        const cd = (
          await server.request({ method: 'POST', url: '/api/v2/custom-domains', payload: { domain, type } })
        ).json();
        const method = cd.verification.methods[0];
        if (type === 'self_managed_certs') dns.setTxt(method.domain, method.record);
        else dns.setCname(domain, method.record);
        const verified = (
          await server.request({ method: 'POST', url: `/api/v2/custom-domains/${cd.custom_domain_id}/verify` })
        ).json();
        assert.equal(verified.status, 'ready');
        ids[domain] = cd.custom_domain_id;
        if (verified.cname_api_key) keys[domain] = verified.cname_api_key;
      }
      assert.deepEqual(Object.keys(keys).sort(), [SELF_A, SELF_B]);
    });
    after(async () => {
      await server.close();
      await dns.close();
    });

    const grant = (host: string, key?: string) =>
      server.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { host, ...(key === undefined ? {} : { 'cname-api-key': key }) },
        payload: {
          grant_type: 'client_credentials',
          client_id: ADMIN_ID,
          client_secret: ADMIN_SECRET,
          audience: `https://${host}/api/v2/`,
        },
      });
    const list = (host: string, token: string | undefined, key?: string) =>
      server.request({
        url: '/api/v2/custom-domains',
        ...(token === undefined ? {} : { token }),
        headers: { host, ...(key === undefined ? {} : { 'cname-api-key': key }) },
      });

    it('serves a self-managed domain through the proxy holding its key: token grant and API call', async () => {
      const granted = await grant(SELF_A, keys[SELF_A]);
      assert.equal(granted.statusCode, 200, granted.body);
      const token = granted.json().access_token as string;
      assert.equal(decodeJwt(token).iss, `https://${SELF_A}/`);
      assert.equal(decodeJwt(token).aud, `https://${SELF_A}/api/v2/`);
      const listed = await list(SELF_A, token, keys[SELF_A]);
      assert.equal(listed.statusCode, 200, listed.body);
      assert.deepEqual(
        (listed.json() as Array<{ domain: string }>).map((d) => d.domain),
        [SELF_A, SELF_B, MANAGED].sort(),
      );
      // The token of the custom domain is one of the tenant's: the canonical domain accepts it too.
      assert.equal((await list(server.domain, token)).statusCode, 200);
    });

    it('refuses a missing or wrong key, and a key of another domain, before anything else runs', async () => {
      assert.deepEqual(
        (await grant(SELF_A)).json(),
        refusal(
          `Missing cname-api-key header: requests to the self-managed custom domain ${SELF_A} must come through its proxy`,
        ),
      );
      assert.deepEqual(
        (await grant(SELF_A, '')).json(),
        refusal(
          `Missing cname-api-key header: requests to the self-managed custom domain ${SELF_A} must come through its proxy`,
        ),
      );
      const wrong = refusal(`Invalid cname-api-key header for the self-managed custom domain ${SELF_A}`);
      for (const key of [keys[SELF_A]!.replace(/.$/, (c) => (c === '0' ? '1' : '0')), 'short', keys[SELF_B]!]) {
        const response = await grant(SELF_A, key);
        assert.equal(response.statusCode, 403);
        assert.deepEqual(response.json(), wrong);
      }
      assert.deepEqual(
        (await grant(SELF_B, keys[SELF_A])).json(),
        refusal(`Invalid cname-api-key header for the self-managed custom domain ${SELF_B}`),
      );
      // An API call with a valid token but without the key is refused the same way.
      const missing = await list(SELF_A, undefined);
      assert.equal(missing.statusCode, 403);
      assert.equal(missing.json().errorCode, 'invalid_cname_api_key');
      assert.equal((await list(SELF_B, undefined, keys[SELF_A])).statusCode, 403);
      // The key is checked before the token: without either, the answer is about the key.
      const neither = await server.request({ url: '/api/v2/custom-domains', token: null, headers: { host: SELF_A } });
      assert.equal(neither.statusCode, 403);
      assert.equal(neither.json().errorCode, 'invalid_cname_api_key');
      // Each domain's own key works for it.
      assert.equal((await grant(SELF_B, keys[SELF_B])).statusCode, 200);
    });

    it('serves svc-managed domains and the canonical domain directly, without any key', async () => {
      const granted = await grant(MANAGED);
      assert.equal(granted.statusCode, 200, granted.body);
      assert.equal(decodeJwt(granted.json().access_token).iss, `https://${MANAGED}/`);
      assert.equal((await list(MANAGED, undefined)).statusCode, 200);
      assert.equal((await list(server.domain, undefined)).statusCode, 200);
      assert.equal(
        (await list(server.domain, undefined, 'anything')).statusCode,
        200,
        'the header means nothing elsewhere',
      );
    });

    it('stops serving a deleted domain, whatever key comes with it', async () => {
      const url = `/api/v2/custom-domains/${ids[SELF_B]}`;
      assert.equal((await server.request({ method: 'DELETE', url })).statusCode, 204);
      const after = await grant(SELF_B, keys[SELF_B]);
      assert.equal(after.statusCode, 404);
      assert.equal(after.json().errorCode, 'inexistent_tenant');
    });

    it('never writes a key to the logs', () => {
      assert.ok(logs.includes('"cname-api-key":"[redacted]"'), 'requests with the header were logged, redacted');
      for (const key of Object.values(keys)) assert.equal(logs.includes(key), false);
      assert.equal(logs.includes(keys[SELF_A]!.slice(0, 32)), false);
    });

    it("limits refused keys as anonymous traffic, by the caller's address, and lets the key's holder through", async () => {
      const wrong = keys[SELF_A]!.replace(/.$/, (c) => (c === '0' ? '1' : '0'));
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++) {
        const response = await list(SELF_A, undefined, i % 2 === 0 ? wrong : undefined);
        statuses.push(response.statusCode);
        if (response.statusCode === 429) assert.ok(Number(response.headers['retry-after']) >= 1);
      }
      // Before, every one was a 403 and drew on no bucket: keys could be tried without limit.
      assert.ok(statuses.includes(429), `no 429 in ${statuses.join(' ')}`);
      assert.deepEqual([...new Set(statuses)].sort(), [403, 429]);
      // The proxy holding the key is not anonymous: its token's tenant bucket serves it.
      const granted = await grant(SELF_A, keys[SELF_A]);
      assert.equal(granted.statusCode, 200, granted.body);
      assert.equal((await list(SELF_A, granted.json().access_token as string, keys[SELF_A])).statusCode, 200);
    });
  });
}
