import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { ManagementClient } from 'auth0';
import { CustomDomainRecord, VerifiedCustomDomain } from '../../../src/modules/custom-domains/schema.ts';
import { CustomDomainService } from '../../../src/modules/custom-domains/service.ts';
import type { DnsCheck } from '../../../src/modules/custom-domains/dns-check.ts';
import { CustomDomainStore } from '../../../src/modules/custom-domains/store.ts';
import { createCertificateAuthority, issueServerCertificate } from '../../../src/tls/dev-ca.ts';
import { SVC_RECORD_KEYS, svcRecordKeysWithout } from '../../helpers/custom-domain-record.ts';
import { eachDatabase } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';
import { recordingDatabase } from '../../helpers/recorded-queries.ts';

const EDGE = 'edge.member.test';
const SECONDS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

const withoutDefault = svcRecordKeysWithout('is_default');

const ajv = new Ajv({ allErrors: true, strict: false });
addFormatsModule.default(ajv);
const validators = new Map([CustomDomainRecord, VerifiedCustomDomain].map((schema) => [schema, ajv.compile(schema)]));

/** A response body the record schema accepts as a whole: no member it does not declare, none it requires missing. */
function conforms(schema: typeof CustomDomainRecord | typeof VerifiedCustomDomain, body: unknown): void {
  const validate = validators.get(schema)!;
  validate(body);
  assert.deepEqual(validate.errors ?? [], [], JSON.stringify(body));
}

describe('the certificate member of custom-domain records', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`the certificate member of custom-domain records (${kind})`, () => {
      let https: HttpsTestServer;
      let dns: TestDnsServer;
      let workDir: string;
      let other: { token: string };
      before(async () => {
        dns = await startDnsServer();
        workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-cd-member-'));
        const ca = createCertificateAuthority({ commonName: 'Certificate Member Test CA' });
        fs.writeFileSync(path.join(workDir, 'ca.pem'), ca.cert);
        fs.writeFileSync(path.join(workDir, 'ca-key.pem'), ca.key);
        https = await startHttpsTestServer(kind, {
          DNS_SERVERS: dns.address,
          CUSTOM_DOMAIN_EDGE_DOMAIN: EDGE,
          CUSTOM_DOMAIN_CERT_SOURCE: 'dev-ca',
          DEV_CA_CERT_FILE: path.join(workDir, 'ca.pem'),
          DEV_CA_KEY_FILE: path.join(workDir, 'ca-key.pem'),
          CUSTOM_DOMAINS_MAX: '20',
        });
        other = await https.server.addTenant('member-other', 'member-other.test');
      });
      after(async () => {
        await https.close();
        await dns.close();
        fs.rmSync(workDir, { recursive: true, force: true });
      });

      const api = (options: { method?: string; url: string; payload?: Record<string, unknown>; token?: string }) =>
        https.server.request(options);
      const asOther = (options: { method?: string; url: string; payload?: Record<string, unknown> }) =>
        https.server.request({ ...options, token: other.token, headers: { host: 'member-other.test' } });
      const db = () => https.server.services.database.db;
      const certificateRow = (id: string) =>
        db().selectFrom('custom_domain_certificates').selectAll().where('custom_domain_id', '=', id).executeTakeFirst();
      const create = async (domain: string, type = 'svc_managed_certs') => {
        const created = await api({
          method: 'POST',
          url: '/api/v2/custom-domains',
          payload: { domain, type, domain_metadata: { team: 'id' }, relying_party_identifier: domain },
        });
        assert.equal(created.statusCode, 201, created.body);
        return created.json();
      };
      const verify = async (id: string) => {
        const response = await api({ method: 'POST', url: `/api/v2/custom-domains/${id}/verify` });
        assert.equal(response.statusCode, 200, response.body);
        conforms(VerifiedCustomDomain, response.json());
        return response.json();
      };
      const get = async (id: string) => {
        const response = await api({ url: `/api/v2/custom-domains/${id}` });
        assert.equal(response.statusCode, 200, response.body);
        conforms(CustomDomainRecord, response.json());
        return response.json();
      };
      /** A ready svc-managed domain whose certificate the server has issued and stored. */
      const provisioned = async (domain: string) => {
        const cd = await create(domain);
        dns.setCname(domain, cd.verification.methods[0].record);
        assert.equal((await verify(cd.custom_domain_id)).status, 'ready');
        await eventually('the certificate to be stored', () => certificateRow(cd.custom_domain_id));
        return cd.custom_domain_id as string;
      };

      it('shows none before the first check, {} while pending, provisioning once ready, provisioned once stored; in wire order', async () => {
        const cd = await create('login.member.test');
        // Fresh: no check yet, no member (as the original).
        assert.deepEqual(Object.keys(cd), svcRecordKeysWithout('certificate'));
        conforms(CustomDomainRecord, cd);
        assert.deepEqual(Object.keys(await get(cd.custom_domain_id)), Object.keys(cd));

        // A check that found nothing: the member appears, empty (the original shows only its CA here).
        const pending = await verify(cd.custom_domain_id);
        assert.equal(pending.status, 'pending_verification');
        assert.deepEqual(Object.keys(pending), withoutDefault);
        assert.deepEqual(pending.certificate, {});
        assert.deepEqual(Object.keys(await get(cd.custom_domain_id)), SVC_RECORD_KEYS);
        assert.deepEqual((await get(cd.custom_domain_id)).certificate, {});

        // Ready: the verify response is made before the certificate is issued.
        dns.setCname('login.member.test', cd.verification.methods[0].record);
        const ready = await verify(cd.custom_domain_id);
        assert.equal(ready.status, 'ready');
        assert.deepEqual(Object.keys(ready), withoutDefault);
        assert.deepEqual(ready.certificate, { status: 'provisioning' });

        const row = await eventually('the certificate to be stored', () => certificateRow(cd.custom_domain_id));
        assert.equal(row.source, 'dev-ca');
        const leaf = new X509Certificate(row.certificate);
        const shown = await get(cd.custom_domain_id);
        assert.deepEqual(Object.keys(shown), SVC_RECORD_KEYS);
        assert.deepEqual(Object.keys(shown.certificate), ['renews_before', 'status']);
        assert.match(shown.certificate.renews_before, SECONDS);
        assert.deepEqual(shown.certificate, {
          renews_before: new Date(leaf.validTo).toISOString().replace('.000Z', 'Z'),
          status: 'provisioned',
        });
        assert.equal('certificate_authority' in shown.certificate, false, 'the development CA is no public CA');
        // The byte order on the wire, not only the parsed one.
        const body = (await api({ url: `/api/v2/custom-domains/${cd.custom_domain_id}` })).body;
        assert.ok(
          body.includes(
            `"domain_metadata":{"team":"id"},"certificate":{"renews_before":"${shown.certificate.renews_before}","status":"provisioned"},"created_at":`,
          ),
          body,
        );
      });

      it('shows the same member in every read: list (both forms), projections, PATCH, default', async () => {
        const id = await provisioned('every.member.test');
        const expected = (await get(id)).certificate;
        assert.equal(expected.status, 'provisioned');

        const bare = await api({ url: '/api/v2/custom-domains' });
        const listed = (bare.json() as Array<{ custom_domain_id: string }>).find((d) => d.custom_domain_id === id)!;
        conforms(CustomDomainRecord, listed);
        assert.deepEqual(Object.keys(listed), SVC_RECORD_KEYS);
        assert.deepEqual((listed as unknown as { certificate: unknown }).certificate, expected);

        const paged = await api({ url: '/api/v2/custom-domains?take=1&q=domain:every.member.test' });
        assert.deepEqual(Object.keys(paged.json()), ['custom_domains']);
        assert.deepEqual(paged.json().custom_domains[0].certificate, expected);
        conforms(CustomDomainRecord, paged.json().custom_domains[0]);

        const only = await api({
          url: '/api/v2/custom-domains?fields=custom_domain_id,certificate&include_fields=true',
        });
        const onlyOne = only.json().find((d: { custom_domain_id: string }) => d.custom_domain_id === id);
        assert.deepEqual(onlyOne, { custom_domain_id: id, certificate: expected });
        const pagedOnly = await api({
          url: '/api/v2/custom-domains?take=50&q=domain:every*&fields=certificate,domain',
        });
        assert.deepEqual(pagedOnly.json(), {
          custom_domains: [{ domain: 'every.member.test', certificate: expected }],
        });
        const without = await api({
          url: '/api/v2/custom-domains?q=domain:every.member.test&fields=certificate&include_fields=false',
        });
        assert.deepEqual(Object.keys(without.json()[0]), svcRecordKeysWithout('certificate'));

        const patched = await api({
          method: 'PATCH',
          url: `/api/v2/custom-domains/${id}`,
          payload: { domain_metadata: { team: 'edge' } },
        });
        assert.equal(patched.statusCode, 200, patched.body);
        conforms(CustomDomainRecord, patched.json());
        assert.deepEqual(Object.keys(patched.json()), SVC_RECORD_KEYS);
        assert.deepEqual(patched.json().certificate, expected);

        const made = await api({
          method: 'PATCH',
          url: '/api/v2/custom-domains/default',
          payload: { domain: 'every.member.test' },
        });
        assert.equal(made.statusCode, 200, made.body);
        conforms(CustomDomainRecord, made.json());
        assert.equal(made.json().is_default, true);
        assert.deepEqual(made.json().certificate, expected);
        const byPatch = await api({
          method: 'PATCH',
          url: `/api/v2/custom-domains/${id}`,
          payload: { is_default: true },
        });
        assert.deepEqual(byPatch.json().certificate, expected);
        const current = await api({ url: '/api/v2/custom-domains/default' });
        conforms(CustomDomainRecord, current.json());
        assert.deepEqual(current.json().certificate, expected);
        const back = await api({
          method: 'PATCH',
          url: '/api/v2/custom-domains/default',
          payload: { domain: https.domain },
        });
        assert.deepEqual(back.json(), { domain: https.domain });
      });

      it('reads the certificates of a whole list in one statement, and none for a list without ready svc-managed domains', async () => {
        for (const name of ['a.batch.test', 'b.batch.test', 'c.batch.test']) await provisioned(name);
        const recording = recordingDatabase(https.server.services.database);
        const service = new CustomDomainService(
          new CustomDomainStore(recording.database),
          https.server.services.tenants,
          {} as DnsCheck,
          {
            edgeDomain: EDGE,
            maxPerTenant: 20,
            verifyWindowMs: 60_000,
            recheckInitialMs: 60_000,
            recheckMaxMs: 60_000,
            certificateSource: 'dev-ca',
          },
          { becameReady: () => undefined },
        );
        const records = (await service.list(https.server.tenant.id, { q: 'domain:*' })) as Array<{
          certificate?: { status?: string };
        }>;
        assert.ok(records.filter((r) => r.certificate?.status === 'provisioned').length >= 4);
        const reads = recording.queries.filter((q) => q.sql.includes('custom_domain_certificates'));
        assert.equal(reads.length, 1, reads.map((q) => q.sql).join('\n'));
        assert.equal(recording.queries.length, 3, 'the domains, the default, the certificates');

        recording.queries.length = 0;
        await service.create(https.server.tenant.id, { domain: 'fresh.batch.test', type: 'svc_managed_certs' });
        await service.list(https.server.tenant.id, { q: 'domain:fresh.batch.test' });
        assert.deepEqual(
          recording.queries.filter((q) => q.sql.includes('custom_domain_certificates')),
          [],
          'a pending domain needs no certificate read',
        );
      });

      it('shows provisioning for an expired certificate or one of another source; nothing for self-managed domains', async () => {
        const id = await provisioned('aging.member.test');
        const ca = createCertificateAuthority({ commonName: 'Elsewhere CA' });
        const stale = new X509Certificate(issueServerCertificate(ca, ['aging.member.test']).cert);
        const plant = (values: { source: string; not_after: string }) =>
          db()
            .updateTable('custom_domain_certificates')
            .set({ ...values, not_before: new Date(stale.validFrom).toISOString() })
            .where('custom_domain_id', '=', id)
            .execute();
        await plant({ source: 'dev-ca', not_after: new Date(Date.now() - 1000).toISOString() });
        assert.deepEqual((await get(id)).certificate, { status: 'provisioning' });
        await plant({ source: 'elsewhere', not_after: new Date(stale.validTo).toISOString() });
        assert.deepEqual((await get(id)).certificate, { status: 'provisioning' });
        const later = new Date(Date.now() + 40 * 86_400_000).toISOString();
        await plant({ source: 'dev-ca', not_after: later });
        assert.deepEqual((await get(id)).certificate, {
          renews_before: later.replace(/\.\d{3}Z$/, 'Z'),
          status: 'provisioned',
        });

        // A ready self-managed domain with an uploaded certificate: no member, as the original.
        const self = await create('self.member.test', 'self_managed_certs');
        dns.setTxt(self.verification.methods[0].domain, self.verification.methods[0].record);
        const ready = await verify(self.custom_domain_id);
        assert.equal(ready.status, 'ready');
        assert.equal('certificate' in ready, false);
        await db()
          .insertInto('custom_domain_certificates')
          .values({
            custom_domain_id: self.custom_domain_id,
            source: 'upload',
            certificate: 'pem',
            private_key: 'sealed',
            fingerprint: 'fp',
            not_before: new Date().toISOString(),
            not_after: later,
            updated_at: new Date().toISOString(),
          })
          .execute();
        const shown = await get(self.custom_domain_id);
        assert.equal('certificate' in shown, false);
        const listed = (await api({ url: '/api/v2/custom-domains?q=domain:self.member.test' })).json();
        assert.equal('certificate' in listed[0], false);
      });

      it("never shows one tenant's certificate on another's domain of the same hostname, nor its domain at all", async () => {
        // The other tenant adds the hostname while it is pending here: the first to verify it owns it.
        const theirs = await asOther({
          method: 'POST',
          url: '/api/v2/custom-domains',
          payload: { domain: 'shared.member.test', type: 'svc_managed_certs' },
        });
        assert.equal(theirs.statusCode, 201, theirs.body);
        const ours = await provisioned('shared.member.test');
        assert.equal((await get(ours)).certificate.status, 'provisioned');

        const lost = await asOther({
          method: 'POST',
          url: `/api/v2/custom-domains/${theirs.json().custom_domain_id}/verify`,
        });
        assert.equal(lost.statusCode, 200, lost.body);
        assert.equal(lost.json().status, 'failed');
        assert.deepEqual(lost.json().certificate, {});
        const theirsNow = await asOther({ url: `/api/v2/custom-domains/${theirs.json().custom_domain_id}` });
        assert.deepEqual(theirsNow.json().certificate, {});
        const theirList = await asOther({ url: '/api/v2/custom-domains?fields=custom_domain_id,certificate' });
        assert.deepEqual(theirList.json(), [{ custom_domain_id: theirs.json().custom_domain_id, certificate: {} }]);
        const paged = await asOther({ url: '/api/v2/custom-domains?take=10' });
        assert.deepEqual(
          paged.json().custom_domains.map((d: { custom_domain_id: string }) => d.custom_domain_id),
          [theirs.json().custom_domain_id],
        );

        for (const [method, url] of [
          ['GET', `/api/v2/custom-domains/${ours}`],
          ['PATCH', `/api/v2/custom-domains/${ours}`],
          ['POST', `/api/v2/custom-domains/${ours}/verify`],
        ] as const) {
          const response = await asOther({ method, url, ...(method === 'PATCH' ? { payload: {} } : {}) });
          assert.equal(response.statusCode, 404, `${method} ${url}`);
          assert.equal(response.json().errorCode, 'inexistent_custom_domain');
          assert.doesNotMatch(response.body, /provision|renews_before/);
        }
        const setDefault = await asOther({
          method: 'PATCH',
          url: '/api/v2/custom-domains/default',
          payload: { domain: 'shared.member.test' },
        });
        assert.equal(setDefault.statusCode, 400, setDefault.body);
      });

      it('reaches the official SDK as its DomainCertificate', async () => {
        const id = await provisioned('sdk.member.test');
        const client = new ManagementClient({ domain: https.domain, token: https.server.adminToken });
        const got = await client.customDomains.get(id);
        assert.equal(got.certificate?.status, 'provisioned');
        assert.match(got.certificate?.renews_before ?? '', SECONDS);
        assert.equal(got.certificate?.certificate_authority, undefined);
        const listed = (await client.customDomains.list({ q: 'domain:sdk.member.test' }))[0]!;
        assert.deepEqual(listed.certificate, got.certificate);
        const updated = await client.customDomains.update(id, { tls_policy: 'recommended' });
        assert.deepEqual(updated.certificate, got.certificate);
        const pending = await client.customDomains.create({
          domain: 'sdk-pending.member.test',
          type: 'auth0_managed_certs',
        });
        assert.equal(pending.certificate, undefined);
        const checked = await client.customDomains.verify(pending.custom_domain_id);
        assert.deepEqual(checked.certificate, {});
      });
    });
  }),
);
