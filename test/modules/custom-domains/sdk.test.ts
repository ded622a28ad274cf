import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManagementClient } from 'auth0';
import { databaseKinds } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';

interface SdkError {
  statusCode?: number;
  body?: { statusCode?: number; error?: string; message?: string; errorCode?: string };
}

/** The SDK's error carries the status and the original's error body. */
const failsWith = (statusCode: number, body: Record<string, unknown>) => (error: SdkError) => {
  assert.equal(error.statusCode, statusCode);
  assert.deepEqual(error.body, body);
  return true;
};

for (const kind of databaseKinds()) {
  describe(`custom domains through the official SDK over HTTPS (${kind})`, () => {
    let https: HttpsTestServer;
    let dns: TestDnsServer;
    let client: ManagementClient;
    before(async () => {
      dns = await startDnsServer();
      https = await startHttpsTestServer(kind, { DNS_SERVERS: dns.address });
      client = new ManagementClient({ domain: https.domain, token: https.server.adminToken });
    });
    after(async () => {
      await https.close();
      await dns.close();
    });

    it('creates, lists, gets, updates, verifies, sets the default, and deletes', async () => {
      const managed = await client.customDomains.create({
        domain: 'login.sdk.test',
        type: 'auth0_managed_certs',
        domain_metadata: { team: 'identity' },
      });
      assert.match(managed.custom_domain_id, /^cd_[0-9A-Za-z]{16}$/);
      assert.equal(managed.type, 'svc_managed_certs');
      assert.equal(managed.status, 'pending_verification');
      assert.equal(managed.is_default, false);
      assert.equal(managed.verification.methods?.[0]!.name, 'CNAME');
      const proxied = await client.customDomains.create({
        domain: 'proxy.sdk.test',
        type: 'self_managed_certs',
        custom_client_ip_header: 'cf-connecting-ip',
      });
      assert.equal(proxied.custom_client_ip_header, 'cf-connecting-ip');
      assert.equal(proxied.verification.methods?.[0]!.name, 'TXT');

      const listed = await client.customDomains.list();
      assert.ok(Array.isArray(listed));
      assert.deepEqual(
        listed.map((d) => d.domain),
        ['login.sdk.test', 'proxy.sdk.test'],
      );
      assert.deepEqual(
        (await client.customDomains.list({ q: 'domain:proxy*' })).map((d) => d.custom_domain_id),
        [proxied.custom_domain_id],
      );
      assert.deepEqual(await client.customDomains.get(managed.custom_domain_id), managed);

      const updated = await client.customDomains.update(managed.custom_domain_id, {
        domain_metadata: { team: null, region: 'eu' } as never,
        tls_policy: 'recommended',
      });
      assert.deepEqual(updated.domain_metadata, { region: 'eu' });
      assert.deepEqual((await client.customDomains.get(managed.custom_domain_id)).domain_metadata, { region: 'eu' });

      const notYet = await client.customDomains.verify(managed.custom_domain_id);
      assert.equal(notYet.status, 'pending_verification');
      assert.equal(notYet.verification?.status, 'pending');
      assert.match(notYet.verification?.error_msg ?? '', /No CNAME record found for login\.sdk\.test/);
      dns.setCname('login.sdk.test', managed.verification.methods?.[0]!.record);
      const ready = await client.customDomains.verify(managed.custom_domain_id);
      assert.equal(ready.status, 'ready');
      assert.equal(ready.verification?.status, 'verified');
      assert.equal(ready.cname_api_key, undefined);
      // No certificate source on this server: the default certificate is served, so no certificate status.
      assert.equal(managed.certificate, undefined, 'none before the first check');
      assert.deepEqual(notYet.certificate, {});
      assert.deepEqual(ready.certificate, {});
      assert.deepEqual((await client.customDomains.get(managed.custom_domain_id)).certificate, {});
      // customDomains.test: the ready domain's record is in place.
      assert.deepEqual(await client.customDomains.test(managed.custom_domain_id), { success: true });
      dns.setTxt(proxied.verification.methods![0]!.domain!, proxied.verification.methods![0]!.record);
      const proxiedReady = await client.customDomains.verify(proxied.custom_domain_id);
      assert.equal(proxiedReady.status, 'ready');
      assert.match(proxiedReady.cname_api_key ?? '', /^[0-9a-f]{128}$/);
      assert.equal('certificate' in proxiedReady, false, 'a self-managed domain has no certificate member');
      await assert.rejects(
        client.customDomains.verify(proxied.custom_domain_id),
        failsWith(400, {
          statusCode: 400,
          error: 'Bad Request',
          message: 'Custom domain already verified.',
          errorCode: 'invalid_body',
        }),
      );

      assert.deepEqual(await client.customDomains.getDefault(), { domain: https.domain });
      const made = await client.customDomains.setDefault({ domain: 'login.sdk.test' });
      assert.equal((made as { custom_domain_id?: string }).custom_domain_id, managed.custom_domain_id);
      assert.equal((made as { is_default?: boolean }).is_default, true);
      const current = await client.customDomains.getDefault();
      assert.equal(current.domain, 'login.sdk.test');
      assert.equal((current as { is_default?: boolean }).is_default, true);
      await assert.rejects(
        client.customDomains.delete(managed.custom_domain_id),
        failsWith(409, {
          statusCode: 409,
          error: 'Conflict',
          message:
            'Cannot delete the default custom domain. Please set another domain as default before deleting this one.',
        }),
      );
      assert.deepEqual(await client.customDomains.setDefault({ domain: https.domain }), { domain: https.domain });

      assert.equal(await client.customDomains.delete(managed.custom_domain_id), undefined);
      await assert.rejects(
        client.customDomains.get(managed.custom_domain_id),
        failsWith(404, {
          statusCode: 404,
          error: 'Not Found',
          message: `The custom domain ${managed.custom_domain_id} does not exist`,
          errorCode: 'inexistent_custom_domain',
        }),
      );
      assert.deepEqual(
        (await client.customDomains.list()).map((d) => d.domain),
        ['proxy.sdk.test'],
      );
    });

    it("surfaces refusals as the SDK's errors with the original bodies", async () => {
      await assert.rejects(
        client.customDomains.create({ domain: 'bad_host.sdk.test', type: 'self_managed_certs' }),
        (error: SdkError) => {
          assert.equal(error.statusCode, 400);
          assert.equal(error.body?.errorCode, 'invalid_body');
          return true;
        },
      );
      await assert.rejects(
        client.customDomains.create({ domain: 'proxy.sdk.test', type: 'self_managed_certs' }),
        failsWith(409, {
          statusCode: 409,
          error: 'Conflict',
          message: 'Custom domain already exists.',
        }),
      );
      const pending = await client.customDomains.create({ domain: 'pending.sdk.test', type: 'auth0_managed_certs' });
      await assert.rejects(
        client.customDomains.test(pending.custom_domain_id),
        failsWith(409, { statusCode: 409, error: 'Conflict', message: 'The custom domain is not ready.' }),
      );
      await assert.rejects(
        client.customDomains.setDefault({ domain: pending.domain }),
        failsWith(400, {
          statusCode: 400,
          error: 'Bad Request',
          message: 'The domain must be verified before it can be set as default.',
          errorCode: 'invalid_body',
        }),
      );
      await assert.rejects(
        client.customDomains.update(pending.custom_domain_id, { custom_client_ip_header: 'x-forwarded-for' }),
        failsWith(400, {
          statusCode: 400,
          error: 'Bad Request',
          message: "The 'custom_client_ip_header' cannot be set on svc_managed domains",
          errorCode: 'invalid_body',
        }),
      );
    });
  });
}
