import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeJwt } from 'jose';
import { claimDueRows } from '../../../src/db/claim-due.ts';
import { DUE_CHECKS } from '../../../src/modules/custom-domains/store.ts';
import { createServices, type Services } from '../../../src/services.ts';
import { ADMIN_ID, ADMIN_SECRET, startTestServer, type TestServer } from '../../helpers/server.ts';
import { eachDatabase } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { eventually } from '../../helpers/eventually.ts';

const WINDOW_S = 8;
/** Background checks 100 ms after creation, then 200 ms, 400 ms, then every 500 ms, for 8 s. */
const SCHEDULE = {
  CUSTOM_DOMAIN_VERIFY_WINDOW_S: String(WINDOW_S),
  CUSTOM_DOMAIN_RECHECK_INITIAL_MS: '100',
  CUSTOM_DOMAIN_RECHECK_MAX_MS: '500',
};

describe('custom domains: background re-checks', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`custom domains: background re-checks (${kind})`, () => {
      let server: TestServer;
      let dns: TestDnsServer;
      before(async () => {
        dns = await startDnsServer();
        server = await startTestServer(kind, { DNS_SERVERS: dns.address, CUSTOM_DOMAINS_MAX: '50', ...SCHEDULE });
      });
      after(async () => {
        await server.close();
        await dns.close();
      });

      const create = async (domain: string, type = 'svc_managed_certs') => {
        const response = await server.request({
          method: 'POST',
          url: '/api/v2/custom-domains',
          payload: { domain, type },
        });
        assert.equal(response.statusCode, 201, response.body);
        return response.json() as {
          custom_domain_id: string;
          created_at: string;
          verification: { methods: Array<{ record: string }> };
        };
      };
      const get = async (id: string) => (await server.request({ url: `/api/v2/custom-domains/${id}` })).json();
      const schedule = (id: string) =>
        server.services.database.db
          .selectFrom('custom_domains')
          .select(['next_check_at', 'check_count', 'check_claimed_until'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
      const whenStatus = (id: string, status: string) =>
        eventually(`${id} to become ${status}`, async () => {
          const record = await get(id);
          return record.status === status ? record : undefined;
        });

      it('makes a pending domain ready once its record appears, without a verify call, and serves it', async () => {
        const cd = await create('later.recheck.test');
        // The first background checks find nothing and say so.
        const pending = await eventually('a background check', async () => {
          const record = await get(cd.custom_domain_id);
          return record.verification.status === 'pending' ? record : undefined;
        });
        assert.equal(pending.status, 'pending_verification');
        assert.match(pending.verification.error_msg, /^No CNAME record found for later\.recheck\.test \(ENOTFOUND\)/);
        assert.ok((await schedule(cd.custom_domain_id)).check_count >= 1);

        dns.setCname('later.recheck.test', cd.verification.methods[0]!.record);
        const ready = await whenStatus(cd.custom_domain_id, 'ready');
        assert.equal(ready.verification.status, 'verified');
        assert.equal(ready.verification.error_msg, undefined);
        assert.match(ready.verification.last_verified_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
        assert.equal((await schedule(cd.custom_domain_id)).next_check_at, null, 'a ready domain leaves the schedule');
        // The background check made it servable: its host issues tokens with its issuer.
        const token = await server.tokenFor('later.recheck.test', ADMIN_ID, ADMIN_SECRET);
        assert.equal(decodeJwt(token).iss, 'https://later.recheck.test/');
        const again = await server.request({
          method: 'POST',
          url: `/api/v2/custom-domains/${cd.custom_domain_id}/verify`,
        });
        assert.equal(again.statusCode, 400);
        assert.equal(again.json().message, 'Custom domain already verified.');
      });

      it('hands the cname_api_key of a self-managed domain made ready in the background to the next verify, once', async () => {
        const cd = await create('proxied.recheck.test', 'self_managed_certs');
        dns.setTxt('_svc-custom-domain.proxied.recheck.test', cd.verification.methods[0]!.record);
        await whenStatus(cd.custom_domain_id, 'ready');
        const host = 'proxied.recheck.test';
        const before = await server.request({
          url: '/api/v2/custom-domains',
          headers: { host, 'cname-api-key': 'f'.repeat(128) },
        });
        assert.deepEqual(before.json(), {
          statusCode: 403,
          error: 'Forbidden',
          message:
            'The self-managed custom domain proxied.recheck.test has no cname-api-key yet: verify the domain to receive it',
          errorCode: 'invalid_cname_api_key',
        });

        const verified = await server.request({
          method: 'POST',
          url: `/api/v2/custom-domains/${cd.custom_domain_id}/verify`,
        });
        assert.equal(verified.statusCode, 200, verified.body);
        assert.equal(verified.json().status, 'ready');
        const key = verified.json().cname_api_key as string;
        assert.match(key, /^[0-9a-f]{128}$/);
        assert.equal(
          (await server.request({ url: '/api/v2/custom-domains', headers: { host, 'cname-api-key': key } })).statusCode,
          200,
        );
        const again = await server.request({
          method: 'POST',
          url: `/api/v2/custom-domains/${cd.custom_domain_id}/verify`,
        });
        assert.equal(again.statusCode, 400);
        assert.equal(again.json().message, 'Custom domain already verified.');
      });

      it('fails a domain whose record never appears once its window has run out; verify can still recover it', async () => {
        const cd = await create('never.recheck.test');
        const failed = await whenStatus(cd.custom_domain_id, 'failed');
        const failedAt = Date.now();
        assert.ok(failedAt - Date.parse(cd.created_at) >= WINDOW_S * 1000, 'not before the window has run out');
        assert.equal(failed.verification.status, 'failed');
        assert.match(
          failed.verification.error_msg,
          /^Verification did not succeed within 8 seconds: No CNAME record found for never\.recheck\.test \(ENOTFOUND\)/,
        );
        const row = await schedule(cd.custom_domain_id);
        assert.equal(row.next_check_at, null, 'a failed domain leaves the schedule');
        assert.equal(row.check_claimed_until, null);
        // A failed domain is none of the tenant's domains: no token for its audience.
        const served = await server.app.inject({
          method: 'POST',
          url: '/oauth/token',
          headers: { host: 'never.recheck.test' },
          payload: {
            grant_type: 'client_credentials',
            client_id: ADMIN_ID,
            client_secret: ADMIN_SECRET,
            audience: 'https://never.recheck.test/api/v2/',
          },
        });
        assert.equal(served.statusCode, 403);
        assert.equal(
          served.json().error_description,
          'Service not enabled within domain: https://never.recheck.test/api/v2/',
        );

        const stillFailing = await server.request({
          method: 'POST',
          url: `/api/v2/custom-domains/${cd.custom_domain_id}/verify`,
        });
        assert.equal(stillFailing.statusCode, 200);
        assert.equal(stillFailing.json().status, 'failed');
        assert.equal(stillFailing.json().verification.status, 'failed');
        dns.setCname('never.recheck.test', cd.verification.methods[0]!.record);
        const recovered = await server.request({
          method: 'POST',
          url: `/api/v2/custom-domains/${cd.custom_domain_id}/verify`,
        });
        assert.equal(recovered.json().status, 'ready');
        assert.equal(recovered.json().verification.status, 'verified');
      });

      it('never disturbs other domains: ready ones stay ready, members stay, a hanging lookup holds up no other domain', async () => {
        // A ready domain whose record then disappears: ready domains are not re-checked.
        const steady = await create('steady.recheck.test');
        dns.setCname('steady.recheck.test', steady.verification.methods[0]!.record);
        await whenStatus(steady.custom_domain_id, 'ready');
        dns.remove('steady.recheck.test');
        const steadyBefore = await get(steady.custom_domain_id);

        // One pending domain whose resolver hangs, one whose record never comes, one that becomes ready.
        dns.hold('hanging.recheck.test');
        await create('hanging.recheck.test');
        const waiting = await create('waiting.recheck.test');
        const patched = await server.request({
          method: 'PATCH',
          url: `/api/v2/custom-domains/${waiting.custom_domain_id}`,
          payload: { domain_metadata: { owner: 'team-a' } },
        });
        assert.equal(patched.statusCode, 200, patched.body);
        await eventually('the hanging lookup', async () =>
          dns.queries('hanging.recheck.test') > 0 ? true : undefined,
        );
        // Created while the hanging check is in flight, and ready before that check has its answer.
        const soon = await create('soon.recheck.test');
        dns.setCname('soon.recheck.test', soon.verification.methods[0]!.record);
        await whenStatus(soon.custom_domain_id, 'ready');
        dns.release('hanging.recheck.test');

        // Several rounds of checks of the waiting domain have passed meanwhile.
        await eventually('more checks of the waiting domain', async () =>
          (await schedule(waiting.custom_domain_id)).check_count >= 3 ? true : undefined,
        );
        const waitingNow = await get(waiting.custom_domain_id);
        assert.equal(waitingNow.status, 'pending_verification');
        assert.deepEqual(waitingNow.domain_metadata, { owner: 'team-a' }, 're-checks keep the members of the record');
        assert.deepEqual(await get(steady.custom_domain_id), steadyBefore, 'a ready domain is left alone');
      });

      it('shares the checks between nodes on one database: each domain is claimed by one node at a time', async () => {
        const second: Services = await createServices(server.services.config);
        try {
          // A lookup that hangs keeps the domain's claim busy; the other node's polls must leave it alone.
          dns.hold('shared.recheck.test');
          const cd = await create('shared.recheck.test');
          await eventually('the first check', async () => (dns.queries('shared.recheck.test') > 0 ? true : undefined));
          await sleep(700); // both nodes poll every 100 ms meanwhile (shorter than the resolver's own 2 s retry)
          assert.equal(dns.queries('shared.recheck.test'), 1, 'one node checks the domain at a time');
          const claimed = await schedule(cd.custom_domain_id);
          assert.notEqual(claimed.check_claimed_until, null);
          dns.setCname('shared.recheck.test', cd.verification.methods[0]!.record);
          dns.release('shared.recheck.test');
          // The held question is answered now, with the record in place.
          await whenStatus(cd.custom_domain_id, 'ready');

          // The claim itself, straight: two nodes claiming concurrently split the due domains between them.
          const ids = Array.from({ length: 20 }, (_, i) => `cd_claimtest${String(i).padStart(6, '0')}`);
          const far = '2100-01-01T00:00:00.000Z';
          await server.services.database.db
            .insertInto('custom_domains')
            .values(
              ids.map((id) => ({
                id,
                tenant_id: server.tenant.id,
                domain: `${id.toLowerCase().replace('_', '-')}.claim.test`,
                type: 'svc_managed_certs' as const,
                status: 'pending_verification' as const,
                is_primary: 0,
                verification_record: 'x.edge.test',
                verification_status: null,
                verification_error: null,
                last_verified_at: null,
                custom_client_ip_header: null,
                tls_policy: 'recommended',
                domain_metadata: null,
                relying_party_identifier: null,
                cname_api_key_hash: null,
                created_at: far,
                next_check_at: far,
                check_count: 0,
                check_claimed_until: null,
              })),
            )
            .execute();
          const at = '2100-01-02T00:00:00.000Z';
          const DAY_MS = 86_400_000;
          const drain = async (services: Services) => {
            const mine: string[] = [];
            for (;;) {
              const batch = await claimDueRows(services.database, DUE_CHECKS, { at, leaseMs: DAY_MS }, 3);
              if (batch.length === 0) return mine;
              // Domains of the other tests are pending too; only this test's are counted.
              mine.push(...batch.map((c) => c.id).filter((id) => ids.includes(id)));
            }
          };
          const [a, b] = await Promise.all([drain(server.services), drain(second)]);
          assert.deepEqual([...a, ...b].sort(), ids, 'every due domain claimed exactly once');
          assert.deepEqual(
            await claimDueRows(second.database, DUE_CHECKS, { at, leaseMs: DAY_MS }, 50),
            [],
            'nothing is claimed twice while the lease runs',
          );
          const afterLease = await claimDueRows(
            second.database,
            DUE_CHECKS,
            { at: '2100-01-04T00:00:00.000Z', leaseMs: DAY_MS },
            50,
          );
          assert.deepEqual(
            afterLease
              .map((c) => c.id)
              .filter((id) => ids.includes(id))
              .sort(),
            ids,
            'a lease that ran out is claimed again',
          );
          await server.services.database.db.deleteFrom('custom_domains').where('id', 'in', ids).execute();
          await server.services.database.db
            .updateTable('custom_domains')
            .set({ check_claimed_until: null })
            .where('check_claimed_until', '>=', at)
            .execute();
        } finally {
          await second.close();
        }
      });

      it('stops cleanly: a closing node waits for its check in flight, records it, and checks no more', async () => {
        // Only the second node checks here.
        await server.services.verificationRechecks.stop();
        const second: Services = await createServices(server.services.config);
        try {
          dns.hold('closing.recheck.test');
          const cd = await create('closing.recheck.test');
          await eventually('the check of the second node', async () =>
            dns.queries('closing.recheck.test') > 0 ? true : undefined,
          );
          let closed = false;
          const closing = second.close().then(() => (closed = true));
          await sleep(300);
          assert.equal(closed, false, 'close waits while the check is in flight');
          dns.release('closing.recheck.test');
          await closing;
          const row = await schedule(cd.custom_domain_id);
          assert.equal(row.check_count, 1, 'the check in flight was recorded before the database closed');
          assert.equal(row.check_claimed_until, null);
          assert.equal((await get(cd.custom_domain_id)).verification.status, 'pending');
          const queries = dns.queries('closing.recheck.test');
          await sleep(500);
          assert.equal(dns.queries('closing.recheck.test'), queries, 'a closed node checks nothing more');
        } finally {
          await second.close();
          server.services.verificationRechecks.start();
        }
      });
    });
  }),
);
