import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type pg from 'pg';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { waitUntil } from '../../helpers/webhook-receiver.ts';

/**
 * Deleting a domain while another transaction makes it the default (another node's PATCH
 * /custom-domains/default), on PostgreSQL, where the two run at once. That transaction is written out
 * here as DefaultDomain.set runs it, held open at each step: the domain's row locked, then the defaults
 * row written. The delete must wait for it and then refuse (409: the default cannot be deleted). It
 * used to lock the defaults row first: with the canonical domain as the default there was none to lock,
 * so the delete went through and left the default naming a deleted domain; with another domain as the
 * default, the two deadlocked and one answered 500. And a PATCH giving the default back (`is_default:
 * false`) while another node makes another domain the default: it read the defaults row unlocked and
 * cleared the other node's new default.
 */
describe(
  'custom domains: a delete racing "set default" (PostgreSQL)',
  { skip: !databaseKinds().includes('postgres') && 'PostgreSQL only' },
  () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer('postgres');
    });
    after(() => server.close());

    /** A ready domain of the default tenant. */
    const readyDomain = async (domain: string) => {
      const created = await server.request({
        method: 'POST',
        url: '/api/v2/custom-domains',
        payload: { domain, type: 'svc_managed_certs' },
      });
      assert.equal(created.statusCode, 201, created.body);
      const id = created.json().custom_domain_id as string;
      await server.services.customDomains.verifyWithoutDns(server.tenant.id, id);
      return id;
    };
    const pool = () => server.services.database.pool!;
    /** Whether a backend of this database waits for a lock (the delete, behind the open transaction). */
    const someoneWaits = async () => {
      const { rows } = await pool().query<{ waiting: number }>(
        `SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return rows[0]!.waiting > 0;
    };
    /** "Set default" of `id`, begun: the domain's row locked, as DefaultDomain.set does first. */
    const beginSetDefault = async (id: string): Promise<pg.PoolClient> => {
      const client = await pool().connect();
      await client.query('BEGIN');
      await client.query('SELECT id FROM custom_domains WHERE id = $1 FOR UPDATE', [id]);
      return client;
    };
    /** …and ended: the defaults row written (CustomDomainStore.setDefault), committed. */
    const endSetDefault = async (client: pg.PoolClient, id: string) => {
      try {
        await client.query(
          `INSERT INTO custom_domain_defaults (tenant_id, custom_domain_id, updated_at) VALUES ($1, $2, $3)
         ON CONFLICT (tenant_id) DO UPDATE SET custom_domain_id = excluded.custom_domain_id, updated_at = excluded.updated_at`,
          [server.tenant.id, id, new Date().toISOString()],
        );
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    };
    const defaultDomain = async () =>
      ((await server.request({ url: '/api/v2/custom-domains/default' })).json() as { domain: string }).domain;

    for (const [what, earlierDefault] of [
      ['the canonical domain is the default (no defaults row to lock)', undefined],
      ['another domain is the default', 'earlier.race.test'],
    ] as const) {
      it(`refuses to delete the domain that became the default meanwhile, when ${what}`, async () => {
        if (earlierDefault !== undefined) {
          await readyDomain(earlierDefault);
          const set = await server.request({
            method: 'PATCH',
            url: '/api/v2/custom-domains/default',
            payload: { domain: earlierDefault },
          });
          assert.equal(set.statusCode, 200, set.body);
        }
        const domain = `contested-${earlierDefault === undefined ? 'a' : 'b'}.race.test`;
        const id = await readyDomain(domain);
        const setting = await beginSetDefault(id);
        const deleting = server.request({ method: 'DELETE', url: `/api/v2/custom-domains/${id}` });
        await waitUntil(someoneWaits, 5000, () => 'the delete to wait for the domain');
        await endSetDefault(setting, id);
        const deleted = await deleting;
        assert.equal(deleted.statusCode, 409, deleted.body);
        assert.match(deleted.json().message, /^Cannot delete the default custom domain/);
        assert.equal(await defaultDomain(), domain);
        assert.equal((await server.request({ url: `/api/v2/custom-domains/${id}` })).statusCode, 200);
      });
    }

    it("keeps another node's new default when a PATCH gives the default back meanwhile", async () => {
      const first = await readyDomain('first.race.test');
      const second = await readyDomain('second.race.test');
      const set = await server.request({
        method: 'PATCH',
        url: `/api/v2/custom-domains/${first}`,
        payload: { is_default: true },
      });
      assert.equal(set.statusCode, 200, set.body);
      // Another node makes the second domain the default, and is between its writes and its commit.
      const setting = await beginSetDefault(second);
      await setting.query(`UPDATE custom_domain_defaults SET custom_domain_id = $1 WHERE tenant_id = $2`, [
        second,
        server.tenant.id,
      ]);
      const giving = server.request({
        method: 'PATCH',
        url: `/api/v2/custom-domains/${first}`,
        payload: { is_default: false },
      });
      await waitUntil(someoneWaits, 5000, () => 'the PATCH to wait for the defaults row');
      await setting.query('COMMIT');
      setting.release();
      const given = await giving;
      assert.equal(given.statusCode, 200, given.body);
      // The first domain was no longer the default once the other node committed: nothing to give back.
      assert.equal(given.json().is_default, false);
      assert.equal(await defaultDomain(), 'second.race.test');
    });
  },
);
