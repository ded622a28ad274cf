import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SignJWT, decodeProtectedHeader } from 'jose';
import { databaseKinds } from '../helpers/databases.ts';
import { ADMIN_ID, startTestServer, type TestServer } from '../helpers/server.ts';

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

for (const kind of databaseKinds()) {
  describe(`authentication and scopes on /api/v2 (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind);
    });
    after(() => server.close());

    const lookup = (token: string | null, headers: Record<string, string> = {}) =>
      server.request({ url: '/api/v2/users-by-email?email=someone%40example.com', token, headers });

    /** Signs claims with the tenant's real current key, so only the claim under test is wrong. */
    async function signed(claims: Record<string, unknown>, header: Record<string, unknown> = {}) {
      const key = await server.services.signingKeys.current(server.tenant.id);
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({
        iss: `https://${server.domain}/`,
        sub: `${ADMIN_ID}@clients`,
        aud: `https://${server.domain}/api/v2/`,
        iat: now,
        exp: now + 60,
        scope: 'read:users',
        gty: 'client-credentials',
        azp: ADMIN_ID,
        ...claims,
      })
        .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: key.kid, ...header })
        .sign(key.privateKey);
    }

    it('accepts a valid token and answers 401 without one', async () => {
      assert.equal((await lookup(server.adminToken)).statusCode, 200);
      const missing = await lookup(null);
      assert.equal(missing.statusCode, 401);
      assert.deepEqual(missing.json(), {
        statusCode: 401,
        error: 'Unauthorized',
        message: 'Missing authentication',
        attributes: { error: 'Missing authentication' },
      });
      assert.equal(missing.headers['www-authenticate'], 'Bearer');
    });

    it('answers 400 for a malformed Authorization header', async () => {
      const response = await server.request({
        url: '/api/v2/users-by-email?email=a%40b.co',
        token: null,
        headers: { authorization: 'Token abc' },
      });
      assert.equal(response.statusCode, 400);
      assert.equal(response.json().message, 'Bad HTTP authentication header format');
    });

    it('checks signature, alg, iss, aud, exp and nbf', async () => {
      const good = await signed({});
      assert.equal((await lookup(good)).statusCode, 200);

      const [h, p, s] = good.split('.') as [string, string, string];
      const tampered = `${h}.${b64({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), scope: 'read:users delete:users' })}.${s}`;
      assert.equal(
        (await lookup(tampered)).json().message,
        'Invalid signature received for JSON Web Token validation.',
      );

      const none = `${b64({ alg: 'none', typ: 'JWT' })}.${p}.`;
      assert.equal((await lookup(none)).statusCode, 401);

      // HS256 signed with the public key as the HMAC secret: the classic key-confusion attack.
      const jwks = (
        await server.app.inject({ url: '/.well-known/jwks.json', headers: { host: server.domain } })
      ).json();
      const hs = await new SignJWT({ scope: 'read:users' })
        .setProtectedHeader({ alg: 'HS256', kid: jwks.keys[0].kid })
        .setIssuer(`https://${server.domain}/`)
        .setAudience(`https://${server.domain}/api/v2/`)
        .setExpirationTime('1h')
        .sign(new TextEncoder().encode(JSON.stringify(jwks.keys[0])));
      assert.equal((await lookup(hs)).statusCode, 401);

      const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
      const foreign = await new SignJWT({ scope: 'read:users' })
        .setProtectedHeader({ alg: 'RS256', kid: decodeProtectedHeader(good).kid! })
        .setIssuer(`https://${server.domain}/`)
        .setAudience(`https://${server.domain}/api/v2/`)
        .setExpirationTime('1h')
        .sign(stranger);
      assert.equal((await lookup(foreign)).json().message, 'Invalid signature received for JSON Web Token validation.');

      const now = Math.floor(Date.now() / 1000);
      const expired = await signed({ exp: now - 10, iat: now - 100 });
      assert.equal((await lookup(expired)).json().message, 'Expired token received for JSON Web Token validation');

      const early = await signed({ nbf: now + 3600 });
      assert.equal((await lookup(early)).statusCode, 401);

      const wrongIssuer = await signed({ iss: 'https://evil.example/' });
      assert.equal((await lookup(wrongIssuer)).json().message, 'Bad issuer: https://evil.example/');

      const wrongAudience = await signed({ aud: 'https://evil.example/api/v2/' });
      assert.equal((await lookup(wrongAudience)).json().message, 'Bad audience: https://evil.example/api/v2/');

      assert.equal((await lookup('not-a-jwt')).json().message, 'Invalid token');
    });

    it('enforces scopes with the original 403 body', async () => {
      const { token } = await server.clientWithScopes(['read:clients']);
      const response = await lookup(token);
      assert.equal(response.statusCode, 403);
      assert.deepEqual(response.json(), {
        statusCode: 403,
        error: 'Forbidden',
        message: 'Insufficient scope, expected any of: read:users',
        errorCode: 'insufficient_scope',
      });
    });

    it("refuses a tenant's token on another tenant", async () => {
      const other = await server.addTenant('other', 'other.test');
      const mine = await server.request({
        url: '/api/v2/users-by-email?email=a%40b.co',
        token: other.token,
        headers: { host: 'other.test' },
      });
      assert.equal(mine.statusCode, 200);
      const theirs = await server.request({ url: '/api/v2/users-by-email?email=a%40b.co', token: other.token });
      assert.equal(theirs.statusCode, 401);
      const reverse = await server.request({
        url: '/api/v2/users-by-email?email=a%40b.co',
        headers: { host: 'other.test' },
      });
      assert.equal(reverse.statusCode, 401);
      // With two tenants, an unknown host no longer falls back to the default tenant.
      const unknownHost = await server.request({
        url: '/api/v2/users-by-email?email=a%40b.co',
        headers: { host: 'unknown.test' },
      });
      assert.equal(unknownHost.statusCode, 404);
    });
  });
}
