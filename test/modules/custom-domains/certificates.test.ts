import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { decodeJwt } from 'jose';
import { buildApp } from '../../../src/app.ts';
import { ConfigError, loadConfig } from '../../../src/config.ts';
import { checkUploadedCertificate } from '../../../src/modules/custom-domains/certificates.ts';
import { createServices } from '../../../src/services.ts';
import {
  createCertificateAuthority,
  issueServerCertificate,
  writeDevelopmentCertificates,
  type PemPair,
} from '../../../src/tls/dev-ca.ts';
import { runCli } from '../../helpers/cli.ts';
import { eachDatabase } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';
import { ADMIN_ID, ADMIN_SECRET } from '../../helpers/server.ts';

const EDGE = 'edge.tls.test';
const DEADLINE_MS = 60_000;

interface Handshake {
  certificate: X509Certificate;
  authorized: boolean;
  authorizationError: string | undefined;
}

/** A real TLS handshake with 127.0.0.1 asking for `servername`, judged against `ca`. */
function handshake(port: number, servername: string, ca: string): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername, ca: [ca], rejectUnauthorized: false }, () => {
      const certificate = socket.getPeerX509Certificate();
      const result = {
        certificate: certificate!,
        authorized: socket.authorized,
        authorizationError: socket.authorizationError?.toString(),
      };
      socket.end();
      resolve(result);
    });
    socket.on('error', reject);
  });
}

/** An HTTP request over TLS to 127.0.0.1, with SNI and Host both `host`, refusing anything `ca` does not vouch for. */
function request(
  port: number,
  host: string,
  ca: string,
  options: { method?: string; path: string; body?: unknown; token?: string },
): Promise<{ status: number; json: any }> {
  const body = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        servername: host,
        ca: [ca],
        agent: false,
        method: options.method ?? 'GET',
        path: options.path,
        headers: {
          host,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text === '' ? undefined : JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The middle of a PEM body: present in any file that stored the PEM in plaintext. */
const pemBodySample = (pem: string) => pem.split('\n')[3]!;

describe('custom domain certificates over HTTPS', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`custom domain certificates over HTTPS (${kind})`, () => {
      let server: HttpsTestServer;
      let dns: TestDnsServer;
      let port: number;
      let devCa: PemPair;
      let devCaX509: X509Certificate;
      let workDir: string;
      let nodeEnv: Record<string, string>;
      const nodes: Array<() => Promise<void>> = [];

      before(async () => {
        dns = await startDnsServer();
        workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-cd-certs-'));
        devCa = createCertificateAuthority({ commonName: 'Custom Domain Test CA' });
        devCaX509 = new X509Certificate(devCa.cert);
        fs.writeFileSync(path.join(workDir, 'ca.pem'), devCa.cert);
        fs.writeFileSync(path.join(workDir, 'ca-key.pem'), devCa.key);
        const overrides = {
          DNS_SERVERS: dns.address,
          CUSTOM_DOMAIN_EDGE_DOMAIN: EDGE,
          CUSTOM_DOMAIN_CERT_SOURCE: 'dev-ca',
          DEV_CA_CERT_FILE: path.join(workDir, 'ca.pem'),
          DEV_CA_KEY_FILE: path.join(workDir, 'ca-key.pem'),
          CUSTOM_DOMAIN_CERT_REFRESH_MS: '300',
          // Background DNS re-checks soon after creation, so a domain can also become ready without a verify call.
          CUSTOM_DOMAIN_RECHECK_INITIAL_MS: '1000',
          CUSTOM_DOMAIN_RECHECK_MAX_MS: '1000',
        };
        server = await startHttpsTestServer(kind, overrides);
        port = (server.server.app.server.address() as AddressInfo).port;
        const { database } = server.server;
        nodeEnv = {
          ...overrides,
          DATA_DIR: database.dataDir,
          ...(database.databaseUrl ? { DATABASE_URL: database.databaseUrl } : {}),
          TENANT_DOMAIN: server.domain,
          LOG_LEVEL: 'silent',
          DELIVERY_WORKER: 'false',
        };
      });
      after(async () => {
        for (const close of nodes) await close();
        await server.close();
        await dns.close();
        fs.rmSync(workDir, { recursive: true, force: true });
      });

      /** Another node on the same database, with a default certificate of its own CA. */
      const startNode = async (): Promise<number> => {
        const services = await createServices(loadConfig(nodeEnv));
        const ownCa = createCertificateAuthority({ commonName: 'Second Node CA' });
        const leaf = issueServerCertificate(ownCa, ['localhost']);
        const app = await buildApp(services, { https: { cert: leaf.cert, key: leaf.key } });
        await app.listen({ port: 0, host: '127.0.0.1' });
        nodes.push(async () => {
          await app.close();
          await services.close();
        });
        return (app.server.address() as AddressInfo).port;
      };

      const api = (options: { method?: string; url: string; payload?: Record<string, unknown> }) =>
        server.server.request(options);
      const certificateRow = (domain: string) =>
        server.server.services.database.db
          .selectFrom('custom_domain_certificates')
          .innerJoin('custom_domains', 'custom_domains.id', 'custom_domain_certificates.custom_domain_id')
          .selectAll('custom_domain_certificates')
          .where('custom_domains.domain', '=', domain)
          .executeTakeFirst();
      const readyDomain = async (domain: string, type: 'svc_managed_certs' | 'self_managed_certs') => {
        const created = await api({ method: 'POST', url: '/api/v2/custom-domains', payload: { domain, type } });
        assert.equal(created.statusCode, 201, created.body);
        const method = created.json().verification.methods[0];
        if (type === 'svc_managed_certs') dns.setCname(domain, method.record);
        else dns.setTxt(method.domain, method.record);
        const id = created.json().custom_domain_id as string;
        const verified = await api({ method: 'POST', url: `/api/v2/custom-domains/${id}/verify` });
        // A background re-check may have made it ready first.
        if (verified.statusCode === 400) assert.equal(verified.json().message, 'Custom domain already verified.');
        else assert.equal(verified.json().status, 'ready', verified.body);
        assert.equal((await api({ url: `/api/v2/custom-domains/${id}` })).json().status, 'ready');
        return id;
      };
      /** Replaces the stored certificate of a domain, as another node (or time) would have. */
      const plant = async (domain: string, pair: PemPair) => {
        const x509 = new X509Certificate(pair.cert);
        const { id } = await server.server.services.database.db
          .selectFrom('custom_domains')
          .select('id')
          .where('domain', '=', domain)
          .executeTakeFirstOrThrow();
        await server.server.services.database.db
          .updateTable('custom_domain_certificates')
          .set({
            certificate: pair.cert,
            private_key: server.server.services.secretBox.seal(pair.key),
            fingerprint: x509.fingerprint256,
            not_before: new Date(x509.validFrom).toISOString(),
            not_after: new Date(x509.validTo).toISOString(),
          })
          .where('custom_domain_id', '=', id)
          .execute();
        return x509;
      };

      const domainId = async (domain: string) =>
        (
          await server.server.services.database.db
            .selectFrom('custom_domains')
            .select('id')
            .where('domain', '=', domain)
            .executeTakeFirstOrThrow()
        ).id;
      /** GET …/custom-domains/{id}/certificate, checked to carry no key material whatever it shows. */
      const described = async (id: string) => {
        const answer = await api({ url: `/api/v2/custom-domains/${id}/certificate` });
        assert.equal(answer.statusCode, 200, answer.body);
        assert.doesNotMatch(answer.body, /PRIVATE KEY|BEGIN|-----/);
        const row = await server.server.services.database.db
          .selectFrom('custom_domain_certificates')
          .select(['private_key', 'certificate'])
          .where('custom_domain_id', '=', id)
          .executeTakeFirst();
        if (row) {
          assert.ok(!answer.body.includes(row.private_key), 'the sealed key');
          assert.ok(!answer.body.includes(pemBodySample(server.server.services.secretBox.open(row.private_key))));
          assert.ok(!answer.body.includes(pemBodySample(row.certificate)), 'no PEM either');
        }
        return answer.json();
      };

      it('issues a dev-CA certificate when an svc-managed domain becomes ready and serves it by SNI', async () => {
        await readyDomain('login.tls.test', 'svc_managed_certs');
        // Issued on becoming ready, before any handshake asked for it.
        const row = await eventually('the certificate to be stored', () => certificateRow('login.tls.test'));
        assert.equal(row.source, 'dev-ca');

        const { certificate, authorized, authorizationError } = await handshake(port, 'login.tls.test', devCa.cert);
        assert.equal(authorized, true, authorizationError);
        assert.equal(certificate.subject, 'CN=login.tls.test');
        assert.equal(certificate.subjectAltName, 'DNS:login.tls.test');
        assert.equal(certificate.issuer, devCaX509.subject);
        assert.ok(certificate.checkIssued(devCaX509));
        assert.ok(certificate.verify(devCaX509.publicKey));
        assert.equal(certificate.fingerprint256, row.fingerprint);
        const days = (Date.parse(certificate.validTo) - Date.now()) / 86_400_000;
        assert.ok(days > 89 && days <= 90, `lifetime ${days} days`);

        // The key is sealed: no PEM in the row, and it opens to the certificate's key.
        assert.doesNotMatch(row.private_key, /PRIVATE KEY|^MII/);
        const key = server.server.services.secretBox.open(row.private_key);
        assert.ok(certificate.checkPrivateKey(createPrivateKey(key)));
        assert.ok(!row.private_key.includes(pemBodySample(key)));
      });

      it('describes the certificate a handshake is served (GET …/certificate), without its key; none and why otherwise', async () => {
        const id = await domainId('login.tls.test');
        const presented = (await handshake(port, 'login.tls.test', devCa.cert)).certificate;
        const row = (await certificateRow('login.tls.test'))!;
        assert.deepEqual(await described(id), {
          status: 'dev-ca',
          subject: 'CN=login.tls.test',
          subject_alt_names: ['DNS:login.tls.test'],
          issuer: devCaX509.subject.split('\n').join(', '),
          not_before: new Date(presented.validFrom).toISOString(),
          not_after: new Date(presented.validTo).toISOString(),
          fingerprint_sha256: presented.fingerprint256,
        });
        assert.equal(row.fingerprint, presented.fingerprint256);

        // Not ready: the default certificate, whatever is stored.
        const waiting = await api({
          method: 'POST',
          url: '/api/v2/custom-domains',
          payload: { domain: 'waiting.tls.test', type: 'svc_managed_certs' },
        });
        assert.equal(waiting.statusCode, 201, waiting.body);
        assert.deepEqual(await described(waiting.json().custom_domain_id), { status: 'none', reason: 'not_ready' });
        assert.equal((await handshake(port, 'waiting.tls.test', server.caPem)).certificate.subject, 'CN=localhost');

        // Another tenant's id is not found there, as its other operations are; no scope, no answer.
        const other = await server.server.addTenant('other-certs', 'other-certs.test');
        const elsewhere = await server.server.app.inject({
          url: `/api/v2/custom-domains/${id}/certificate`,
          headers: { host: 'other-certs.test', authorization: `Bearer ${other.token}` },
        });
        assert.equal(elsewhere.statusCode, 404);
        assert.deepEqual(elsewhere.json(), {
          statusCode: 404,
          error: 'Not Found',
          message: `The custom domain ${id} does not exist`,
          errorCode: 'inexistent_custom_domain',
        });
        const { token } = await server.server.clientWithScopes(['read:event_streams']);
        const refused = await server.server.request({ url: `/api/v2/custom-domains/${id}/certificate`, token });
        assert.equal(refused.statusCode, 403);
        assert.equal(refused.json().message, 'Insufficient scope, expected any of: read:custom_domains');
        const anonymous = await server.server.request({ url: `/api/v2/custom-domains/${id}/certificate`, token: null });
        assert.equal(anonymous.statusCode, 401);
      });

      it('answers the API through the custom domain over TLS, issuing tokens with its issuer', async () => {
        const token = await request(port, 'login.tls.test', devCa.cert, {
          method: 'POST',
          path: '/oauth/token',
          body: {
            grant_type: 'client_credentials',
            client_id: ADMIN_ID,
            client_secret: ADMIN_SECRET,
            audience: 'https://login.tls.test/api/v2/',
          },
        });
        assert.equal(token.status, 200, JSON.stringify(token.json));
        const claims = decodeJwt(token.json.access_token);
        assert.equal(claims.iss, 'https://login.tls.test/');
        assert.equal(claims.aud, 'https://login.tls.test/api/v2/');
        const listed = await request(port, 'login.tls.test', devCa.cert, {
          path: '/api/v2/custom-domains',
          token: token.json.access_token,
        });
        assert.equal(listed.status, 200);
        assert.ok(listed.json.some((d: { domain: string }) => d.domain === 'login.tls.test'));
      });

      it('gives unknown names and domains that are not ready the default certificate, issuing nothing', async () => {
        const created = await api({
          method: 'POST',
          url: '/api/v2/custom-domains',
          payload: { domain: 'pending.tls.test', type: 'svc_managed_certs' },
        });
        assert.equal(created.statusCode, 201);
        const defaultCa = new X509Certificate(server.caPem);
        for (const name of ['unknown.tls.test', 'pending.tls.test']) {
          const { certificate, authorized, authorizationError } = await handshake(port, name, server.caPem);
          assert.equal(certificate.subject, 'CN=localhost', name);
          assert.ok(certificate.checkIssued(defaultCa), name);
          assert.equal(authorized, false);
          assert.equal(authorizationError, 'ERR_TLS_CERT_ALTNAME_INVALID');
        }
        assert.equal(await certificateRow('pending.tls.test'), undefined);
        // The default certificate itself still works for the server's own name.
        const own = await handshake(port, 'localhost', server.caPem);
        assert.equal(own.authorized, true, own.authorizationError);
      });

      it('serves the stored certificate from another node and after a restart, issuing none', async () => {
        const stored = (await certificateRow('login.tls.test'))!;
        const otherPort = await startNode();
        const { certificate, authorized } = await handshake(otherPort, 'login.tls.test', devCa.cert);
        assert.equal(authorized, true);
        assert.equal(certificate.fingerprint256, stored.fingerprint);
        assert.deepEqual(await certificateRow('login.tls.test'), stored);
      });

      it('renews a certificate nearing its expiry in the background, serving the current one meanwhile', async () => {
        // 15 minutes left of a 75-minute lifetime (an hour is backdated): past two thirds of it.
        const nearing = await plant(
          'login.tls.test',
          issueServerCertificate(devCa, ['login.tls.test'], { days: 15 / 1440 }),
        );
        const otherPort = await startNode();
        const first = await handshake(otherPort, 'login.tls.test', devCa.cert);
        assert.equal(first.certificate.fingerprint256, nearing.fingerprint256);
        assert.equal(first.authorized, true);

        const renewed = await eventually('the renewed certificate', async () => {
          const row = await certificateRow('login.tls.test');
          return row && row.fingerprint !== nearing.fingerprint256 ? row : undefined;
        });
        assert.ok(Date.parse(renewed.not_after) - Date.now() > 89 * 86_400_000);
        const next = await handshake(otherPort, 'login.tls.test', devCa.cert);
        assert.equal(next.certificate.fingerprint256, renewed.fingerprint);
        assert.equal(next.authorized, true);
      });

      it('replaces an expired certificate before answering the handshake', async () => {
        const expired = await plant(
          'login.tls.test',
          issueServerCertificate(devCa, ['login.tls.test'], { days: 1 / 86_400_000 }),
        );
        while (Date.now() <= Date.parse(expired.validTo)) await sleep(5);
        const otherPort = await startNode();
        const { certificate, authorized, authorizationError } = await handshake(
          otherPort,
          'login.tls.test',
          devCa.cert,
        );
        assert.equal(authorized, true, authorizationError);
        assert.notEqual(certificate.fingerprint256, expired.fingerprint256);
        assert.equal(certificate.fingerprint256, (await certificateRow('login.tls.test'))!.fingerprint);
      });

      it('issues the certificate of a domain a background re-check made ready', async () => {
        const created = await api({
          method: 'POST',
          url: '/api/v2/custom-domains',
          payload: { domain: 'later.tls.test', type: 'svc_managed_certs' },
        });
        assert.equal(created.statusCode, 201);
        dns.setCname('later.tls.test', created.json().verification.methods[0].record);
        const row = await eventually('the certificate to be stored', () => certificateRow('later.tls.test'));
        assert.equal(
          (await api({ url: `/api/v2/custom-domains/${created.json().custom_domain_id}` })).json().status,
          'ready',
        );
        const { certificate, authorized, authorizationError } = await handshake(port, 'later.tls.test', devCa.cert);
        assert.equal(authorized, true, authorizationError);
        assert.equal(certificate.fingerprint256, row.fingerprint);
      });

      it('deletes the certificate with its domain; the name then gets the default certificate', async () => {
        const id = await readyDomain('gone.tls.test', 'svc_managed_certs');
        await eventually('the certificate to be stored', () => certificateRow('gone.tls.test'));
        assert.equal((await handshake(port, 'gone.tls.test', devCa.cert)).authorized, true);
        assert.equal((await api({ method: 'DELETE', url: `/api/v2/custom-domains/${id}` })).statusCode, 204);
        const rows = await server.server.services.database.db
          .selectFrom('custom_domain_certificates')
          .select('custom_domain_id')
          .where('custom_domain_id', '=', id)
          .execute();
        assert.deepEqual(rows, []);
        await eventually('the default certificate', async () => {
          const { certificate } = await handshake(port, 'gone.tls.test', server.caPem);
          return certificate.subject === 'CN=localhost' ? true : undefined;
        });
      });

      describe('uploaded certificates of self-managed domains', () => {
        let operatorCa: PemPair;
        let cliEnv: Record<string, string>;
        const cli = (...args: string[]) => runCli(cliEnv, args);
        const files = (name: string, chain: string, key: string) => {
          const cert = path.join(workDir, `${name}.pem`);
          const keyFile = path.join(workDir, `${name}-key.pem`);
          fs.writeFileSync(cert, chain);
          fs.writeFileSync(keyFile, key);
          return ['--cert', cert, '--key', keyFile];
        };
        const upload = (domain: string, fileArgs: string[]) =>
          cli('custom-domains', 'certificate', '--tenant', server.server.tenant.id, '--domain', domain, ...fileArgs);
        const refused = async (domain: string, fileArgs: string[], message: RegExp) => {
          const run = await upload(domain, fileArgs);
          assert.notEqual(run.code, 0);
          assert.equal(run.stdout, '');
          assert.match(run.stderr, /^tenantry: custom-domains certificate: [^\n]+; nothing was stored\n$/);
          assert.match(run.stderr, message);
        };

        before(async () => {
          operatorCa = createCertificateAuthority({ commonName: 'Operator CA' });
          // The CLI runs as the operator would: same data directory and database, no certificate source of its own.
          cliEnv = { ...nodeEnv, PATH: process.env.PATH ?? '', CUSTOM_DOMAIN_CERT_SOURCE: 'none' };
          await readyDomain('secure.self.test', 'self_managed_certs');
        });

        it('refuses a key that does not match, a certificate for another name, and svc-managed domains; storing nothing', async () => {
          const leaf = issueServerCertificate(operatorCa, ['secure.self.test']);
          const stranger = issueServerCertificate(operatorCa, ['secure.self.test']);
          await refused(
            'secure.self.test',
            files('mismatch', leaf.cert, stranger.key),
            /the private key does not match the certificate/,
          );
          const otherName = issueServerCertificate(operatorCa, ['elsewhere.self.test']);
          await refused(
            'secure.self.test',
            files('other-name', otherName.cert, otherName.key),
            /the certificate does not cover secure\.self\.test \(it names DNS:elsewhere\.self\.test\)/,
          );
          const forLogin = issueServerCertificate(operatorCa, ['login.tls.test']);
          await refused(
            'login.tls.test',
            files('svc', forLogin.cert, forLogin.key),
            /login\.tls\.test is an svc_managed_certs domain/,
          );
          await refused(
            'missing.self.test',
            files('missing', leaf.cert, leaf.key),
            /has no custom domain missing\.self\.test/,
          );
          assert.equal(await certificateRow('secure.self.test'), undefined);
          // Before the upload the domain has the default certificate.
          const before = await handshake(port, 'secure.self.test', server.caPem);
          assert.equal(before.certificate.subject, 'CN=localhost');
          assert.deepEqual(await described(await domainId('secure.self.test')), {
            status: 'none',
            reason: 'not_uploaded',
          });
        });

        it('stores an uploaded chain with its key sealed, and the server presents it by SNI', async () => {
          const leaf = issueServerCertificate(operatorCa, ['secure.self.test']);
          const leafX509 = new X509Certificate(leaf.cert);
          const run = await upload('secure.self.test', files('good', `${leaf.cert}${operatorCa.cert}`, leaf.key));
          assert.equal(run.code, 0, run.stderr);
          assert.match(
            run.stdout,
            new RegExp(
              `^Stored the certificate of secure\\.self\\.test \\(tenant ${server.server.tenant.id}\\), valid until .+, SHA-256 ${leafX509.fingerprint256}\\.\\n`,
            ),
          );

          const row = (await certificateRow('secure.self.test'))!;
          assert.equal(row.source, 'upload');
          assert.equal(row.fingerprint, leafX509.fingerprint256);
          assert.ok(!row.private_key.includes(pemBodySample(leaf.key)));
          assert.doesNotMatch(row.private_key, /PRIVATE KEY/);
          if (kind === 'sqlite') {
            const { dataDir } = server.server.database;
            for (const file of fs.readdirSync(dataDir).filter((f) => f.startsWith('tenantry.sqlite'))) {
              assert.ok(
                !fs.readFileSync(path.join(dataDir, file)).includes(pemBodySample(leaf.key)),
                `${file} holds the key in plaintext`,
              );
            }
          }

          // Served once the refresh interval has passed: the upload came from another process.
          const served = await eventually('the uploaded certificate', async () => {
            const result = await handshake(port, 'secure.self.test', operatorCa.cert);
            return result.certificate.fingerprint256 === leafX509.fingerprint256 ? result : undefined;
          });
          assert.equal(served.authorized, true, served.authorizationError);
          assert.equal(served.certificate.issuer, new X509Certificate(operatorCa.cert).subject);

          // A replacement reaches the running server the same way.
          const replacement = issueServerCertificate(operatorCa, ['secure.self.test', 'www.secure.self.test']);
          const replaced = await upload('secure.self.test', files('replacement', replacement.cert, replacement.key));
          assert.equal(replaced.code, 0, replaced.stderr);
          const presented = await eventually('the replacement certificate', async () => {
            const result = await handshake(port, 'secure.self.test', operatorCa.cert);
            return result.certificate.fingerprint256 === new X509Certificate(replacement.cert).fingerprint256
              ? result
              : undefined;
          });

          // The API describes the uploaded certificate the handshake presents, and none of its key.
          const body = await described(await domainId('secure.self.test'));
          assert.deepEqual(body, {
            status: 'upload',
            subject: 'CN=secure.self.test',
            subject_alt_names: ['DNS:secure.self.test', 'DNS:www.secure.self.test'],
            issuer: new X509Certificate(operatorCa.cert).subject.split('\n').join(', '),
            not_before: new Date(presented.certificate.validFrom).toISOString(),
            not_after: new Date(presented.certificate.validTo).toISOString(),
            fingerprint_sha256: presented.certificate.fingerprint256,
          });
          assert.ok(!JSON.stringify(body).includes(pemBodySample(replacement.key)));
        });

        it('accepts requests that reach its own TLS under the uploaded name without a cname-api-key; others still need the key', async () => {
          // The upload above made the server terminate TLS for secure.self.test itself: no proxy, so no key.
          const grant = {
            grant_type: 'client_credentials',
            client_id: ADMIN_ID,
            client_secret: ADMIN_SECRET,
            audience: 'https://secure.self.test/api/v2/',
          };
          const token = await eventually('the domain served without a key', async () => {
            const answer = await request(port, 'secure.self.test', operatorCa.cert, {
              method: 'POST',
              path: '/oauth/token',
              body: grant,
            });
            return answer.status === 200 ? answer : undefined;
          });
          assert.equal(decodeJwt(token.json.access_token).iss, 'https://secure.self.test/');
          // The same Host under another TLS name (a client going round the certificate) still needs the proxy's key.
          const sideways = await new Promise<{ status: number; json: any }>((resolve, reject) => {
            const req = https.request(
              {
                host: '127.0.0.1',
                port,
                servername: 'localhost',
                ca: [server.caPem],
                agent: false,
                method: 'GET',
                path: '/.well-known/jwks.json',
                headers: { host: 'secure.self.test' },
              },
              (res) => {
                let text = '';
                res.setEncoding('utf8');
                res.on('data', (chunk: string) => (text += chunk));
                res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
              },
            );
            req.on('error', reject);
            req.end();
          });
          assert.equal(sideways.status, 403);
          assert.equal(sideways.json.errorCode, 'invalid_cname_api_key');
        });
      });
    });
  }),
);

describe('certificate configuration and upload checks', () => {
  it('refuses an unknown certificate source and half of a CA file pair', () => {
    assert.throws(
      () => loadConfig({ CUSTOM_DOMAIN_CERT_SOURCE: 'acme' }),
      (error: Error) =>
        error instanceof ConfigError &&
        error.message === 'CUSTOM_DOMAIN_CERT_SOURCE must be dev-ca or none, got "acme"',
    );
    assert.throws(
      () => loadConfig({ DEV_CA_CERT_FILE: '/tmp/ca.pem' }),
      /DEV_CA_CERT_FILE and DEV_CA_KEY_FILE must be set together/,
    );
    const config = loadConfig({ DATA_DIR: '/srv/tenantry' });
    assert.equal(config.customDomainCertSource, 'none');
    assert.equal(config.devCaCertFile, '/srv/tenantry/tls/ca.pem');
    assert.equal(config.devCaKeyFile, '/srv/tenantry/tls/ca-key.pem');
  });

  it('dev-ca without a CA stops the start with what to do; with the CA `dev-cert` wrote, it starts', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-cd-ca-'));
    try {
      const env = {
        DATA_DIR: dataDir,
        CUSTOM_DOMAIN_CERT_SOURCE: 'dev-ca',
        LOG_LEVEL: 'silent',
        DELIVERY_WORKER: 'false',
      };
      await assert.rejects(
        createServices(loadConfig(env)),
        (error: Error) =>
          error instanceof ConfigError &&
          /needs a development CA at .*\/tls\/ca\.pem .*run `tenantry dev-cert`/.test(error.message),
      );
      // Refused before the database was opened.
      assert.equal(fs.existsSync(path.join(dataDir, 'tenantry.sqlite')), false);
      writeDevelopmentCertificates(path.join(dataDir, 'tls'));
      const services = await createServices(loadConfig(env));
      await services.close();
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('checks an uploaded chain: a CA first, a chain out of order, an expired certificate, an encrypted key are refused', async () => {
    const ca = createCertificateAuthority({ commonName: 'Chain CA' });
    const leaf = issueServerCertificate(ca, ['a.example.test']);
    assert.throws(
      () => checkUploadedCertificate('a.example.test', 'not a certificate', leaf.key),
      /holds no PEM certificate/,
    );
    assert.throws(
      () => checkUploadedCertificate('a.example.test', `${ca.cert}${leaf.cert}`, ca.key),
      /the first certificate is a CA certificate/,
    );
    const other = createCertificateAuthority({ commonName: 'Unrelated CA' });
    assert.throws(
      () => checkUploadedCertificate('a.example.test', `${leaf.cert}${other.cert}`, leaf.key),
      /certificate 2 of the chain did not issue certificate 1/,
    );
    const encrypted = createPrivateKey(leaf.key).export({
      type: 'pkcs8',
      format: 'pem',
      cipher: 'aes-256-cbc',
      passphrase: 'secret',
    }) as string;
    assert.throws(() => checkUploadedCertificate('a.example.test', leaf.cert, encrypted), /passphrase-protected/);
    assert.throws(() => checkUploadedCertificate('a.example.test', leaf.cert, 'nope'), /holds no PEM private key/);
    const lapsed = issueServerCertificate(ca, ['a.example.test'], { days: 1 / 86_400_000 });
    while (Date.now() <= Date.parse(new X509Certificate(lapsed.cert).validTo)) await sleep(5);
    assert.throws(
      () => checkUploadedCertificate('a.example.test', lapsed.cert, lapsed.key),
      /the certificate expired on \d{4}-/,
    );
    const checked = checkUploadedCertificate('A.example.test', `${leaf.cert}\n${ca.cert}`, leaf.key);
    assert.equal(checked.fingerprint, new X509Certificate(leaf.cert).fingerprint256);
    assert.equal(checked.certificate.match(/BEGIN CERTIFICATE/g)?.length, 2);
  });
});
