import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import { ADMIN_ID, ADMIN_SECRET, startTestServer, type TestServer } from '../../helpers/server.ts';
import { svcRecordKeysWithout } from '../../helpers/custom-domain-record.ts';
import { databaseKinds } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';

const EDGE = 'edge.test.local';

for (const kind of databaseKinds()) {
  describe(`custom domains (${kind})`, () => {
    let server: TestServer;
    let dns: TestDnsServer;
    let otherToken: string;
    before(async () => {
      dns = await startDnsServer();
      server = await startTestServer(kind, {
        DNS_SERVERS: dns.address,
        CUSTOM_DOMAIN_EDGE_DOMAIN: EDGE,
        CUSTOM_DOMAINS_MAX: '6',
      });
      ({ token: otherToken } = await server.addTenant('other-tenant', 'other.test'));
    });
    after(async () => {
      await server.close();
      await dns.close();
    });

    const create = (payload: Record<string, unknown>, token?: string, host?: string) =>
      server.request({
        method: 'POST',
        url: '/api/v2/custom-domains',
        payload,
        token,
        ...(host ? { headers: { host } } : {}),
      });
    const verify = (id: string) => server.request({ method: 'POST', url: `/api/v2/custom-domains/${id}/verify` });
    const get = (id: string) => server.request({ url: `/api/v2/custom-domains/${id}` });

    it('creates an svc-managed domain with the original record shape and key order', async () => {
      const created = await create({
        domain: 'Login.Example.com',
        type: 'auth0_managed_certs',
        domain_metadata: { key1: 'value1' },
        relying_party_identifier: 'example.com',
      });
      assert.equal(created.statusCode, 201, created.body);
      const cd = created.json();
      assert.match(cd.custom_domain_id, /^cd_[0-9A-Za-z]{16}$/);
      assert.deepEqual(Object.keys(cd), svcRecordKeysWithout('certificate'));
      assert.equal(cd.domain, 'login.example.com');
      assert.equal(cd.primary, true);
      assert.equal(cd.is_default, false);
      assert.equal(cd.status, 'pending_verification');
      assert.equal(cd.type, 'svc_managed_certs');
      assert.equal(cd.tls_policy, 'recommended');
      assert.deepEqual(cd.verification, {
        methods: [
          {
            name: 'CNAME',
            record: `${server.tenant.id}-cd-${cd.custom_domain_id.slice(3).toLowerCase()}.${EDGE}`,
            domain: 'login.example.com',
          },
        ],
      });
      assert.match(cd.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.deepEqual((await get(cd.custom_domain_id)).json(), cd);
    });

    it('creates a self-managed domain with a TXT record and custom_client_ip_header null', async () => {
      const created = await create({ domain: 'self.example.org', type: 'self_managed_certs' });
      assert.equal(created.statusCode, 201, created.body);
      const cd = created.json();
      assert.deepEqual(Object.keys(cd), [
        'custom_domain_id',
        'domain',
        'primary',
        'is_default',
        'status',
        'type',
        'verification',
        'custom_client_ip_header',
        'created_at',
      ]);
      assert.equal(cd.primary, false);
      assert.equal(cd.custom_client_ip_header, null);
      assert.equal(cd.verification.methods[0].name, 'TXT');
      assert.equal(cd.verification.methods[0].domain, '_svc-custom-domain.self.example.org');
    });

    it('refuses members that do not fit the type, bad hostnames and unknown members', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [
          { domain: 'a.example.net', type: 'self_managed_certs', tls_policy: 'recommended' },
          "The 'tls_policy' cannot be set on self_managed domains",
        ],
        [
          { domain: 'a.example.net', type: 'svc_managed_certs', custom_client_ip_header: 'x-forwarded-for' },
          "The 'custom_client_ip_header' cannot be set on svc_managed domains",
        ],
        [
          { domain: 'a.example.net', type: 'svc_managed_certs', relying_party_identifier: 'other.net' },
          "The 'relying_party_identifier' must be equal to or a registrable domain suffix of the domain.",
        ],
        [
          { domain: 'a.example.net', type: 'svc_managed_certs', extra: 1 },
          "Payload validation error: 'Additional properties not allowed: extra'.",
        ],
      ];
      for (const [payload, message] of cases) {
        const response = await create(payload);
        assert.equal(response.statusCode, 400, response.body);
        assert.deepEqual(response.json(), {
          statusCode: 400,
          error: 'Bad Request',
          message,
          errorCode: 'invalid_body',
        });
      }
      for (const payload of [
        { domain: 'bad_host.example', type: 'svc_managed_certs' },
        { domain: 'a.example.net', type: 'other' },
        {
          domain: 'a.example.net',
          type: 'svc_managed_certs',
          domain_metadata: Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`k${i}`, 'v'])),
        },
        { domain: 'a.example.net', type: 'svc_managed_certs', domain_metadata: { k: 'x'.repeat(256) } },
      ]) {
        const response = await create(payload);
        assert.equal(response.statusCode, 400, response.body);
        assert.equal(response.json().errorCode, 'invalid_body');
      }
    });

    it('answers 404 for a missing domain, 400 for a malformed id, and checks scopes', async () => {
      const missing = await get('cd_6hxWGEsXvZyIUcoI');
      assert.deepEqual(missing.json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'The custom domain cd_6hxWGEsXvZyIUcoI does not exist',
        errorCode: 'inexistent_custom_domain',
      });
      const malformed = await get('nope');
      assert.equal(malformed.statusCode, 400);
      assert.equal(malformed.json().errorCode, 'invalid_uri');
      const { token } = await server.clientWithScopes(['read:custom_domains']);
      const refused = await server.request({
        method: 'POST',
        url: '/api/v2/custom-domains/cd_6hxWGEsXvZyIUcoI/verify',
        token,
      });
      assert.equal(refused.statusCode, 403);
      assert.equal(refused.json().message, 'Insufficient scope, expected any of: create:custom_domains');
      assert.equal((await server.request({ url: '/api/v2/custom-domains', token })).statusCode, 200);
    });

    it('verifies by DNS: a clear error while the CNAME is absent or wrong, ready once it is served', async () => {
      const cd = (await create({ domain: 'auth.verify.test', type: 'svc_managed_certs' })).json();
      const target = cd.verification.methods[0].record;
      const absent = await verify(cd.custom_domain_id);
      assert.equal(absent.statusCode, 200, absent.body);
      const pending = absent.json();
      assert.equal(pending.status, 'pending_verification');
      assert.equal(pending.verification.status, 'pending');
      assert.match(pending.verification.error_msg, /No CNAME record found for auth\.verify\.test \(ENOTFOUND\)/);
      assert.equal('is_default' in pending, false);

      dns.setCname('auth.verify.test', 'elsewhere.example.com');
      const wrong = (await verify(cd.custom_domain_id)).json();
      assert.equal(
        wrong.verification.error_msg,
        `CNAME record for auth.verify.test resolves to elsewhere.example.com, expected ${target}`,
      );
      assert.equal(wrong.status, 'pending_verification');

      dns.remove('auth.verify.test');
      dns.setCname('auth.verify.test', target);
      const ok = await verify(cd.custom_domain_id);
      assert.equal(ok.statusCode, 200);
      const ready = ok.json();
      assert.equal(ready.status, 'ready');
      assert.equal(ready.verification.status, 'verified');
      assert.equal(ready.verification.error_msg, undefined);
      assert.match(ready.verification.last_verified_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.equal('is_default' in ready, false);
      assert.equal(ready.cname_api_key, undefined);

      // POST …/test: the record checked again, nothing changed whatever it finds.
      const test = (id: string, token?: string, host?: string) =>
        server.request({
          method: 'POST',
          url: `/api/v2/custom-domains/${id}/test`,
          token,
          ...(host ? { headers: { host } } : {}),
        });
      const passed = await test(cd.custom_domain_id);
      assert.equal(passed.statusCode, 200, passed.body);
      assert.deepEqual(passed.json(), { success: true });
      dns.remove('auth.verify.test');
      const gone = await test(cd.custom_domain_id);
      assert.equal(gone.statusCode, 200, gone.body);
      assert.equal(gone.json().success, false);
      assert.match(gone.json().message, /No CNAME record found for auth\.verify\.test/);
      assert.equal((await get(cd.custom_domain_id)).json().status, 'ready', 'a failed test unverifies nothing');
      dns.setCname('auth.verify.test', target);
      const otherTenants = await test(cd.custom_domain_id, otherToken, 'other.test');
      assert.equal(otherTenants.statusCode, 404);
      assert.equal(otherTenants.json().errorCode, 'inexistent_custom_domain');
      const reader = await server.clientWithScopes(['read:custom_domains']);
      assert.equal((await test(cd.custom_domain_id, reader.token)).statusCode, 200);
      const unscoped = await server.clientWithScopes(['read:users']);
      assert.equal((await test(cd.custom_domain_id, unscoped.token)).statusCode, 403);
      const notReady = (await create({ domain: 'pending.test-op.test', type: 'svc_managed_certs' })).json();
      const refused = await test(notReady.custom_domain_id);
      assert.equal(refused.statusCode, 409);
      assert.deepEqual(refused.json(), {
        statusCode: 409,
        error: 'Conflict',
        message: 'The custom domain is not ready.',
      });
      assert.equal((await test('cd_1111111111111111')).statusCode, 404);

      const again = await verify(cd.custom_domain_id);
      assert.equal(again.statusCode, 400);
      assert.equal(again.json().message, 'Custom domain already verified.');
    });

    it('verifies several domains independently, and gives a self-managed domain its cname_api_key once', async () => {
      const a = (await create({ domain: 'one.multi.test', type: 'svc_managed_certs' })).json();
      const b = (await create({ domain: 'two.multi.test', type: 'self_managed_certs' })).json();
      dns.setTxt('_svc-custom-domain.two.multi.test', 'unrelated');
      dns.setTxt('_svc-custom-domain.two.multi.test', b.verification.methods[0].record);
      const [ra, rb] = await Promise.all([verify(a.custom_domain_id), verify(b.custom_domain_id)]);
      assert.equal(ra.json().status, 'pending_verification');
      assert.equal(rb.json().status, 'ready');
      assert.match(rb.json().cname_api_key, /^[0-9a-f]{128}$/);
      assert.equal((await get(b.custom_domain_id)).json().cname_api_key, undefined);
      const row = await server.services.database.db
        .selectFrom('custom_domains')
        .select('cname_api_key_hash')
        .where('id', '=', b.custom_domain_id)
        .executeTakeFirstOrThrow();
      assert.notEqual(row.cname_api_key_hash, rb.json().cname_api_key);
      const throughProxy = await server.request({
        url: '/api/v2/custom-domains',
        headers: { host: 'two.multi.test', 'cname-api-key': rb.json().cname_api_key },
      });
      assert.equal(throughProxy.statusCode, 200, throughProxy.body);
      assert.equal((await get(a.custom_domain_id)).json().status, 'pending_verification');
    });

    it('serves a ready domain: its host reaches the tenant and issues tokens with its issuer, valid on every domain', async () => {
      const host = 'auth.verify.test';
      const pendingHost = await server.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { host: 'one.multi.test' },
        payload: {
          grant_type: 'client_credentials',
          client_id: ADMIN_ID,
          client_secret: ADMIN_SECRET,
          audience: 'https://one.multi.test/api/v2/',
        },
      });
      assert.equal(pendingHost.statusCode, 404, 'a pending domain does not serve');
      const token = await server.tokenFor(host, ADMIN_ID, ADMIN_SECRET);
      const claims = decodeJwt(token);
      assert.equal(claims.iss, `https://${host}/`);
      assert.equal(claims.aud, `https://${host}/api/v2/`);
      const viaCustom = await server.request({ url: '/api/v2/custom-domains', token, headers: { host } });
      assert.equal(viaCustom.statusCode, 200, viaCustom.body);
      const viaCanonical = await server.request({ url: '/api/v2/custom-domains', token });
      assert.equal(viaCanonical.statusCode, 200, viaCanonical.body);
      // The other tenant does not accept it.
      const elsewhere = await server.request({ url: '/api/v2/custom-domains', token, headers: { host: 'other.test' } });
      assert.equal(elsewhere.statusCode, 401);
      // Canonical tokens keep working on the custom domain too.
      assert.equal((await server.request({ url: '/api/v2/custom-domains', headers: { host } })).statusCode, 200);
    });

    it('switches the default, refuses to delete it, and keeps older tokens valid', async () => {
      const canonical = await server.request({ url: '/api/v2/custom-domains/default' });
      assert.deepEqual(canonical.json(), { domain: server.domain });
      const list = (await server.request({ url: '/api/v2/custom-domains' })).json() as Array<{
        custom_domain_id: string;
        domain: string;
        status: string;
      }>;
      const ready = list.find((d) => d.domain === 'auth.verify.test')!;
      const pending = list.find((d) => d.domain === 'one.multi.test')!;
      const selfReady = list.find((d) => d.domain === 'two.multi.test')!;
      const tokenBefore = await server.tokenFor('auth.verify.test', ADMIN_ID, ADMIN_SECRET);

      const refused = await server.request({
        method: 'PATCH',
        url: '/api/v2/custom-domains/default',
        payload: { domain: pending.domain },
      });
      assert.deepEqual(refused.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: 'The domain must be verified before it can be set as default.',
        errorCode: 'invalid_body',
      });
      const refusedPatch = await server.request({
        method: 'PATCH',
        url: `/api/v2/custom-domains/${pending.custom_domain_id}`,
        payload: { is_default: true },
      });
      assert.equal(refusedPatch.statusCode, 400);

      const set = await server.request({
        method: 'PATCH',
        url: '/api/v2/custom-domains/default',
        payload: { domain: ready.domain },
      });
      assert.equal(set.statusCode, 200, set.body);
      assert.equal(set.json().custom_domain_id, ready.custom_domain_id);
      assert.equal(set.json().is_default, true);
      assert.equal((await server.request({ url: '/api/v2/custom-domains/default' })).json().domain, ready.domain);
      const deleting = await server.request({
        method: 'DELETE',
        url: `/api/v2/custom-domains/${ready.custom_domain_id}`,
      });
      assert.deepEqual(deleting.json(), {
        statusCode: 409,
        error: 'Conflict',
        message:
          'Cannot delete the default custom domain. Please set another domain as default before deleting this one.',
      });

      // PATCH /{id} with is_default (spec 4.6) moves the default; exactly one record says is_default.
      const moved = await server.request({
        method: 'PATCH',
        url: `/api/v2/custom-domains/${selfReady.custom_domain_id}`,
        payload: { is_default: true },
      });
      assert.equal(moved.statusCode, 200, moved.body);
      assert.equal(moved.json().is_default, true);
      const flags = (
        (await server.request({ url: '/api/v2/custom-domains' })).json() as Array<{ is_default: boolean }>
      ).filter((d) => d.is_default);
      assert.equal(flags.length, 1);
      assert.equal(
        (await server.request({ url: '/api/v2/custom-domains/default', token: tokenBefore })).statusCode,
        200,
        'older token still valid',
      );

      const back = await server.request({
        method: 'PATCH',
        url: '/api/v2/custom-domains/default',
        payload: { domain: server.domain },
      });
      assert.deepEqual(back.json(), { domain: server.domain });
      const deleted = await server.request({
        method: 'DELETE',
        url: `/api/v2/custom-domains/${pending.custom_domain_id}`,
      });
      assert.equal(deleted.statusCode, 204);
      assert.equal(deleted.body, '');
      assert.equal((await get(pending.custom_domain_id)).statusCode, 404);
    });

    it('merges domain_metadata per key, null deleting, and removes relying_party_identifier with null', async () => {
      const cd = (
        await create({
          domain: 'meta.example.com',
          type: 'svc_managed_certs',
          domain_metadata: { key: 'value' },
          relying_party_identifier: 'example.com',
        })
      ).json();
      const url = `/api/v2/custom-domains/${cd.custom_domain_id}`;
      const merged = await server.request({ method: 'PATCH', url, payload: { domain_metadata: { key2: 'value2' } } });
      assert.deepEqual(merged.json().domain_metadata, { key: 'value', key2: 'value2' });
      const emptied = await server.request({
        method: 'PATCH',
        url,
        payload: { domain_metadata: { key: null, key2: null }, relying_party_identifier: null },
      });
      assert.deepEqual(emptied.json().domain_metadata, {});
      assert.equal('relying_party_identifier' in emptied.json(), false);
      const wrongType = await server.request({
        method: 'PATCH',
        url,
        payload: { custom_client_ip_header: 'x-forwarded-for' },
      });
      assert.equal(wrongType.statusCode, 400);
    });

    it('lists as a bare array, or pages with take', async () => {
      const all = (await server.request({ url: '/api/v2/custom-domains' })).json();
      assert.ok(Array.isArray(all));
      const first = (await server.request({ url: '/api/v2/custom-domains?take=2' })).json();
      assert.equal(first.custom_domains.length, 2);
      assert.equal(typeof first.next, 'string');
      const rest = (await server.request({ url: `/api/v2/custom-domains?take=100&from=${first.next}` })).json();
      assert.deepEqual(
        [...first.custom_domains, ...rest.custom_domains].map((d: { domain: string }) => d.domain),
        all.map((d: { domain: string }) => d.domain),
      );
      assert.equal(rest.next, undefined);
      const filtered = (await server.request({ url: '/api/v2/custom-domains?q=domain%3Aauth*' })).json();
      assert.deepEqual(
        filtered.map((d: { domain: string }) => d.domain),
        ['auth.verify.test'],
      );
    });

    it('keeps hostnames unique within a tenant: a concurrent claim gets exactly one 201 and one 409; the cap is a 409', async () => {
      const payload = { domain: 'contested.example.io', type: 'svc_managed_certs' };
      const results = await Promise.all([
        create(payload, otherToken, 'other.test'),
        create(payload, otherToken, 'other.test'),
      ]);
      assert.deepEqual(results.map((r) => r.statusCode).sort(), [201, 409]);
      const loser = results.find((r) => r.statusCode === 409)!;
      assert.deepEqual(loser.json(), { statusCode: 409, error: 'Conflict', message: 'Custom domain already exists.' });
      assert.equal(
        (await create({ domain: 'other.test', type: 'svc_managed_certs' })).statusCode,
        409,
        'a canonical domain cannot be claimed',
      );
      let status = 201;
      for (let i = 0; status === 201 && i < 10; i++)
        status = (await create({ domain: `cap${i}.example.io`, type: 'svc_managed_certs' })).statusCode;
      const over = await create({ domain: 'over.example.io', type: 'svc_managed_certs' });
      assert.deepEqual(over.json(), {
        statusCode: 409,
        error: 'Conflict',
        message: 'You reached the maximum number of custom domains for your account.',
      });
    });
  });
}
