import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, it } from 'node:test';
import { auth } from 'express-oauth2-jwt-bearer';
import { decodeJwt, generateKeyPair, SignJWT } from 'jose';
import * as client from 'openid-client';
import { ALL_SCOPES } from '../../../src/modules/oauth/scopes.ts';
import { databaseKinds } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';
import { ADMIN_ID, ADMIN_SECRET } from '../../helpers/server.ts';

const EDGE = 'edge.discovery.test';
const ADDRESSES = ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'];

/** The metadata a domain's issuer publishes: every value true of this server. */
const metadataOf = (domain: string) => ({
  issuer: `https://${domain}/`,
  jwks_uri: `https://${domain}/.well-known/jwks.json`,
  token_endpoint: `https://${domain}/oauth/token`,
  grant_types_supported: ['client_credentials'],
  token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
  response_types_supported: [],
  subject_types_supported: ['public'],
  id_token_signing_alg_values_supported: ['RS256'],
  scopes_supported: ALL_SCOPES,
});

/** express-oauth2-jwt-bearer's middleware run on a request carrying `token`: its verdict. */
async function bearerVerdict(
  middleware: ReturnType<typeof auth>,
  token: string,
): Promise<{ ok: true; payload: Record<string, unknown> } | { ok: false; status: number; message: string }> {
  const headers: Record<string, string> = { host: 'api.example', authorization: `Bearer ${token}` };
  const request = {
    headers,
    query: {},
    body: undefined,
    method: 'GET',
    protocol: 'https',
    url: '/things',
    originalUrl: '/things',
    socket: {},
    get: (name: string) => headers[name.toLowerCase()],
    is: () => false,
  } as unknown as Parameters<ReturnType<typeof auth>>[0] & { auth?: { payload: Record<string, unknown> } };
  const error = await new Promise<unknown>((resolve) =>
    middleware(request, {} as Parameters<ReturnType<typeof auth>>[1], resolve),
  );
  if (error === undefined) return { ok: true, payload: request.auth!.payload };
  const { status, message } = error as { status: number; message: string };
  return { ok: false, status, message };
}

for (const kind of databaseKinds()) {
  describe(`authorization server metadata (${kind})`, () => {
    let dns: TestDnsServer;
    let served: HttpsTestServer;
    let issuer: URL;
    before(async () => {
      dns = await startDnsServer();
      served = await startHttpsTestServer(kind, { DNS_SERVERS: dns.address, CUSTOM_DOMAIN_EDGE_DOMAIN: EDGE });
      issuer = new URL(`https://${served.domain}/`);
      // Two tenants: a server holding one answers on any host (with that tenant's canonical issuer).
      await served.server.addTenant('second-tenant', 'second.discovery.test');
    });
    after(async () => {
      await served.close();
      await dns.close();
    });
    const get = (url: string, host: string) => served.server.app.inject({ url, headers: { host } });

    it('serves the same document at both addresses, without a token, naming the domain asked', async () => {
      for (const url of ADDRESSES) {
        const response = await get(url, served.domain);
        assert.equal(response.statusCode, 200, response.body);
        assert.match(String(response.headers['content-type']), /^application\/json/);
        assert.deepEqual(response.json(), metadataOf(served.domain));
      }
      assert.deepEqual((await get(ADDRESSES[1]!, 'second.discovery.test')).json(), metadataOf('second.discovery.test'));
      const jwks = await get('/.well-known/jwks.json', served.domain);
      assert.equal(jwks.statusCode, 200);
      assert.equal((jwks.json() as { keys: unknown[] }).keys.length > 0, true);
    });

    it("serves a ready custom domain's issuer on that domain, and nothing on a pending, deleted or unknown one", async () => {
      const created = await served.server.request({
        method: 'POST',
        url: '/api/v2/custom-domains',
        payload: { domain: 'login.discovery.test', type: 'svc_managed_certs' },
        headers: { host: served.domain },
      });
      assert.equal(created.statusCode, 201, created.body);
      const cd = created.json() as { custom_domain_id: string; verification: { methods: Array<{ record: string }> } };
      for (const url of ADDRESSES) assert.equal((await get(url, 'login.discovery.test')).statusCode, 404);

      dns.setCname('login.discovery.test', cd.verification.methods[0]!.record);
      const verified = await served.server.request({
        method: 'POST',
        url: `/api/v2/custom-domains/${cd.custom_domain_id}/verify`,
        headers: { host: served.domain },
      });
      assert.equal(verified.json().status, 'ready', verified.body);
      for (const url of ADDRESSES) {
        assert.deepEqual((await get(url, 'login.discovery.test')).json(), metadataOf('login.discovery.test'));
      }
      // The canonical domain keeps its own issuer.
      assert.equal((await get(ADDRESSES[0]!, served.domain)).json().issuer, issuer.href);

      const deleted = await served.server.request({
        method: 'DELETE',
        url: `/api/v2/custom-domains/${cd.custom_domain_id}`,
        headers: { host: served.domain },
      });
      assert.equal(deleted.statusCode, 204);
      for (const host of ['login.discovery.test', 'nobody.discovery.test']) {
        for (const url of ADDRESSES) {
          const response = await get(url, host);
          assert.equal(response.statusCode, 404, `${url} on ${host}`);
          assert.equal(response.body.includes('jwks'), false);
        }
      }
    });

    it("lets openid-client discover the issuer and get a token with either of the document's client authentications", async () => {
      for (const algorithm of ['oidc', 'oauth2'] as const) {
        for (const authentication of [client.ClientSecretPost(ADMIN_SECRET), client.ClientSecretBasic(ADMIN_SECRET)]) {
          const config = await client.discovery(issuer, ADMIN_ID, undefined, authentication, { algorithm });
          assert.equal(config.serverMetadata().issuer, issuer.href);
          const granted = await client.clientCredentialsGrant(config, { audience: `${issuer.href}api/v2/` });
          assert.equal(granted.token_type, 'bearer');
          assert.equal(decodeJwt(granted.access_token).iss, issuer.href);
          const response = await fetch(`${issuer.href}api/v2/users-by-email?email=nobody%40example.com`, {
            headers: { authorization: `Bearer ${granted.access_token}` },
          });
          assert.equal(response.status, 200, `${algorithm}: ${await response.text()}`);
        }
      }
      // A wrong secret is refused by the token endpoint the document named.
      const config = await client.discovery(issuer, ADMIN_ID, 'not-the-secret');
      await assert.rejects(client.clientCredentialsGrant(config, { audience: `${issuer.href}api/v2/` }), (error) => {
        assert.equal((error as { error?: string }).error, 'access_denied');
        return true;
      });
    });

    it('lets express-oauth2-jwt-bearer, given only issuerBaseURL, accept a real token and refuse forged ones', async () => {
      const middleware = auth({
        issuerBaseURL: issuer.href,
        audience: `${issuer.href}api/v2/`,
        agent: new https.Agent({ ca: served.caPem }),
      });
      const real = await served.server.tokenFor(served.domain, ADMIN_ID, ADMIN_SECRET);
      const accepted = await bearerVerdict(middleware, real);
      assert.equal(accepted.ok, true, JSON.stringify(accepted));
      assert.equal((accepted as { payload: Record<string, unknown> }).payload.sub, `${ADMIN_ID}@clients`);

      // The same claims signed by a key of the forger's own, under the tenant's kid.
      const claims = decodeJwt(real);
      const header = JSON.parse(Buffer.from(real.split('.')[0]!, 'base64url').toString()) as { kid: string };
      const { privateKey } = await generateKeyPair('RS256');
      const forged = await new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: header.kid })
        .sign(privateKey);
      // And a token signed by no key at all, and the real one with a scope added.
      const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${real.split('.')[1]}.`;
      const tampered = `${real.split('.')[0]}.${Buffer.from(JSON.stringify({ ...claims, scope: 'delete:users' })).toString('base64url')}.${real.split('.')[2]}`;
      for (const [what, token] of Object.entries({ forged, unsigned, tampered })) {
        const verdict = await bearerVerdict(middleware, token);
        assert.equal(verdict.ok, false, what);
        assert.equal((verdict as { status: number }).status, 401, what);
      }
    });
  });
}
