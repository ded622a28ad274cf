import { request as httpsRequest } from 'node:https';
import type { ClientRequest } from 'node:http';
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManagementClient } from 'auth0';
import { ManagementClient as LegacyManagementClient } from 'auth0-legacy';
import { pendingJob } from '../../../src/modules/users-imports/service.ts';
import type { UsersImportStore } from '../../../src/modules/users-imports/store.ts';
import { databaseKinds } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';
import { ADMIN_ID, ADMIN_SECRET, startTestServer, type TestServer } from '../../helpers/server.ts';
import { file, finished, multipart, upload } from '../../helpers/users-import.ts';

const DEFAULT = 'Username-Password-Authentication';

/** What the database holds of an import: chunks left behind, jobs. */
async function leftovers(server: TestServer) {
  const db = server.services.database.db;
  const chunks = await db.selectFrom('users_import_chunks').select(db.fn.countAll().as('n')).executeTakeFirstOrThrow();
  const jobs = await db.selectFrom('users_imports').select(db.fn.countAll().as('n')).executeTakeFirstOrThrow();
  return { chunks: Number(chunks.n), jobs: Number(jobs.n) };
}

for (const kind of databaseKinds()) {
  describe(`users-import jobs (${kind})`, () => {
    let https: HttpsTestServer;
    let server: TestServer;
    let connectionId: string;
    before(async () => {
      https = await startHttpsTestServer(kind, { USERS_IMPORT_MAX_BYTES: String(64 * 1024) });
      server = https.server;
      connectionId = (await server.services.connections.byName(server.tenant.id, DEFAULT))!.id;
    });
    after(() => https.close());

    const v7 = () => new ManagementClient({ domain: https.domain, clientId: ADMIN_ID, clientSecret: ADMIN_SECRET });
    const v4 = () =>
      new LegacyManagementClient({ domain: https.domain, clientId: ADMIN_ID, clientSecret: ADMIN_SECRET });

    it('v7 SDK: imports the valid records, refuses the others one by one, and reports both', async () => {
      const users = [
        { email: 'Ann@Example.com', given_name: 'Ann', user_metadata: { plan: 'pro' } },
        { email: 'not-an-email' },
        {
          email: 'bob@example.com',
          user_id: 'bob-1',
          password_hash: '$2b$10$abcdefghijklmnopqrstuuJ0e1kHXR8fXjtb0Xm1Zr0o5a1b2c3d4',
        },
        { email: 'ann@example.com', name: 'Ann again' },
        { email: 'carl@example.com', favourite: 'unknown member' },
        42,
      ];
      const client = v7();
      const created = await client.jobs.usersImports.create({
        users: file(users),
        connection_id: connectionId,
        external_id: 'batch-7',
      });
      assert.equal(created.status, 'pending');
      assert.equal(created.type, 'users_import');
      assert.equal(created.connection_id, connectionId);
      assert.equal(created.external_id, 'batch-7');
      assert.match(created.id, /^job_[0-9A-Za-z]{16}$/);

      await eventually('completed', async () => {
        const job = await client.jobs.get(created.id);
        return job.status === 'completed' ? job : undefined;
      });
      const job = await client.jobs.get(created.id);
      assert.deepEqual(job, {
        status: 'completed',
        type: 'users_import',
        created_at: created.created_at,
        id: created.id,
        connection_id: connectionId,
        connection: DEFAULT,
        external_id: 'batch-7',
        summary: { failed: 4, updated: 0, inserted: 2, total: 6 },
      });

      const errors = (await client.jobs.errors.get(created.id)) as Array<{ user: unknown; errors: unknown[] }>;
      assert.deepEqual(errors, [
        {
          user: { email: 'not-an-email' },
          errors: [
            {
              code: 'INVALID_FORMAT',
              message: "Object didn't pass validation for format email: not-an-email",
              path: 'email',
            },
          ],
        },
        {
          user: { email: 'ann@example.com', name: 'Ann again' },
          errors: [{ code: 'DUPLICATED_USER', message: 'The user is in the file more than once', path: '' }],
        },
        {
          user: { email: 'carl@example.com', favourite: 'unknown member' },
          errors: [
            { code: 'OBJECT_ADDITIONAL_PROPERTIES', message: 'Additional properties not allowed: favourite', path: '' },
          ],
        },
        { user: { value: 42 }, errors: [{ code: 'INVALID_TYPE', message: 'A user must be a JSON object', path: '' }] },
      ]);
      // The refused record's password hash is never shown; the imported users are real users.
      assert.ok(!JSON.stringify(errors).includes('$2b$'));
      const ann = await client.users.listUsersByEmail({ email: 'ann@example.com' });
      assert.equal(ann.length, 1);
      assert.equal(ann[0]!.given_name, 'Ann');
      assert.deepEqual(ann[0]!.identities?.[0]?.connection, DEFAULT);
      const bob = await client.users.get('svc|bob-1');
      assert.equal(bob.email, 'bob@example.com');
    });

    it('lists refused records past a page of them, every one in file order, as JSON', async () => {
      // /errors reads the stored refusals a page at a time (4 first, then as many as fit in 1 MiB): 100
      // of them take two pages.
      const users = Array.from({ length: 150 }, (_, i) =>
        i % 3 === 0 ? { email: `paged-${i}@example.com` } : { email: `paged-${i}`, nickname: `n${i}` },
      );
      const client = v7();
      const created = await client.jobs.usersImports.create({ users: file(users), connection_id: connectionId });
      await eventually('completed', async () => {
        const job = await client.jobs.get(created.id);
        return job.status === 'completed' ? job : undefined;
      });
      const response = await server.request({ url: `/api/v2/jobs/${created.id}/errors` });
      assert.equal(response.statusCode, 200);
      assert.match(String(response.headers['content-type']), /^application\/json/);
      const errors = response.json() as Array<{ user: { email: string; nickname: string }; errors: unknown[] }>;
      assert.deepEqual(
        errors.map((e) => e.user),
        users.filter((_, i) => i % 3 !== 0),
      );
      assert.ok(errors.every((e) => e.errors.length === 1));
    });

    it('v7 SDK: upsert updates the users that exist and inserts the others; no errors is a 204', async () => {
      const client = v7();
      const first = await client.jobs.usersImports.create({
        users: file([{ email: 'dana@example.com', name: 'Dana', app_metadata: { tier: 1, keep: true } }]),
        connection_id: connectionId,
      });
      await eventually('first import', async () =>
        (await client.jobs.get(first.id)).status === 'completed' ? true : undefined,
      );
      // Without upsert, a user that exists is refused and left as it is.
      const refused = await client.jobs.usersImports.create({
        users: file([{ email: 'dana@example.com', name: 'Not Dana' }]),
        connection_id: connectionId,
      });
      await eventually('refused', async () =>
        (await client.jobs.get(refused.id)).status === 'completed' ? true : undefined,
      );
      assert.deepEqual((await client.jobs.get(refused.id)).summary, { failed: 1, updated: 0, inserted: 0, total: 1 });
      assert.deepEqual(await client.jobs.errors.get(refused.id), [
        {
          user: { email: 'dana@example.com', name: 'Not Dana' },
          errors: [
            { code: 'DUPLICATED_USER', message: 'The user already exist and upsert parameter is false', path: '' },
          ],
        },
      ]);
      const second = await client.jobs.usersImports.create({
        users: file([
          { email: 'dana@example.com', name: 'Dana Renamed', app_metadata: { tier: 2 } },
          { email: 'erin@example.com' },
        ]),
        connection_id: connectionId,
        upsert: true,
      });
      await eventually('upsert', async () =>
        (await client.jobs.get(second.id)).status === 'completed' ? true : undefined,
      );
      const job = await client.jobs.get(second.id);
      assert.deepEqual(job.summary, { failed: 0, updated: 1, inserted: 1, total: 2 });
      assert.equal(await client.jobs.errors.get(second.id), undefined);
      const [dana] = await client.users.listUsersByEmail({ email: 'dana@example.com' });
      assert.equal(dana!.name, 'Dana Renamed');
      assert.deepEqual(dana!.app_metadata, { tier: 2, keep: true });
    });

    it('v4 SDK: importUsers, get and getErrors', async () => {
      const client = v4();
      const created = await client.jobs.importUsers({
        users: file([{ email: 'fay@example.com' }, { email: 'fay@example.com' }]),
        connection_id: connectionId,
        upsert: false,
        send_completion_email: false,
      });
      assert.equal(created.status, 200 + 1);
      const id = created.data.id;
      await eventually('v4 import', async () =>
        (await client.jobs.get({ id })).data.status === 'completed' ? true : undefined,
      );
      const job = await client.jobs.get({ id });
      assert.deepEqual(job.data.summary, { failed: 1, updated: 0, inserted: 1, total: 2 });
      const errors = await client.jobs.getErrors({ id });
      assert.deepEqual(errors.data, [
        {
          user: { email: 'fay@example.com' },
          errors: [{ code: 'DUPLICATED_USER', message: 'The user is in the file more than once', path: '' }],
        },
      ]);
    });

    it('imports NDJSON too, numbering nothing twice', async () => {
      const lines = ['{"email":"gil@example.com"}', '', '{"email":"hal@example.com","email_verified":true}'].join('\n');
      const response = await upload(server, { users: file(lines), connection_id: connectionId });
      assert.equal(response.statusCode, 201, response.body);
      const job = (await finished(server, response.json().id)) as unknown as { summary: unknown };
      assert.deepEqual(job.summary, { failed: 0, updated: 0, inserted: 2, total: 2 });
      const hal = await server.request({ method: 'GET', url: '/api/v2/users-by-email?email=hal@example.com' });
      assert.equal(hal.json()[0].email_verified, true);
    });

    it('refuses a bad upload whole, with the original error body, and leaves nothing behind', async () => {
      const before = await leftovers(server);
      const good = file([{ email: 'never@example.com' }]);
      const cases: Array<[string, Record<string, string | Blob>, number, RegExp]> = [
        ['no file', { connection_id: connectionId }, 400, /Missing required property: users/],
        ['no connection', { users: good }, 400, /Missing required property: connection_id/],
        ['a malformed connection id', { users: good, connection_id: 'con_x' }, 400, /connection_id/],
        [
          'an unknown connection',
          { users: good, connection_id: 'con_AAAAAAAAAAAAAAAA' },
          400,
          /connection does not exist/,
        ],
        [
          'an unknown member',
          { users: good, connection_id: connectionId, admin: 'true' },
          400,
          /Additional properties not allowed: admin/,
        ],
        ['upsert not a boolean', { users: good, connection_id: connectionId, upsert: 'maybe' }, 400, /upsert/],
        [
          'not JSON',
          { users: file('[{"email": "x@example.com"'), connection_id: connectionId },
          400,
          /Invalid users file/,
        ],
        [
          'a record that is not JSON',
          { users: file('[{"email": tru}]'), connection_id: connectionId },
          400,
          /record 1 is not valid JSON/,
        ],
        ['no users', { users: file('[]'), connection_id: connectionId }, 400, /holds no users/],
        [
          'an object, not an array',
          { users: file('"users"'), connection_id: connectionId },
          400,
          /must be a JSON array/,
        ],
        [
          'a file over USERS_IMPORT_MAX_BYTES',
          {
            users: file(`[${JSON.stringify({ email: 'big@example.com', name: 'x'.repeat(200) })},`.repeat(400) + '{}]'),
            connection_id: connectionId,
          },
          413,
          /greater than maximum allowed: 65536/,
        ],
      ];
      for (const [what, parts, status, message] of cases) {
        const response = await upload(server, parts);
        assert.equal(response.statusCode, status, `${what}: ${response.body}`);
        const body = response.json();
        assert.deepEqual(Object.keys(body).sort(), ['error', 'errorCode', 'message', 'statusCode'], what);
        assert.match(body.message, message, what);
      }
      assert.deepEqual(await leftovers(server), before);
      const never = await server.request({ method: 'GET', url: '/api/v2/users-by-email?email=never@example.com' });
      assert.deepEqual(never.json(), []);
    });

    it('refuses at upload a record nested past 100 levels, which storing it could not write out', async () => {
      const before = await leftovers(server);
      // 10,000 levels in 20 KB: JSON.parse reads them, JSON.stringify (storing the user) runs out of stack.
      const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
      const [array, ndjson] = await Promise.all(
        [
          `[{"email":"fine@example.com"},{"email":"deep@example.com","user_metadata":{"x":${deep}}}]`,
          `{"email":"fine@example.com"}\n{"email":"deep@example.com","app_metadata":{"x":${deep}}}\n`,
        ].map((text) => upload(server, { users: file(text), connection_id: connectionId })),
      );
      for (const response of [array!, ndjson!]) {
        assert.equal(response.statusCode, 400, response.body);
        assert.equal(
          response.json().message,
          'Invalid users file: record 2 nests objects and arrays deeper than 100 levels.',
        );
      }
      assert.deepEqual(await leftovers(server), before);

      // A hundred levels are taken, brackets in strings do not count, and the job completes.
      const hundred = `${'{"a":'.repeat(99)}"[[[[{{{{"${'}'.repeat(99)}`;
      const response = await upload(server, {
        users: file(`[{"email":"hundred@example.com","user_metadata":${hundred}}]`),
        connection_id: connectionId,
      });
      assert.equal(response.statusCode, 201, response.body);
      const job = (await finished(server, response.json().id)) as unknown as { status: string; summary: unknown };
      assert.equal(job.status, 'completed');
      assert.deepEqual(job.summary, { failed: 0, updated: 0, inserted: 1, total: 1 });
    });

    it('shows a refused record without any credential it carries', async () => {
      const response = await upload(server, {
        users: file([
          { email: 'hash-kept-out', password_hash: 'SECRET-HASH-1' },
          {
            email: 'custom-hash@example.com',
            custom_password_hash: { algorithm: 'md5', hash: { value: 'SECRET-HASH-2', encoding: 'hex' } },
          },
          { email: 'plain@example.com', password: 'SECRET-PASSWORD-3' },
          { email: 'mfa@example.com', mfa_factors: [{ totp: { secret: 'SECRET-TOTP-4' } }] },
          // Another provider's export: identities with their provider's tokens (refused: identities is unknown).
          {
            email: 'social@example.com',
            identities: [
              {
                provider: 'google-oauth2',
                user_id: '1234',
                access_token: 'SECRET-IDP-ACCESS-5',
                refresh_token: 'SECRET-IDP-REFRESH-6',
                access_token_secret: 'SECRET-IDP-TOKEN-SECRET-7',
              },
            ],
          },
          // Wherever a credential's member is, and whatever else the record names (`__proto__` stays a member).
          {
            email: 'nested@example.com',
            user_metadata: { legacy: { password: 'SECRET-NESTED-8' } },
            extra: [{ mfa_factors: ['SECRET-NESTED-9'] }],
            ['__proto__']: { refresh_token: 'SECRET-PROTO-10', kept: 1 },
          },
          // Not a user but an array of them: refused as a whole, and shown without credentials all the same.
          [
            {
              email: 'in-array@example.com',
              password_hash: 'SECRET-ARRAY-11',
              identities: [{ access_token: 'SECRET-ARRAY-12' }],
            },
          ],
        ]),
        connection_id: connectionId,
      });
      assert.equal(response.statusCode, 201, response.body);
      const id = response.json().id as string;
      const job = (await finished(server, id)) as unknown as { summary: { failed: number } };
      assert.equal(job.summary.failed, 7);
      // GET /jobs/{id}/errors is granted to read:users, which may not read credentials.
      const reader = await server.clientWithScopes(['read:users']);
      const errors = await server.request({ method: 'GET', url: `/api/v2/jobs/${id}/errors`, token: reader.token });
      assert.equal(errors.statusCode, 200);
      assert.deepEqual(
        (errors.json() as Array<{ user: unknown }>).map((e) => e.user),
        [
          { email: 'hash-kept-out' },
          { email: 'custom-hash@example.com' },
          { email: 'plain@example.com' },
          { email: 'mfa@example.com' },
          { email: 'social@example.com', identities: [{ provider: 'google-oauth2', user_id: '1234' }] },
          {
            email: 'nested@example.com',
            user_metadata: { legacy: {} },
            extra: [{}],
            ['__proto__']: { kept: 1 },
          },
          { value: [{ email: 'in-array@example.com', identities: [{}] }] },
        ],
      );
      assert.doesNotMatch(errors.body, /SECRET/);
    });

    it('refuses alone a record holding half of a surrogate pair, naming where', async () => {
      // JSON.stringify writes a lone surrogate as its escape, as another exporter might.
      const response = await upload(server, {
        users: file([
          { email: 'lone-id@example.com', user_id: 'id\ud800' },
          { email: 'kept-beside-lone@example.com', given_name: 'Pair \ud83d\ude00' },
          { email: 'lone-key@example.com', user_metadata: { deep: [{ ['k\udc00']: 1 }] } },
        ]),
        connection_id: connectionId,
      });
      assert.equal(response.statusCode, 201, response.body);
      const id = response.json().id as string;
      const job = (await finished(server, id)) as unknown as { status: string; summary: unknown };
      assert.equal(job.status, 'completed');
      assert.deepEqual(job.summary, { failed: 2, updated: 0, inserted: 1, total: 3 });
      const errors = (await server.request({ method: 'GET', url: `/api/v2/jobs/${id}/errors` })).json() as Array<{
        user: { email: string };
        errors: Array<{ code: string; path: string }>;
      }>;
      assert.deepEqual(
        errors.map((e) => [e.user.email, e.errors[0]!.code, e.errors[0]!.path]),
        [
          ['lone-id@example.com', 'INVALID_FORMAT', 'user_id'],
          ['lone-key@example.com', 'INVALID_FORMAT', 'user_metadata.deep[0].k\udc00'],
        ],
      );
      // Stored as sent: a whole pair is text.
      const kept = await server.request({
        method: 'GET',
        url: '/api/v2/users-by-email?email=kept-beside-lone@example.com',
      });
      assert.equal(kept.json()[0].given_name, 'Pair \ud83d\ude00');
      const lone = await server.request({ method: 'GET', url: '/api/v2/users-by-email?email=lone-id@example.com' });
      assert.deepEqual(lone.json(), []);
    });

    it('refuses a NUL in a member, and refuses alone a record holding one', async () => {
      const nul = await upload(server, {
        users: file([{ email: 'x@example.com' }]),
        connection_id: connectionId,
        external_id: 'a\u0000b',
      });
      assert.equal(nul.statusCode, 400);
      assert.match(nul.json().message, /NUL/);
      const response = await upload(server, {
        users: file([{ email: 'nul\u0000@example.com' }, { email: 'kept-beside-nul@example.com' }]),
        connection_id: connectionId,
      });
      const job = (await finished(server, response.json().id)) as unknown as { status: string; summary: unknown };
      assert.equal(job.status, 'completed');
      assert.deepEqual(job.summary, { failed: 1, updated: 0, inserted: 1, total: 2 });
    });

    it('refuses a third job while two of the tenant are under way, before reading the upload', async () => {
      const db = server.services.database.db;
      const at = new Date().toISOString();
      const held = new Date(Date.now() + 3_600_000).toISOString();
      const ids = [
        `job_pendingAAAAAAAA${kind === 'sqlite' ? 'S' : 'P'}`,
        `job_pendingBBBBBBBB${kind === 'sqlite' ? 'S' : 'P'}`,
      ];
      const connection = { id: connectionId, name: DEFAULT };
      const stored = { format: 'json' as const, bytes: 1, records: 1 };
      await db
        .insertInto('users_imports')
        .values(
          ids.map((id) => ({
            ...pendingJob({ id, tenantId: server.tenant.id, connection, file: stored, fields: {}, at }),
            // Leased by a worker that is not there: nobody runs them while the test looks.
            claimed_until: held,
            claims: 1,
            started_at: at,
          })),
        )
        .execute();
      try {
        const before = await leftovers(server);
        const refused = await upload(server, {
          users: file([{ email: 'third@example.com' }]),
          connection_id: connectionId,
        });
        assert.equal(refused.statusCode, 429);
        assert.match(refused.json().message, /already 2 pending users-import jobs/);
        assert.deepEqual(await leftovers(server), before);
      } finally {
        await db.deleteFrom('users_imports').where('id', 'in', ids).execute();
      }
      const allowed = await upload(server, {
        users: file([{ email: 'third@example.com' }]),
        connection_id: connectionId,
      });
      assert.equal(allowed.statusCode, 201);
      await finished(server, allowed.json().id);
    });

    it('counts uploads still being read against the limit: a third upload waits for none of them', async () => {
      // Two uploads whose bodies stop midway, over real HTTPS: neither is a job yet.
      const boundary = 'tenantry-held-upload';
      const [host, port] = https.domain.split(':') as [string, string];
      const open = () =>
        new Promise<{ request: ClientRequest; answered: Promise<number> }>((resolve) => {
          let settle: (status: number) => void = () => undefined;
          const answered = new Promise<number>((r) => (settle = r));
          const request = httpsRequest({
            host,
            port: Number(port),
            method: 'POST',
            path: '/api/v2/jobs/users-imports',
            ca: https.caPem,
            headers: {
              authorization: `Bearer ${server.adminToken}`,
              'content-type': `multipart/form-data; boundary=${boundary}`,
              'transfer-encoding': 'chunked',
            },
          });
          request.on('response', (response) => {
            response.resume();
            settle(response.statusCode ?? 0);
          });
          request.on('error', () => settle(0));
          request.write(
            `--${boundary}\r\nContent-Disposition: form-data; name="users"; filename="u.json"\r\n` +
              `Content-Type: application/json\r\n\r\n[{"email":"held@example.com"}`,
          );
          resolve({ request, answered });
        });
      const held = [await open(), await open()];
      try {
        // Both have passed the check and are being read.
        await eventually('both uploads under way', async () =>
          server.services.usersImports.uploadsReading(server.tenant.id) === 2 ? true : undefined,
        );
        const refused = await upload(server, {
          users: file([{ email: 'third@example.com' }]),
          connection_id: connectionId,
        });
        assert.equal(refused.statusCode, 429);
        assert.match(refused.json().message, /already 2 pending users-import jobs/);
      } finally {
        for (const { request } of held) request.destroy();
      }
      for (const { answered } of held) await answered;
      // A client gone mid-body ends its request on the server too: it holds no place.
      await eventually('the cut uploads ended', async () =>
        server.services.usersImports.uploadsReading(server.tenant.id) === 0 ? true : undefined,
      );
      // Their places are given back once they end, refused or not.
      const allowed = await eventually('room again', async () => {
        const response = await upload(server, {
          users: file([{ email: 'fourth@example.com' }]),
          connection_id: connectionId,
        });
        return response.statusCode === 201 ? response : undefined;
      });
      await finished(server, allowed.json().id);
    });

    it('takes only multipart bodies, and no other route takes them', async () => {
      const json = await server.request({
        method: 'POST',
        url: '/api/v2/jobs/users-imports',
        payload: { users: '[]', connection_id: connectionId },
      });
      assert.equal(json.statusCode, 400);
      assert.match(json.json().message, /multipart\/form-data/);
      const { payload, contentType } = await multipart({ email: 'x@example.com', connection: DEFAULT, password: 'x' });
      const users = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload,
        headers: { 'content-type': contentType },
      });
      assert.equal(users.statusCode, 415);
      const noBoundary = await server.request({
        method: 'POST',
        url: '/api/v2/jobs/users-imports',
        payload: 'x',
        headers: { 'content-type': 'multipart/form-data' },
      });
      assert.equal(noBoundary.statusCode, 400);
      assert.match(noBoundary.json().message, /multipart body could not be read/);
    });

    it('needs a token with create:users to import, and hides other tenants’ jobs', async () => {
      const parts = { users: file([{ email: 'ivy@example.com' }]), connection_id: connectionId };
      assert.equal((await upload(server, parts, { token: null })).statusCode, 401);
      const reader = await server.clientWithScopes(['read:users']);
      const refused = await upload(server, parts, { token: reader.token });
      assert.equal(refused.statusCode, 403);
      assert.deepEqual(await leftovers(server).then((l) => l.chunks), 0);

      const created = await upload(server, parts);
      assert.equal(created.statusCode, 201);
      const id = created.json().id as string;
      await finished(server, id);
      // read:users may read the job and its errors.
      assert.equal(
        (await server.request({ method: 'GET', url: `/api/v2/jobs/${id}`, token: reader.token })).statusCode,
        200,
      );
      const other = await server.addTenant(`other-${kind}`, `other-${kind}.test`);
      for (const url of [`/api/v2/jobs/${id}`, `/api/v2/jobs/${id}/errors`]) {
        const response = await server.request({
          method: 'GET',
          url,
          token: other.token,
          headers: { host: `other-${kind}.test` },
        });
        assert.equal(response.statusCode, 404, url);
        assert.equal(response.json().errorCode, 'inexistent_job');
      }
      // Another tenant's connection id is as unknown as one that never existed.
      const otherConnection = await server.services.connections.byName(other.tenant.id, DEFAULT);
      const foreign = await upload(server, {
        users: file([{ email: 'x@example.com' }]),
        connection_id: otherConnection!.id,
      });
      assert.equal(foreign.statusCode, 400);
      assert.match(foreign.json().message, /connection does not exist/);
    });
  });

  describe(`users-import errors of large records (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind, { USERS_IMPORT_MAX_BYTES: String(64 * 1024 * 1024) });
    });
    after(() => server.close());

    it('reads refused records of a megabyte a few at a time, never 32 of them at once', async () => {
      // Each page is held while its reader reads it: a client that stops reading must not hold 32 MB.
      const store = (server.services.usersImports as unknown as { store: UsersImportStore }).store;
      const read = store.errors.bind(store);
      const pages: number[] = [];
      store.errors = async (jobId, after, limit) => {
        const rows = await read(jobId, after, limit);
        pages.push(rows.reduce((bytes, row) => bytes + row.record.length + row.errors.length, 0));
        return rows;
      };
      const nickname = 'n'.repeat(1_000_000);
      const users = Array.from({ length: 40 }, (_, i) => ({ email: `large-${i}`, nickname }));
      const created = await upload(server, {
        users: file(users),
        connection_id: (await server.services.connections.byName(server.tenant.id, DEFAULT))!.id,
      });
      assert.equal(created.statusCode, 201, created.body);
      const id = created.json().id as string;
      const job = (await finished(server, id)) as unknown as { summary: { failed: number } };
      assert.equal(job.summary.failed, 40);

      pages.length = 0;
      const response = await server.request({ method: 'GET', url: `/api/v2/jobs/${id}/errors` });
      assert.equal(response.statusCode, 200);
      const errors = response.json() as Array<{ user: { email: string; nickname: string } }>;
      assert.deepEqual(
        errors.map((e) => [e.user.email, e.user.nickname.length]),
        users.map((u) => [u.email, nickname.length]),
      );
      assert.ok(Math.max(...pages) <= 4 * 1_000_200, `pages of ${pages.join(', ')} bytes`);
      store.errors = read;
    });
  });
}
