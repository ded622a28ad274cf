import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Management, ManagementClient } from 'auth0';
import { ManagementClient as LegacyManagementClient } from 'auth0-legacy';
import { databaseKinds } from '../../helpers/databases.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';
import { ADMIN_ID, ADMIN_SECRET } from '../../helpers/server.ts';

const DEFAULT = 'Username-Password-Authentication';

// Both official SDKs fetch their own token and call the API over HTTPS, as a customer's code would,
// to find a connection's id: v7's list() sends include_totals=true&take=50 (checkpoint pages), v4's
// getAll() sends what it is given (offset pages, or the bare array).
for (const kind of databaseKinds()) {
  describe(`the SDKs against the connections API (${kind})`, () => {
    let https: HttpsTestServer;
    before(async () => {
      https = await startHttpsTestServer(kind);
      const { services, tenant } = https.server;
      await services.connections.ensure(tenant.id, 'google-oauth2', 'google-oauth2');
      await services.connections.ensure(tenant.id, 'github', 'github');
    });
    after(() => https.close());

    const v7 = (clientId = ADMIN_ID, clientSecret = ADMIN_SECRET) =>
      new ManagementClient({ domain: https.domain, clientId, clientSecret });
    const v4 = (clientId = ADMIN_ID, clientSecret = ADMIN_SECRET) =>
      new LegacyManagementClient({ domain: https.domain, clientId, clientSecret });

    it('v7: lists every connection across checkpoint pages, filters, and gets one by id', async () => {
      const client = v7();
      const first = await client.connections.list();
      assert.deepEqual(first.data.map((c) => c.name).sort(), [DEFAULT, 'github', 'google-oauth2']);
      assert.equal(first.hasNextPage(), false);

      const walked: string[] = [];
      for await (const connection of await client.connections.list({ take: 1 })) walked.push(connection.name!);
      assert.deepEqual(walked.sort(), [DEFAULT, 'github', 'google-oauth2']);

      const own = await client.connections.list({ strategy: ['auth0'] });
      assert.deepEqual(
        own.data.map((c) => c.name),
        [DEFAULT],
      );
      const named = await client.connections.list({ name: 'github', fields: 'id,strategy' });
      assert.equal(named.data.length, 1);
      assert.deepEqual(Object.keys(named.data[0]!).sort(), ['id', 'strategy']);

      const id = own.data[0]!.id!;
      const connection = await client.connections.get(id);
      assert.deepEqual(connection, {
        id,
        options: {},
        strategy: 'svc',
        name: DEFAULT,
        is_domain_connection: false,
        realms: [DEFAULT],
      });
      assert.deepEqual(await client.connections.get(id, { fields: 'name' }), { name: DEFAULT });
    });

    it('v7: surfaces errors as its typed errors (404, 400, 403)', async () => {
      const client = v7();
      await assert.rejects(client.connections.get('con_0000000000000000'), (error: unknown) => {
        assert.ok(error instanceof Management.NotFoundError, String(error));
        assert.equal((error.body as { errorCode?: string }).errorCode, 'inexistent_connection');
        return true;
      });
      await assert.rejects(client.connections.get('not-an-id'), (error: unknown) => {
        assert.ok(error instanceof Management.BadRequestError, String(error));
        return true;
      });
      await assert.rejects(client.connections.list({ take: 500 }), Management.BadRequestError);

      const limited = await https.server.clientWithScopes(['read:users']);
      await assert.rejects(v7(limited.clientId, limited.clientSecret).connections.list(), (error: unknown) => {
        assert.ok(error instanceof Management.ForbiddenError, String(error));
        assert.equal(
          (error.body as { message?: string }).message,
          'Insufficient scope, expected any of: read:connections',
        );
        return true;
      });
    });

    it('v4 (auth0-legacy): getAll as an array, with totals, by strategy; get by id', async () => {
      const client = v4();
      const all = await client.connections.getAll();
      assert.equal(all.status, 200);
      assert.ok(Array.isArray(all.data));
      const list = all.data as Array<{ id: string; name: string }>;
      assert.deepEqual(list.map((c) => c.name).sort(), [DEFAULT, 'github', 'google-oauth2']);

      const paged = await client.connections.getAll({ include_totals: true, per_page: 2, page: 1 });
      assert.deepEqual(
        { ...paged.data, connections: undefined },
        { start: 2, limit: 2, total: 3, connections: undefined },
      );
      assert.equal((paged.data as { connections: unknown[] }).connections.length, 1);

      const social = await client.connections.getAll({ strategy: ['github', 'google-oauth2'] });
      assert.deepEqual((social.data as Array<{ name: string }>).map((c) => c.name).sort(), ['github', 'google-oauth2']);

      const own = list.find((c) => c.name === DEFAULT)!;
      const read = await client.connections.get({ id: own.id });
      assert.equal(read.status, 200);
      assert.deepEqual(read.data, own);

      await assert.rejects(client.connections.get({ id: 'con_0000000000000000' }), (error: unknown) => {
        assert.equal((error as { statusCode?: number }).statusCode, 404, String(error));
        return true;
      });
    });
  });
}
