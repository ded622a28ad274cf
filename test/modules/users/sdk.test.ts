import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Management, ManagementClient } from 'auth0';
import { databaseKinds } from '../../helpers/databases.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';
import { ADMIN_ID, ADMIN_SECRET } from '../../helpers/server.ts';

// The official SDK fetches its own token from https://<domain>/oauth/token and calls the API over
// HTTPS only, so this drives token issuance, audience checks and the users routes as a customer would.
for (const kind of databaseKinds()) {
  describe(`auth0 SDK v7 against the users API (${kind})`, () => {
    let https: HttpsTestServer;
    before(async () => {
      https = await startHttpsTestServer(kind);
    });
    after(() => https.close());

    const sdk = (clientId: string, clientSecret: string) =>
      new ManagementClient({ domain: https.domain, clientId, clientSecret });

    it('creates users and finds them by email', async () => {
      const client = sdk(ADMIN_ID, ADMIN_SECRET);
      const created = await client.users.create({
        connection: 'Username-Password-Authentication',
        email: 'SDK.User@Example.com',
        password: 'correct horse battery',
      });
      assert.match(created.user_id ?? '', /^svc\|[0-9a-f]{24}$/);
      assert.equal(created.email, 'sdk.user@example.com');
      await client.users.create({
        connection: 'Username-Password-Authentication',
        email: 'other@example.com',
        password: 'correct horse battery',
      });

      const found = await client.users.listUsersByEmail({ email: 'sdk.user@example.com' });
      assert.deepEqual(
        found.map((u) => u.user_id),
        [created.user_id],
      );
      assert.deepEqual(await client.users.listUsersByEmail({ email: 'nobody@example.com' }), []);
    });

    it('surfaces a missing scope as the SDK ForbiddenError', async () => {
      const limited = await https.server.clientWithScopes(['create:users']);
      const client = sdk(limited.clientId, limited.clientSecret);
      await assert.rejects(client.users.listUsersByEmail({ email: 'sdk.user@example.com' }), (error: unknown) => {
        assert.ok(error instanceof Management.ForbiddenError, String(error));
        assert.equal(error.statusCode, 403);
        return true;
      });
      const created = await client.users.create({
        connection: 'Username-Password-Authentication',
        email: 'limited@example.com',
        password: 'correct horse battery',
      });
      assert.equal(created.email, 'limited@example.com');
    });
  });
}
