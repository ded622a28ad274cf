import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

for (const kind of databaseKinds()) {
  describe(`users and GET /users-by-email (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind);
    });
    after(() => server.close());

    const createUser = (payload: Record<string, unknown>) =>
      server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: { connection: 'Username-Password-Authentication', password: 'correct horse battery', ...payload },
      });
    const byEmail = (query: string, token?: string) =>
      server.request({ url: `/api/v2/users-by-email?${query}`, token });

    it('creates a database user with the email lower-cased, and finds it at once by exact email', async () => {
      const created = await createUser({
        email: 'Chuck.Norris@Example.COM',
        given_name: 'Chuck',
        user_metadata: { favourite: 'kick' },
      });
      assert.equal(created.statusCode, 201, created.body);
      const user = created.json();
      assert.match(user.user_id, /^svc\|[0-9a-f]{24}$/);
      assert.equal(user.email, 'chuck.norris@example.com');
      assert.equal(user.email_verified, false);
      assert.equal(user.name, 'chuck.norris@example.com');
      assert.equal(user.nickname, 'chuck.norris');
      assert.deepEqual(user.identities, [
        {
          connection: 'Username-Password-Authentication',
          user_id: user.user_id.slice(4),
          provider: 'svc',
          isSocial: false,
        },
      ]);
      assert.equal(user.password, undefined);
      assert.equal(user.created_at, user.updated_at);

      const found = await byEmail('email=chuck.norris%40example.com');
      assert.equal(found.statusCode, 200);
      assert.equal(found.headers['content-type'], 'application/json; charset=utf-8');
      assert.deepEqual(found.json(), [user]);
      // Case-sensitive: the stored form is lower-case, so the original casing finds nothing.
      assert.deepEqual((await byEmail('email=Chuck.Norris%40Example.COM')).json(), []);
      assert.deepEqual((await byEmail('email=nobody%40example.com')).json(), []);
    });

    it('stores the password hashed, never as given', async () => {
      await createUser({ email: 'hash@example.com', password: 'plain-text-password-123' });
      const row = await server.services.database.db
        .selectFrom('users')
        .select(['password_hash', 'document'])
        .where('email', '=', 'hash@example.com')
        .executeTakeFirstOrThrow();
      assert.match(row.password_hash!, /^scrypt\$/);
      assert.ok(!row.password_hash!.includes('plain-text-password-123'));
      assert.ok(!row.document.includes('plain-text-password-123'));
    });

    it('returns every user sharing an email across connections, with projection', async () => {
      await createUser({ email: 'shared@example.com', username: 'db-user' });
      await server.services.users.insertMany(server.tenant.id, [
        {
          email: 'shared@example.com',
          identities: [
            {
              provider: 'google-oauth2',
              connection: 'google-oauth2',
              user_id: '1234567890',
              isSocial: true,
              access_token: 'idp-access-token',
            },
          ],
        },
      ]);
      const all = (await byEmail('email=shared%40example.com')).json();
      assert.equal(all.length, 2);
      assert.deepEqual(
        all.map((u: { identities: Array<{ connection: string }> }) => u.identities[0]!.connection).sort(),
        ['Username-Password-Authentication', 'google-oauth2'],
      );

      const projected = (await byEmail('email=shared%40example.com&fields=user_id,email')).json();
      for (const u of projected) assert.deepEqual(Object.keys(u).sort(), ['email', 'user_id']);
      const excluded = (
        await byEmail('email=shared%40example.com&fields=identities,picture&include_fields=false')
      ).json();
      for (const u of excluded) {
        assert.equal(u.identities, undefined);
        assert.equal(u.picture, undefined);
        assert.equal(typeof u.user_id, 'string');
      }
    });

    it('returns identity-provider tokens only with read:user_idp_tokens', async () => {
      const withoutScope = (await byEmail('email=shared%40example.com')).json();
      const google = (u: { identities: Array<Record<string, unknown>> }) =>
        u.identities.find((i) => i.provider === 'google-oauth2');
      // The admin has every scope, read:user_idp_tokens included.
      assert.equal(google(withoutScope.find(google))!.access_token, 'idp-access-token');
      const { token } = await server.clientWithScopes(['read:users']);
      const limited = (await byEmail('email=shared%40example.com', token)).json();
      assert.equal(google(limited.find(google))!.access_token, undefined);
      const row = await server.services.database.db
        .selectFrom('users')
        .select(['document', 'idp_tokens'])
        .where('connection', '=', 'google-oauth2')
        .executeTakeFirstOrThrow();
      assert.ok(!row.document.includes('idp-access-token'));
      assert.ok(!row.idp_tokens!.includes('idp-access-token'), 'tokens are sealed at rest');
    });

    it('keeps the case of emails from other providers', async () => {
      await server.services.users.insertMany(server.tenant.id, [
        {
          email: 'Mixed.Case@Example.com',
          identities: [{ provider: 'github', connection: 'github', user_id: 42, isSocial: true }],
        },
      ]);
      assert.equal((await byEmail('email=Mixed.Case%40Example.com')).json().length, 1);
      assert.equal((await byEmail('email=mixed.case%40example.com')).json().length, 0);
    });

    it('answers 400 for a missing or invalid email', async () => {
      const missing = await byEmail('');
      assert.equal(missing.statusCode, 400);
      assert.deepEqual(missing.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: "Query validation error: 'Missing required property: email'.",
        errorCode: 'invalid_query_string',
      });
      const invalid = await byEmail('email=not-an-email');
      assert.equal(invalid.statusCode, 400);
      assert.equal(invalid.json().errorCode, 'invalid_query_string');
      assert.match(
        invalid.json().message,
        /^Query validation error: 'Object didn't pass validation for format email: not-an-email' on property email/,
      );
    });

    it('reads and deletes a user by id; delete is idempotent', async () => {
      const user = (await createUser({ email: 'gone@example.com' })).json();
      const read = await server.request({ url: `/api/v2/users/${encodeURIComponent(user.user_id)}` });
      assert.equal(read.statusCode, 200);
      assert.deepEqual(read.json(), user);
      const removed = await server.request({
        method: 'DELETE',
        url: `/api/v2/users/${encodeURIComponent(user.user_id)}`,
      });
      assert.equal(removed.statusCode, 204);
      assert.equal(removed.body, '');
      const again = await server.request({
        method: 'DELETE',
        url: `/api/v2/users/${encodeURIComponent(user.user_id)}`,
      });
      assert.equal(again.statusCode, 204);
      const missing = await server.request({ url: `/api/v2/users/${encodeURIComponent(user.user_id)}` });
      assert.deepEqual(missing.json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'The user does not exist.',
        errorCode: 'inexistent_user',
      });
      assert.deepEqual((await byEmail('email=gone%40example.com')).json(), []);
    });

    it('refuses duplicates, unknown connections, weak passwords and bad bodies, storing nothing', async () => {
      const count = async () =>
        Number(
          (
            await server.services.database.db
              .selectFrom('users')
              .select((eb) => eb.fn.countAll().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const before = await count();
      await createUser({ email: 'dupe@example.com' });
      const dupe = await createUser({ email: 'DUPE@example.com' });
      assert.equal(dupe.statusCode, 409);
      assert.equal(dupe.json().message, 'The user already exists.');
      const noConnection = await createUser({ email: 'x@example.com', connection: 'nope' });
      assert.deepEqual(noConnection.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: 'The connection does not exist.',
        errorCode: 'inexistent_connection',
      });
      assert.equal((await createUser({ email: 'weak@example.com', password: 'short' })).statusCode, 400);
      const unknown = await createUser({ email: 'u@example.com', favourite_colour: 'blue' });
      assert.equal(
        unknown.json().message,
        "Payload validation error: 'Additional properties not allowed: favourite_colour'.",
      );
      const wrongType = await createUser({ email: 'w@example.com', blocked: 'yes' });
      assert.equal(
        wrongType.json().message,
        "Payload validation error: 'Expected type boolean but found type string' on property blocked.",
      );
      const noEmail = await createUser({});
      assert.equal(noEmail.statusCode, 400);
      assert.equal(await count(), before + 1);
    });

    it("refuses to change a user's email to another user's of the same connection (400, nothing changed)", async () => {
      const taken = (await createUser({ email: 'taken@example.com' })).json();
      const user = (await createUser({ email: 'mine@example.com' })).json();
      const response = await server.request({
        method: 'PATCH',
        url: `/api/v2/users/${encodeURIComponent(user.user_id)}`,
        payload: { email: 'Taken@example.com', given_name: 'Changed' },
      });
      assert.deepEqual(response.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: 'The specified new email already exists',
        errorCode: 'svc_idp_error',
      });
      assert.deepEqual(
        (await server.request({ url: `/api/v2/users/${encodeURIComponent(user.user_id)}` })).json(),
        user,
      );
      assert.deepEqual((await byEmail('email=taken%40example.com')).json(), [taken]);
    });

    it('refuses NUL in a user id, path or body, on either database (PostgreSQL cannot store it)', async () => {
      const read = await server.request({ url: '/api/v2/users/svc%7Ca%00b' });
      assert.deepEqual(read.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: "Path validation error: 'String contains the NUL character' on property id.",
        errorCode: 'invalid_uri',
      });
      const created = await createUser({ email: 'nul@example.com', user_id: 'a\u0000b' });
      assert.equal(
        created.json().message,
        "Payload validation error: 'String contains the NUL character' on property user_id.",
      );
      assert.deepEqual((await byEmail('email=nul%40example.com')).json(), []);
    });

    it('creates users from a form-encoded body', async () => {
      const response = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload:
          'connection=Username-Password-Authentication&email=form%40example.com&password=long-enough-pw&email_verified=true&user_metadata[plan]=pro',
      });
      assert.equal(response.statusCode, 201, response.body);
      assert.equal(response.json().email_verified, true);
      assert.deepEqual(response.json().user_metadata, { plan: 'pro' });
    });
  });
}
