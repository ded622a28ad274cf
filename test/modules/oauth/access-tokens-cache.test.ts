import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { SignJWT, decodeJwt, decodeProtectedHeader } from 'jose';
import { buildApp } from '../../../src/app.ts';
import { createServices, type Services } from '../../../src/services.ts';
import { runCli } from '../../helpers/cli.ts';
import { eachDatabase } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { ADMIN_ID, ADMIN_SECRET, startTestServer, type TestServer } from '../../helpers/server.ts';

const EDGE = 'edge.cache.test';
/** The cached host and domain lookups of another node live 5 s; a refusal must come within this. */
const OTHER_NODE_DEADLINE_MS = 7_000;
const BAD_SIGNATURE = 'Invalid signature received for JSON Web Token validation.';
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

describe('verified-token cache', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`verified-token cache (${kind})`, () => {
      let server: TestServer;
      let dns: TestDnsServer;
      /** A second node on the same database, with caches of its own. */
      let other: { services: Services; app: FastifyInstance };
      before(async () => {
        dns = await startDnsServer();
        server = await startTestServer(kind, { DNS_SERVERS: dns.address, CUSTOM_DOMAIN_EDGE_DOMAIN: EDGE });
        const services = await createServices(server.services.config);
        other = { services, app: await buildApp(services) };
      });
      after(async () => {
        await other.app.close();
        await other.services.close();
        await server.close();
        await dns.close();
      });

      const call = (app: FastifyInstance, token: string, host = server.domain) =>
        app.inject({
          url: '/api/v2/users-by-email?email=someone%40example.com',
          headers: { host, authorization: `Bearer ${token}` },
        });
      type Node = (token: string, host?: string) => ReturnType<typeof call>;
      const onThisNode: Node = (token, host) => call(server.app, token, host);
      const onOtherNode: Node = (token, host) => call(other.app, token, host);

      const refusal = (message: string) => ({
        statusCode: 401,
        error: 'Unauthorized',
        message,
        attributes: { error: message },
      });

      /** Polls the node until it refuses the token; fails when it still accepts it at the deadline. */
      async function refusedWithin(node: Node, token: string, message: string, host?: string) {
        const deadline = Date.now() + OTHER_NODE_DEADLINE_MS;
        for (;;) {
          const response = await node(token, host);
          if (response.statusCode !== 200) {
            assert.deepEqual(response.json(), refusal(message));
            return;
          }
          if (Date.now() > deadline) assert.fail(`the token was still accepted ${OTHER_NODE_DEADLINE_MS} ms later`);
          await sleep(100);
        }
      }

      /** A domain made ready on this node reaches the other node's cached domains within seconds too. */
      async function acceptedWithin(node: Node, token: string) {
        const deadline = Date.now() + OTHER_NODE_DEADLINE_MS;
        while ((await node(token)).statusCode !== 200) {
          if (Date.now() > deadline) assert.fail(`the token was still refused ${OTHER_NODE_DEADLINE_MS} ms later`);
          await sleep(100);
        }
      }

      async function readyDomain(domain: string): Promise<string> {
        const payload = { domain, type: 'svc_managed_certs' };
        const created = await server.request({ method: 'POST', url: '/api/v2/custom-domains', payload });
        assert.equal(created.statusCode, 201, created.body);
        const cd = created.json() as { custom_domain_id: string; verification: { methods: Array<{ record: string }> } };
        dns.setCname(domain, cd.verification.methods[0]!.record);
        const verified = await server.request({
          method: 'POST',
          url: `/api/v2/custom-domains/${cd.custom_domain_id}/verify`,
        });
        assert.equal(verified.json().status, 'ready', verified.body);
        return cd.custom_domain_id;
      }
      const deleteDomain = async (id: string) =>
        assert.equal((await server.request({ method: 'DELETE', url: `/api/v2/custom-domains/${id}` })).statusCode, 204);

      it('refuses a cached token whose issuer is a deleted custom domain: at once on this node, within seconds on another', async () => {
        const id = await readyDomain('login.cache.test');
        const token = await server.tokenFor(
          'login.cache.test',
          ADMIN_ID,
          ADMIN_SECRET,
          `https://${server.domain}/api/v2/`,
        );
        assert.equal(decodeJwt(token).iss, 'https://login.cache.test/');
        assert.equal((await onThisNode(token)).statusCode, 200);
        await acceptedWithin(onOtherNode, token);

        await deleteDomain(id);
        const refused = await onThisNode(token);
        assert.deepEqual(refused.json(), refusal('Bad issuer: https://login.cache.test/'));
        await refusedWithin(onOtherNode, token, 'Bad issuer: https://login.cache.test/');
        assert.equal(
          (await onThisNode(server.adminToken)).statusCode,
          200,
          'tokens of the canonical domain are unaffected',
        );
      });

      it('does not keep the domains a request read while the deletion was under way', async () => {
        const id = await readyDomain('race.cache.test');
        const token = await server.tokenFor(
          'race.cache.test',
          ADMIN_ID,
          ADMIN_SECRET,
          `https://${server.domain}/api/v2/`,
        );

        // The token's first use loads the tenant's domains afresh: it reads the custom domains, then waits here while one is deleted.
        let entered!: () => void;
        const reading = new Promise<void>((resolve) => (entered = resolve));
        let release!: () => void;
        const gate = new Promise<void>((resolve) => (release = resolve));
        let holding = true;
        const hosts = server.services.tenants['customHosts'];
        const readyDomains = hosts.readyDomains.bind(hosts);
        hosts.readyDomains = async (tenantId) => {
          const found = await readyDomains(tenantId);
          if (!holding) return found;
          holding = false;
          entered();
          await gate;
          return found;
        };
        server.services.tenants.forget();
        const during = onThisNode(token);
        await reading;
        await server.services.customDomains.delete(server.tenant.id, id);
        release();
        assert.equal((await during).statusCode, 200, 'it read the domains before the deletion');
        assert.deepEqual((await onThisNode(token)).json(), refusal('Bad issuer: https://race.cache.test/'));
      });

      it('refuses a cached token whose audience is the management API of a deleted custom domain', async () => {
        const id = await readyDomain('api.cache.test');
        const token = await server.tokenFor(server.domain, ADMIN_ID, ADMIN_SECRET, 'https://api.cache.test/api/v2/');
        assert.equal(decodeJwt(token).iss, `https://${server.domain}/`);
        assert.equal((await onThisNode(token)).statusCode, 200);
        await acceptedWithin(onOtherNode, token);

        await deleteDomain(id);
        assert.deepEqual((await onThisNode(token)).json(), refusal('Bad audience: https://api.cache.test/api/v2/'));
        await refusedWithin(onOtherNode, token, 'Bad audience: https://api.cache.test/api/v2/');
      });

      it('refuses a cached token once its key is revoked, on every node, through the service and the CLI', async () => {
        const keys = await server.addTenant('keys-tenant', 'keys.cache.test');
        const host = 'keys.cache.test';
        const firstKid = decodeProtectedHeader(keys.token).kid!;
        assert.equal((await onThisNode(keys.token, host)).statusCode, 200);
        assert.equal((await onOtherNode(keys.token, host)).statusCode, 200);

        // A rotation keeps the previous key verifying; its cached tokens stay accepted.
        await server.services.signingKeys.rotate(keys.tenant.id);
        const client = await server.services.clients.create(keys.tenant.id, { name: 'second', scopes: ['read:users'] });
        const second = await server.tokenFor(host, client.clientId, client.clientSecret);
        const secondKid = decodeProtectedHeader(second).kid!;
        assert.notEqual(secondKid, firstKid);
        assert.equal((await onThisNode(keys.token, host)).statusCode, 200);
        assert.equal((await onOtherNode(keys.token, host)).statusCode, 200);

        // Another process revokes the first key: both nodes notice within their cache's few seconds.
        const env: Record<string, string> = {
          PATH: process.env.PATH ?? '',
          DATA_DIR: server.database.dataDir,
          LOG_LEVEL: 'silent',
          ...(server.database.databaseUrl ? { DATABASE_URL: server.database.databaseUrl } : {}),
        };
        const run = await runCli(env, ['keys', 'revoke', '--tenant', keys.tenant.id, '--kid', firstKid]);
        assert.equal(run.code, 0, run.stderr);
        await refusedWithin(onThisNode, keys.token, BAD_SIGNATURE, host);
        await refusedWithin(onOtherNode, keys.token, BAD_SIGNATURE, host);

        // This node revokes the second key: refused here at once, on the other node within seconds.
        assert.equal((await onThisNode(second, host)).statusCode, 200);
        assert.equal((await onOtherNode(second, host)).statusCode, 200);
        await server.services.signingKeys.rotate(keys.tenant.id);
        assert.equal(await server.services.signingKeys.revoke(keys.tenant.id, secondKid), true);
        assert.deepEqual((await onThisNode(second, host)).json(), refusal(BAD_SIGNATURE));
        await refusedWithin(onOtherNode, second, BAD_SIGNATURE, host);
      });

      it('refuses a signature in non-canonical base64url, before and after the canonical token is cached', async () => {
        const token = await server.tokenFor(server.domain, ADMIN_ID, ADMIN_SECRET);
        const dot = token.lastIndexOf('.');
        const signingInput = token.slice(0, dot);
        const signature = token.slice(dot + 1);
        assert.equal(
          signature.length,
          342,
          'a 2048-bit RS256 signature: the last character carries 2 bits and 4 unused ones',
        );
        assert.match(signature, /[-_]/, 'the signature has characters that standard base64 spells differently');
        const lastBits = BASE64URL.indexOf(signature.at(-1)!);
        const variants = {
          'unused low bits set': `${signature.slice(0, -1)}${BASE64URL[lastBits ^ 1]}`,
          'one = of padding': `${signature}=`,
          'two = of padding': `${signature}==`,
          'standard base64 alphabet': signature.replaceAll('-', '+').replaceAll('_', '/'),
          'a character outside the alphabet': `${signature.slice(0, 100)}*${signature.slice(100)}`,
        };
        for (const [what, variant] of Object.entries(variants)) {
          assert.ok(
            Buffer.from(variant, 'base64url').equals(Buffer.from(signature, 'base64url')),
            `${what}: decodes to the same bytes`,
          );
        }
        const refuseAll = async (when: string) => {
          for (const [what, variant] of Object.entries(variants)) {
            const response = await onThisNode(`${signingInput}.${variant}`);
            assert.equal(response.statusCode, 401, `${what}, ${when}: ${response.body}`);
            assert.deepEqual(response.json(), refusal(BAD_SIGNATURE), `${what}, ${when}`);
          }
        };
        await refuseAll('before the token is cached');
        assert.equal((await onThisNode(token)).statusCode, 200);
        assert.equal((await onThisNode(token)).statusCode, 200, 'served from the cache');
        await refuseAll('while the token is cached');
        assert.equal((await onThisNode(token)).statusCode, 200);
      });

      it('refuses a cached token once it expires, and never caches one not yet valid', async () => {
        const key = await server.services.signingKeys.current(server.tenant.id);
        const signed = (claims: Record<string, number>) =>
          new SignJWT({
            iss: `https://${server.domain}/`,
            sub: `${ADMIN_ID}@clients`,
            aud: `https://${server.domain}/api/v2/`,
            scope: 'read:users',
            azp: ADMIN_ID,
            ...claims,
          })
            .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: key.kid })
            .sign(key.privateKey);
        const now = Math.floor(Date.now() / 1000);
        const shortLived = await signed({ iat: now, exp: now + 2 });
        assert.equal((await onThisNode(shortLived)).statusCode, 200);
        assert.equal((await onThisNode(shortLived)).statusCode, 200, 'served from the cache');
        await refusedWithin(onThisNode, shortLived, 'Expired token received for JSON Web Token validation');

        const early = await signed({ iat: now, nbf: now + 3600, exp: now + 7200 });
        for (let i = 0; i < 2; i++) {
          assert.deepEqual(
            (await onThisNode(early)).json(),
            refusal('Token not yet valid (nbf) received for JSON Web Token validation'),
          );
        }
      });
    });
  }),
);
