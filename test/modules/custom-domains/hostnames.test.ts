import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { isUniqueViolation, migrate, openDatabase } from '../../../src/db/database.ts';
import { createServices, type Services } from '../../../src/services.ts';
import { createTestDatabase, migrateTo } from '../../helpers/databases.ts';
import { databaseKinds } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const TAKEN = 'The domain is already verified by another tenant.';

interface Record {
  custom_domain_id: string;
  domain: string;
  status: string;
  verification: { status?: string; error_msg?: string; methods: Array<{ record: string }> };
}

for (const kind of databaseKinds()) {
  describe(`custom domains: a hostname belongs to the first tenant to verify it (${kind})`, () => {
    let server: TestServer;
    let dns: TestDnsServer;
    /** Tokens of tenants a (the default tenant), b and c, each on its own canonical domain. */
    const tokens: { [tenant in 'a' | 'b' | 'c']: string } = { a: '', b: '', c: '' };
    const hosts = { a: 'tenant.test', b: 'b.test', c: 'c.test' };
    before(async () => {
      dns = await startDnsServer();
      server = await startTestServer(kind, { DNS_SERVERS: dns.address });
      tokens.a = server.adminToken;
      ({ token: tokens.b } = await server.addTenant('tenant-b', hosts.b));
      ({ token: tokens.c } = await server.addTenant('tenant-c', hosts.c));
    });
    after(async () => {
      await server.close();
      await dns.close();
    });

    type Who = keyof typeof tokens;
    const as = (who: Who) => ({ token: tokens[who], headers: { host: hosts[who] } });
    const create = (who: Who, domain: string, type = 'svc_managed_certs') =>
      server.request({ method: 'POST', url: '/api/v2/custom-domains', payload: { domain, type }, ...as(who) });
    const created = async (who: Who, domain: string, type?: string) => {
      const response = await create(who, domain, type);
      assert.equal(response.statusCode, 201, `${who} adds ${domain}: ${response.body}`);
      return response.json() as Record;
    };
    const verify = async (who: Who, id: string) => {
      const response = await server.request({ method: 'POST', url: `/api/v2/custom-domains/${id}/verify`, ...as(who) });
      assert.equal(response.statusCode, 200, response.body);
      return response.json() as Record;
    };
    const get = async (who: Who, id: string) =>
      (await server.request({ url: `/api/v2/custom-domains/${id}`, ...as(who) })).json() as Record;

    it('lets another tenant add a hostname only pending elsewhere; the same tenant adding it twice is a 409', async () => {
      const a = await created('a', 'pending.example');
      const b = await created('b', 'Pending.Example');
      assert.notEqual(a.custom_domain_id, b.custom_domain_id);
      assert.equal(b.status, 'pending_verification');
      const twice = await Promise.all([create('c', 'pending.example'), create('c', 'pending.example')]);
      assert.deepEqual(twice.map((r) => r.statusCode).sort(), [201, 409]);
      assert.deepEqual(twice.find((r) => r.statusCode === 409)!.json(), {
        statusCode: 409,
        error: 'Conflict',
        message: 'Custom domain already exists.',
      });
      assert.equal((await create('a', 'PENDING.example')).statusCode, 409);
    });

    it('gives the hostname to the first to verify: the other record fails, says why, cannot verify after; the host routes to the owner', async () => {
      const a = await created('a', 'x.example');
      const b = await created('b', 'x.example');
      dns.setCname('x.example', b.verification.methods[0]!.record);
      const owned = await verify('b', b.custom_domain_id);
      assert.equal(owned.status, 'ready');

      const lost = await verify('a', a.custom_domain_id);
      assert.equal(lost.status, 'failed');
      assert.equal(lost.verification.status, 'failed');
      assert.equal(lost.verification.error_msg, TAKEN);
      assert.deepEqual((await get('a', a.custom_domain_id)).verification.error_msg, TAKEN);
      // Even with DNS pointing to it now, a hostname verified for another tenant stays theirs.
      dns.remove('x.example');
      dns.setCname('x.example', a.verification.methods[0]!.record);
      const still = await verify('a', a.custom_domain_id);
      assert.equal(still.status, 'failed');
      assert.equal(still.verification.error_msg, TAKEN);
      assert.equal((await get('b', b.custom_domain_id)).status, 'ready');
      // A verified hostname is reserved: no one else can add it.
      assert.equal((await create('c', 'x.example')).statusCode, 409);

      // Requests for the host reach tenant b only.
      const list = await server.request({
        url: '/api/v2/custom-domains',
        token: tokens.b,
        headers: { host: 'x.example' },
      });
      assert.equal(list.statusCode, 200, list.body);
      const ids = (list.json() as Record[]).map((d) => d.custom_domain_id);
      assert.ok(ids.includes(b.custom_domain_id) && !ids.includes(a.custom_domain_id), "tenant b's list");
      const fromA = await server.request({
        url: '/api/v2/custom-domains',
        token: tokens.a,
        headers: { host: 'x.example' },
      });
      assert.equal(fromA.statusCode, 401);
      const resolved = await server.services.tenants.resolve('x.example');
      assert.equal(resolved?.tenant.id, 'tenant-b');
    });

    it('lets a failed record block no one: once the owner lets the hostname go, a third tenant adds and verifies it', async () => {
      const a = await created('a', 'z.example');
      const b = await created('b', 'z.example');
      dns.setCname('z.example', b.verification.methods[0]!.record);
      assert.equal((await verify('b', b.custom_domain_id)).status, 'ready');
      assert.equal((await verify('a', a.custom_domain_id)).status, 'failed');
      assert.equal(
        (await server.request({ method: 'DELETE', url: `/api/v2/custom-domains/${b.custom_domain_id}`, ...as('b') }))
          .statusCode,
        204,
      );

      const c = await created('c', 'z.example');
      dns.remove('z.example');
      dns.setCname('z.example', c.verification.methods[0]!.record);
      assert.equal((await verify('c', c.custom_domain_id)).status, 'ready');
      assert.equal((await server.services.tenants.resolve('z.example'))?.tenant.id, 'tenant-c');
      assert.equal((await verify('a', a.custom_domain_id)).verification.error_msg, TAKEN);
    });

    it('keeps canonical domains unclaimable, by any tenant', async () => {
      for (const [who, domain] of [
        ['a', hosts.b],
        ['b', hosts.a],
        ['a', hosts.a],
      ] as const) {
        const response = await create(who, domain);
        assert.deepEqual(
          response.json(),
          { statusCode: 409, error: 'Conflict', message: 'Custom domain already exists.' },
          `${who} claims ${domain}`,
        );
      }
      assert.equal(
        (
          await server.services.database.db
            .selectFrom('custom_domains')
            .select('id')
            .where('domain', 'in', [hosts.a, hosts.b])
            .execute()
        ).length,
        0,
      );
    });

    it('makes exactly one of two tenants verifying one hostname at the same moment on two nodes ready', async () => {
      // Two SQLite nodes in one process would block each other's event loop on the file's write lock
      // (better-sqlite3 waits synchronously); there, the nodes are one, whose transactions run in turn.
      const second: Services =
        kind === 'postgres' ? await createServices(server.services.config, { background: false }) : server.services;
      try {
        for (let round = 0; round < 5; round++) {
          const hostname = `race${round}.example`;
          const txt = `_svc-custom-domain.${hostname}`;
          const a = await created('a', hostname, 'self_managed_certs');
          const b = await created('b', hostname, 'self_managed_certs');
          dns.setTxt(txt, a.verification.methods[0]!.record);
          dns.setTxt(txt, b.verification.methods[0]!.record);
          // Both lookups wait for one another, so both transactions start together.
          dns.hold(txt);
          const racing = Promise.all([
            server.services.customDomains.verify('tenant-b', b.custom_domain_id),
            second.customDomains.verify(server.tenant.id, a.custom_domain_id),
          ]);
          await eventually('both lookups', async () => (dns.queries(txt) >= 2 ? true : undefined));
          dns.release(txt);
          const results = await racing;
          assert.deepEqual(results.map((r) => r.status).sort(), ['failed', 'ready'], hostname);
          const loser = results.find((r) => r.status === 'failed')!;
          assert.equal(loser.verification.error_msg, TAKEN);
          assert.equal(loser.cname_api_key, undefined, 'the loser is handed no key');
          assert.match(results.find((r) => r.status === 'ready')!.cname_api_key!, /^[0-9a-f]{128}$/);
          const rows = await server.services.database.db
            .selectFrom('custom_domains')
            .select('status')
            .where('domain', '=', hostname)
            .execute();
          assert.deepEqual(rows.map((r) => r.status).sort(), ['failed', 'ready']);
        }
      } finally {
        if (second !== server.services) await second.close();
      }
    });

    it('holds one ready domain per hostname in the database itself', async () => {
      const a = await created('a', 'index.example');
      const b = await created('b', 'index.example');
      const db = server.services.database.db;
      await db.updateTable('custom_domains').set({ status: 'ready' }).where('id', '=', a.custom_domain_id).execute();
      await assert.rejects(
        db.updateTable('custom_domains').set({ status: 'ready' }).where('id', '=', b.custom_domain_id).execute(),
        isUniqueViolation,
      );
      await db.updateTable('custom_domains').set({ status: 'failed' }).where('id', '=', a.custom_domain_id).execute();
      await db.updateTable('custom_domains').set({ status: 'ready' }).where('id', '=', b.custom_domain_id).execute();
    });
  });

  describe(`custom domains: background re-checks and taken hostnames (${kind})`, () => {
    let server: TestServer;
    let dns: TestDnsServer;
    let tokenB: string;
    before(async () => {
      dns = await startDnsServer();
      server = await startTestServer(kind, {
        DNS_SERVERS: dns.address,
        CUSTOM_DOMAIN_RECHECK_INITIAL_MS: '100',
        CUSTOM_DOMAIN_RECHECK_MAX_MS: '300',
      });
      ({ token: tokenB } = await server.addTenant('tenant-b', 'b.test'));
    });
    after(async () => {
      await server.close();
      await dns.close();
    });

    it('fails, on its next background check, a pending record whose hostname another tenant verified', async () => {
      const payload = { domain: 'bg.example', type: 'svc_managed_certs' };
      const a = (await server.request({ method: 'POST', url: '/api/v2/custom-domains', payload })).json() as Record;
      const added = await server.request({
        method: 'POST',
        url: '/api/v2/custom-domains',
        payload,
        token: tokenB,
        headers: { host: 'b.test' },
      });
      assert.equal(added.statusCode, 201, added.body);
      const b = added.json() as Record;
      dns.setCname('bg.example', b.verification.methods[0]!.record);
      const failed = await eventually('a to fail', async () => {
        const record = (await server.request({ url: `/api/v2/custom-domains/${a.custom_domain_id}` })).json() as Record;
        return record.status === 'failed' ? record : undefined;
      });
      assert.equal(failed.verification.error_msg, TAKEN);
      const owner = (
        await server.request({
          url: `/api/v2/custom-domains/${b.custom_domain_id}`,
          token: tokenB,
          headers: { host: 'b.test' },
        })
      ).json();
      assert.equal(owner.status, 'ready');
      const row = await server.services.database.db
        .selectFrom('custom_domains')
        .select('next_check_at')
        .where('id', '=', a.custom_domain_id)
        .executeTakeFirstOrThrow();
      assert.equal(row.next_check_at, null, 'a taken domain leaves the schedule');
    });
  });
}

describe('migration 011: hostnames unique among ready domains', () => {
  it('keeps every domain and its certificate when it lifts the unique hostname (sqlite)', async () => {
    const test = await createTestDatabase('sqlite');
    const database = openDatabase({ dataDir: test.dataDir });
    try {
      await migrateTo(database, '010_ticket_user_index');
      const db = database.db;
      const at = new Date().toISOString();
      await db
        .insertInto('tenants')
        .values([
          { id: 'one', domain: 'one.test', created_at: at },
          { id: 'two', domain: 'two.test', created_at: at },
        ])
        .execute();
      await db
        .insertInto('custom_domains')
        .values({
          id: 'cd_0000000000000001',
          tenant_id: 'one',
          domain: 'kept.example',
          type: 'self_managed_certs',
          status: 'ready',
          is_primary: 1,
          verification_record: 'r',
          verification_status: 'verified',
          verification_error: null,
          last_verified_at: at,
          custom_client_ip_header: null,
          tls_policy: null,
          domain_metadata: '{"k":"v"}',
          relying_party_identifier: null,
          cname_api_key_hash: 'h',
          created_at: at,
          next_check_at: null,
          check_count: 3,
          check_claimed_until: null,
        })
        .execute();
      await db
        .insertInto('custom_domain_certificates')
        .values({
          custom_domain_id: 'cd_0000000000000001',
          source: 'uploaded',
          certificate: 'c',
          private_key: 'k',
          fingerprint: 'f',
          not_before: at,
          not_after: at,
          updated_at: at,
        })
        .execute();

      await migrate(database);
      const row = await db.selectFrom('custom_domains').selectAll().executeTakeFirstOrThrow();
      assert.equal(row.domain_metadata, '{"k":"v"}');
      assert.equal(row.check_count, 3);
      assert.equal(
        (await db.selectFrom('custom_domain_certificates').select('custom_domain_id').execute()).length,
        1,
        'the certificate survived',
      );
      const pending = { ...row, id: 'cd_0000000000000002', tenant_id: 'two', status: 'pending_verification' as const };
      await db.insertInto('custom_domains').values(pending).execute();
      await assert.rejects(
        db.updateTable('custom_domains').set({ status: 'ready' }).where('id', '=', pending.id).execute(),
        isUniqueViolation,
      );
      await assert.rejects(
        db
          .insertInto('custom_domains')
          .values({ ...pending, id: 'cd_0000000000000003' })
          .execute(),
        isUniqueViolation,
      );
      // Foreign keys are on again: deleting the tenant takes its domains and their certificates.
      await db.deleteFrom('tenants').where('id', '=', 'one').execute();
      assert.equal((await db.selectFrom('custom_domain_certificates').select('custom_domain_id').execute()).length, 0);
      assert.equal(database.sqlite!.pragma('foreign_keys', { simple: true }), 1);
    } finally {
      await database.close();
      fs.rmSync(test.dataDir, { recursive: true, force: true });
    }
  });
});
