import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManagementClient } from 'auth0';
import { databaseKinds } from '../../helpers/databases.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';

for (const kind of databaseKinds()) {
  describe(`CAPTCHA through the official SDK over HTTPS (${kind})`, () => {
    let https: HttpsTestServer;
    let client: ManagementClient;
    before(async () => {
      https = await startHttpsTestServer(kind);
      client = new ManagementClient({ domain: https.domain, token: https.server.adminToken });
    });
    after(() => https.close());

    it('reads the default, updates a provider and reads it back, with the secret kept out', async () => {
      assert.deepEqual(await client.attackProtection.captcha.get(), {
        active_provider_id: 'auth_challenge',
        simple_captcha: {},
        auth_challenge: { fail_open: false },
      });

      const updated = await client.attackProtection.captcha.update({
        active_provider_id: 'recaptcha_enterprise',
        recaptcha_enterprise: { site_key: 'sdk-site-key', api_key: 'sdk-api-key', project_id: 'sdk-project' },
        auth_challenge: { fail_open: true },
      });
      const expected = {
        active_provider_id: 'recaptcha_enterprise',
        simple_captcha: {},
        auth_challenge: { fail_open: true },
        recaptcha_enterprise: { site_key: 'sdk-site-key', project_id: 'sdk-project' },
      };
      assert.deepEqual(updated, expected);
      assert.deepEqual(await client.attackProtection.captcha.get(), expected);
      const row = await https.server.services.database.db
        .selectFrom('captcha_providers')
        .select('secret')
        .where('provider', '=', 'recaptcha_enterprise')
        .executeTakeFirstOrThrow();
      assert.equal(https.server.services.secretBox.open(row.secret!), 'sdk-api-key');
    });

    it('surfaces validation errors to the SDK as a 400', async () => {
      await assert.rejects(
        client.attackProtection.captcha.update({ hcaptcha: { site_key: 'k' } } as never),
        (error: { statusCode?: number; body?: { errorCode?: string } }) => {
          assert.equal(error.statusCode, 400);
          assert.equal(error.body?.errorCode, 'invalid_body');
          return true;
        },
      );
    });
  });
}
