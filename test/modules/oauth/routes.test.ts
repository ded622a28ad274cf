import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { databaseKinds } from '../../helpers/databases.ts';
import { ADMIN_ID, ADMIN_SECRET, startTestServer, type TestServer } from '../../helpers/server.ts';

const decode = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;

for (const kind of databaseKinds()) {
  describe(`POST /oauth/token and JWKS (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind);
    });
    after(() => server.close());

    const token = (payload: Record<string, unknown> | string, headers: Record<string, string> = {}) =>
      server.app.inject({ method: 'POST', url: '/oauth/token', headers: { host: server.domain, ...headers }, payload });

    it('grants a client-credentials token from a form body with the claims of the original', async () => {
      const response = await token(
        new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: ADMIN_ID,
          client_secret: ADMIN_SECRET,
          audience: `https://${server.domain}/api/v2/`,
        }).toString(),
        { 'content-type': 'application/x-www-form-urlencoded' },
      );
      assert.equal(response.statusCode, 200, response.body);
      const body = response.json();
      assert.equal(body.token_type, 'Bearer');
      assert.equal(body.expires_in, 86400);
      assert.ok(body.scope.split(' ').includes('read:users'));
      const header = decodeProtectedHeader(body.access_token);
      assert.equal(header.alg, 'RS256');
      assert.equal(header.typ, 'JWT');
      assert.equal(typeof header.kid, 'string');
      const claims = decode(body.access_token);
      assert.equal(claims.iss, `https://${server.domain}/`);
      assert.equal(claims.sub, `${ADMIN_ID}@clients`);
      assert.equal(claims.aud, `https://${server.domain}/api/v2/`);
      assert.equal(claims.gty, 'client-credentials');
      assert.equal(claims.azp, ADMIN_ID);
      assert.equal(claims.scope, body.scope);
      assert.equal((claims.exp as number) - (claims.iat as number), 86400);
    });

    it('writes the body and the claims exactly as JSON.stringify would, escaping what needs it', async () => {
      // A chosen client id may hold characters JSON escapes; the token's payload is written by hand.
      const clientId = 'quote"back\\slash\u00e9\u2028';
      const created = await server.services.clients.create(server.tenant.id, {
        name: 'escaped',
        scopes: ['read:users', 'update:users'],
        clientId,
        clientSecret: 'a-secret-with-enough-entropy-0123456789abcdef',
      });
      const response = await token({
        grant_type: 'client_credentials',
        client_id: created.clientId,
        client_secret: 'a-secret-with-enough-entropy-0123456789abcdef',
        audience: `https://${server.domain}/api/v2/`,
      });
      assert.equal(response.statusCode, 200, response.body);
      assert.match(String(response.headers['content-type']), /^application\/json; charset=utf-8$/);
      const body = response.json();
      assert.equal(response.body, JSON.stringify(body));
      assert.deepEqual(Object.keys(body), ['access_token', 'scope', 'expires_in', 'token_type']);
      assert.equal(body.scope, 'read:users update:users');
      const payloadText = Buffer.from(body.access_token.split('.')[1], 'base64url').toString();
      const claims = JSON.parse(payloadText) as Record<string, unknown>;
      assert.equal(payloadText, JSON.stringify(claims));
      assert.deepEqual(Object.keys(claims), ['iss', 'sub', 'aud', 'iat', 'exp', 'scope', 'gty', 'azp']);
      assert.equal(claims.azp, clientId);
      assert.equal(claims.sub, `${clientId}@clients`);
      assert.equal(claims.scope, body.scope);
    });

    it('accepts JSON bodies and HTTP Basic credentials, and narrows to a requested scope', async () => {
      const basic = Buffer.from(`${ADMIN_ID}:${ADMIN_SECRET}`).toString('base64');
      const response = await token(
        {
          grant_type: 'client_credentials',
          audience: `https://${server.domain}/api/v2/`,
          scope: 'read:users not:granted',
        },
        { authorization: `Basic ${basic}` },
      );
      assert.equal(response.statusCode, 200, response.body);
      assert.equal(response.json().scope, 'read:users');
      assert.equal(decode(response.json().access_token).scope, 'read:users');
    });

    it('narrows to a requested scope of any length, repeated and unknown words included', async () => {
      // A body of 340,000 one-letter words beside read:users: looked up in a Set, each of the admin's
      // ~450 scopes costs one lookup, not a walk of the words (160 ms of the event loop a grant).
      const response = await token({
        grant_type: 'client_credentials',
        client_id: ADMIN_ID,
        client_secret: ADMIN_SECRET,
        audience: `https://${server.domain}/api/v2/`,
        scope: `${'a '.repeat(340_000)}read:users read:users  create:nothing`,
      });
      assert.equal(response.statusCode, 200, response.body);
      assert.equal(response.json().scope, 'read:users');
      assert.equal(decode(response.json().access_token).scope, 'read:users');
    });

    it('publishes the public keys and every token verifies against them', async () => {
      const jwks = await server.app.inject({
        method: 'GET',
        url: '/.well-known/jwks.json',
        headers: { host: server.domain },
      });
      assert.equal(jwks.statusCode, 200);
      const keys = jwks.json().keys as Array<Record<string, unknown>>;
      assert.equal(keys.length, 1);
      assert.equal(keys[0]!.kty, 'RSA');
      assert.equal(keys[0]!.alg, 'RS256');
      for (const privateMember of ['d', 'p', 'q', 'dp', 'dq', 'qi']) assert.equal(keys[0]![privateMember], undefined);
      const verified = await jwtVerify(server.adminToken, createLocalJWKSet(jwks.json()), {
        issuer: `https://${server.domain}/`,
        audience: `https://${server.domain}/api/v2/`,
        algorithms: ['RS256'],
      });
      assert.equal(verified.payload.sub, `${ADMIN_ID}@clients`);
    });

    it('rotation: the new key signs, the old key still verifies its tokens until revoked', async () => {
      const oldToken = server.adminToken;
      const oldKid = decodeProtectedHeader(oldToken).kid!;
      const newKid = await server.services.signingKeys.rotate(server.tenant.id);
      const newToken = await server.tokenFor(server.domain, ADMIN_ID, ADMIN_SECRET);
      assert.equal(decodeProtectedHeader(newToken).kid, newKid);
      const jwks = (
        await server.app.inject({ url: '/.well-known/jwks.json', headers: { host: server.domain } })
      ).json();
      assert.deepEqual(new Set(jwks.keys.map((k: { kid: string }) => k.kid)), new Set([oldKid, newKid]));
      assert.equal(
        (await server.request({ url: '/api/v2/users-by-email?email=a@b.c', token: oldToken })).statusCode,
        200,
      );
      assert.equal(await server.services.signingKeys.revoke(server.tenant.id, oldKid), true);
      const refused = await server.request({ url: '/api/v2/users-by-email?email=a@b.c', token: oldToken });
      assert.equal(refused.statusCode, 401);
      assert.equal(
        (await server.request({ url: '/api/v2/users-by-email?email=a@b.c', token: newToken })).statusCode,
        200,
      );
      server.adminToken = newToken;
    });

    it('answers OAuth-shaped errors', async () => {
      const audience = `https://${server.domain}/api/v2/`;
      const cases: Array<[Record<string, unknown>, number, Record<string, string>]> = [
        [
          { grant_type: 'client_credentials', client_id: ADMIN_ID, client_secret: 'wrong', audience },
          401,
          { error: 'access_denied', error_description: 'Unauthorized' },
        ],
        [
          { grant_type: 'client_credentials', client_id: 'nobody', client_secret: ADMIN_SECRET, audience },
          401,
          { error: 'access_denied', error_description: 'Unauthorized' },
        ],
        [
          {
            grant_type: 'client_credentials',
            client_id: ADMIN_ID,
            client_secret: ADMIN_SECRET,
            audience: 'https://elsewhere/api/v2/',
          },
          403,
          { error: 'access_denied', error_description: 'Service not enabled within domain: https://elsewhere/api/v2/' },
        ],
        [
          { grant_type: 'password', client_id: ADMIN_ID, client_secret: ADMIN_SECRET, audience },
          400,
          { error: 'unsupported_grant_type', error_description: 'Unsupported grant type: password' },
        ],
        [
          { client_id: ADMIN_ID, client_secret: ADMIN_SECRET, audience },
          400,
          { error: 'invalid_request', error_description: 'Missing required parameter: grant_type' },
        ],
        // PostgreSQL refuses NUL in a query: it must still be an unknown client, not a 500.
        [
          { grant_type: 'client_credentials', client_id: 'a\u0000b', client_secret: ADMIN_SECRET, audience },
          401,
          { error: 'access_denied', error_description: 'Unauthorized' },
        ],
      ];
      for (const [payload, status, body] of cases) {
        const response = await token(payload);
        assert.equal(response.statusCode, status, JSON.stringify(payload));
        assert.deepEqual(response.json(), body);
      }
      // A parameter given twice (a form's repeated key, a JSON array) or not as a string: refused, not
      // read as absent (a repeated scope gave the client's whole grant).
      const form = (extra: string) =>
        token(
          `${new URLSearchParams({ grant_type: 'client_credentials', client_id: ADMIN_ID, client_secret: ADMIN_SECRET, audience })}&${extra}`,
          { 'content-type': 'application/x-www-form-urlencoded' },
        );
      for (const response of [
        await form('scope=read:users&scope=read:email_templates'),
        await form(`audience=${encodeURIComponent(audience)}`),
        await token({
          grant_type: 'client_credentials',
          client_id: ADMIN_ID,
          client_secret: ADMIN_SECRET,
          audience,
          scope: ['read:users'],
        }),
        await token({ grant_type: 'client_credentials', client_id: [ADMIN_ID], client_secret: ADMIN_SECRET, audience }),
      ]) {
        assert.equal(response.statusCode, 400, response.body);
        assert.equal(response.json().error, 'invalid_request');
        assert.match(
          response.json().error_description,
          /^Invalid parameter: (scope|audience|client_id) must be given once, as a string$/,
        );
      }
      // One scope, once: narrowed as asked.
      const narrowed = await form('scope=read:users');
      assert.equal(narrowed.statusCode, 200, narrowed.body);
      assert.equal(narrowed.json().scope, 'read:users');
    });

    it('stores client secrets only as hashes', async () => {
      const row = await server.services.database.db
        .selectFrom('clients')
        .selectAll()
        .where('client_id', '=', ADMIN_ID)
        .executeTakeFirstOrThrow();
      assert.notEqual(row.secret_hash, ADMIN_SECRET);
      assert.ok(!row.secret_hash.includes(ADMIN_SECRET));
      assert.match(row.secret_hash, /^[0-9a-f]{64}$/);
    });
  });
}
