import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ManagementClient } from 'auth0';
import { createTenantry, type Snapshot, type Tenantry } from '../../src/index.ts';
import { createTestDatabase, databaseKinds, type TestDatabase } from '../helpers/databases.ts';
import type { TableRows } from '../../src/snapshots/store.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';

/** A snapshot's rows: opaque to the package's users, read here to check what a reset put back. */
const rowsOf = (snapshot: Snapshot) => (snapshot as unknown as { rows: TableRows }).rows;

const sdkOf = (t: Tenantry) =>
  new ManagementClient({ domain: new URL(t.url).host, clientId: t.clientId, clientSecret: t.clientSecret });

const newUser = (email: string) => ({
  connection: 'Username-Password-Authentication',
  email,
  password: 'correct horse battery',
});

describe('createTenantry: an embedded server in memory, driven by the official SDK', () => {
  let first: Tenantry;
  let second: Tenantry;
  before(async () => {
    // How fast they start is measured by `npm run bench -- embedded`, not here.
    first = await createTenantry();
    second = await createTenantry();
  });
  after(async () => {
    await first?.close();
    await second?.close();
  });

  it('starts on a free port, over HTTPS the global fetch trusts', async () => {
    assert.match(first.url, /^https:\/\/localhost:\d+$/);
    assert.notEqual(first.url, second.url);
    assert.equal(first.issuer, `https://${first.domain}/`);
    assert.equal(first.audience, `https://${first.domain}/api/v2/`);
    assert.match(first.ca ?? '', /BEGIN CERTIFICATE/);
    // Public hosts stay trusted: the system roots are kept beside the development CA.
    const health = await fetch(`${first.url}/health`);
    assert.equal(health.status, 200);
  });

  it('keeps instances apart: a user created in one is absent from the other', async () => {
    const created = await sdkOf(first).users.create(newUser('only-in-first@example.com'));
    assert.ok(created.user_id);
    assert.equal((await sdkOf(first).users.listUsersByEmail({ email: 'only-in-first@example.com' })).length, 1);
    assert.deepEqual(await sdkOf(second).users.listUsersByEmail({ email: 'only-in-first@example.com' }), []);
    // The other instance's credentials are unknown here.
    const crossed = new ManagementClient({
      domain: second.domain,
      clientId: first.clientId,
      clientSecret: first.clientSecret,
    });
    await assert.rejects(
      crossed.users.listUsersByEmail({ email: 'x@example.com' }),
      /401|invalid_client|Unauthorized/i,
    );
  });

  it('issues tokens the API accepts, narrowed to the scopes asked', async () => {
    const readOnly = await first.token(['read:users']);
    const read = await fetch(`${first.url}/api/v2/users-by-email?email=a@example.com`, {
      headers: { authorization: `Bearer ${readOnly}` },
    });
    assert.equal(read.status, 200);
    const write = await fetch(`${first.url}/api/v2/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${readOnly}`, 'content-type': 'application/json' },
      body: JSON.stringify(newUser('denied@example.com')),
    });
    assert.equal(write.status, 403);
    await assert.rejects(first.token(['read:nonsense']), /unknown scope/);
  });

  it('reset() returns to the start-up state without a restart: the same URL and credentials keep working', async () => {
    const sdk = sdkOf(first);
    await sdk.users.create(newUser('before-reset@example.com'));
    const url = first.url;
    await first.reset();
    assert.equal(first.url, url);
    assert.deepEqual(await sdk.users.listUsersByEmail({ email: 'before-reset@example.com' }), []);
    assert.deepEqual(await sdk.users.listUsersByEmail({ email: 'only-in-first@example.com' }), []);
    // The other instance was not reset.
    await second.reset();
    await sdkOf(second).users.create(newUser('second@example.com'));
    await first.reset();
    assert.equal((await sdkOf(second).users.listUsersByEmail({ email: 'second@example.com' })).length, 1);
  });

  it('restore() brings back rows deleted after the snapshot and drops rows added after it', async () => {
    const sdk = sdkOf(first);
    const kept = await sdk.users.create(newUser('kept@example.com'));
    const saved = await first.snapshot();
    await sdk.users.delete(kept.user_id!);
    await sdk.users.create(newUser('added-later@example.com'));
    assert.deepEqual(await sdk.users.listUsersByEmail({ email: 'kept@example.com' }), []);
    await first.restore(saved);
    assert.deepEqual(
      (await sdk.users.listUsersByEmail({ email: 'kept@example.com' })).map((u) => u.user_id),
      [kept.user_id],
    );
    assert.deepEqual(await sdk.users.listUsersByEmail({ email: 'added-later@example.com' }), []);
    // A snapshot can be restored again, after further changes.
    await sdk.users.delete(kept.user_id!);
    await first.restore(saved);
    assert.equal((await sdk.users.listUsersByEmail({ email: 'kept@example.com' })).length, 1);
    await assert.rejects(first.restore({} as never), /snapshot\(\) returned/);
  });

  it('restore() drops the webhook deliveries queued after the snapshot, with the workers running', async () => {
    const t = await createTenantry({ settings: { DELIVERY_ALLOW_HTTP: 'true' } });
    try {
      const headers = { authorization: `Bearer ${await t.token()}`, 'content-type': 'application/json' };
      const api = (path: string, init: RequestInit = {}) => fetch(`${t.url}/api/v2${path}`, { headers, ...init });
      // Nothing listens on port 9: every attempt fails and is retried, so deliveries stay queued.
      const stream = (await (
        await api('/event-streams', {
          method: 'POST',
          body: JSON.stringify({
            name: 'hooks',
            subscriptions: [{ event_type: 'user.created' }],
            destination: {
              type: 'webhook',
              configuration: {
                webhook_endpoint: 'http://127.0.0.1:9/hook',
                webhook_authorization: { method: 'bearer', token: 'hook-token' },
              },
            },
          }),
        })
      ).json()) as { id: string };
      const saved = await t.snapshot();
      const created = await api('/users', { method: 'POST', body: JSON.stringify(newUser('hooked@example.com')) });
      assert.equal(created.status, 201);
      // Read from the database itself: the API lists only failed deliveries.
      const deliveries = async () => rowsOf(await t.snapshot()).deliveries.length;
      assert.equal(await deliveries(), 1);
      await t.restore(saved);
      assert.equal(await deliveries(), 0);
      await t.reset();
      assert.equal((await api(`/event-streams/${stream.id}`)).status, 404);
    } finally {
      await t.close();
    }
  });

  it('restore() brings back a delivery that was in flight at the snapshot without its lease: it is sent again at once', async () => {
    const receiver = await startWebhookReceiver();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let first = true;
    receiver.beforeAnswer(async () => {
      if (!first) return;
      first = false;
      await held;
    });
    // A lease far longer than the test waits: a restored lease would hold the delivery back that long.
    const t = await createTenantry({
      settings: { DELIVERY_ALLOW_HTTP: 'true', DELIVERY_LEASE_MS: '120000', DELIVERY_TIMEOUT_MS: '60000' },
    });
    try {
      const headers = { authorization: `Bearer ${await t.token()}`, 'content-type': 'application/json' };
      const api = (path: string, init: RequestInit = {}) => fetch(`${t.url}/api/v2${path}`, { headers, ...init });
      const stream = await api('/event-streams', {
        method: 'POST',
        body: JSON.stringify({
          name: 'in flight',
          subscriptions: [{ event_type: 'user.created' }],
          destination: {
            type: 'webhook',
            configuration: {
              webhook_endpoint: receiver.url,
              webhook_authorization: { method: 'bearer', token: 'hook-token' },
            },
          },
        }),
      });
      assert.equal(stream.status, 201);
      const created = await api('/users', { method: 'POST', body: JSON.stringify(newUser('in-flight@example.com')) });
      assert.equal(created.status, 201);
      await receiver.waitFor((requests) => requests.length === 1, 10_000);
      // The send is held by the endpoint: the delivery is leased now, and the snapshot holds it without.
      const saved = await t.snapshot();
      const [delivery] = rowsOf(saved).deliveries;
      assert.deepEqual([delivery?.status, delivery?.claimed_until], ['pending', null]);
      release();
      await receiver.waitFor(() => true, 1_000);
      await t.restore(saved);
      const again = await receiver.waitFor((requests) => requests.length === 2, 10_000);
      assert.equal(again[1]!.json().id, again[0]!.json().id, 'the same event, sent again');
    } finally {
      release();
      await t.close();
      await receiver.close();
    }
  });

  it('refills the rate-limit buckets on reset(): refused client authentications do not outlive it', async () => {
    const t = await createTenantry({ settings: { TOKEN_FAILURES_PER_CLIENT_PER_MINUTE: '1' } });
    try {
      const attempt = (secret: string) =>
        fetch(`${t.url}/oauth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            grant_type: 'client_credentials',
            client_id: t.clientId,
            client_secret: secret,
            audience: t.audience,
          }),
        });
      assert.equal((await attempt('wrong-secret-wrong-secret-wrong-secret')).status, 401);
      // The bucket is empty: even the right secret is refused now.
      assert.equal((await attempt(t.clientSecret)).status, 429);
      await t.reset();
      assert.equal((await attempt(t.clientSecret)).status, 200);
    } finally {
      await t.close();
    }
  });

  it('reset() drops the emails queued after start-up', async () => {
    // No mail worker: the emails stay queued, as they would behind a slow mail server.
    const t = await createTenantry({ settings: { MAIL_WORKER: 'false' } });
    try {
      const created = await fetch(`${t.url}/api/v2/users`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await t.token()}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ...newUser('verify-me@example.com'), verify_email: true }),
      });
      assert.equal(created.status, 201, await created.clone().text());
      assert.equal(rowsOf(await t.snapshot()).email_outbox.length, 1);
      await t.reset();
      assert.equal(rowsOf(await t.snapshot()).email_outbox.length, 0);
    } finally {
      await t.close();
    }
  });

  it('keeps a database in a directory across a restart on the same port, with the same credentials', async () => {
    const dir = fs.mkdtempSync(`${os.tmpdir()}/kept-`);
    try {
      const t = await createTenantry({ database: dir });
      try {
        await sdkOf(t).users.create(newUser('kept-on-disk@example.com'));
      } finally {
        await t.close();
      }
      assert.ok(fs.existsSync(`${dir}/tenantry.sqlite`));
      const again = await createTenantry({ database: dir, port: Number(new URL(t.url).port) });
      try {
        assert.equal(again.clientId, t.clientId);
        assert.equal(again.clientSecret, t.clientSecret);
        assert.equal((await sdkOf(again).users.listUsersByEmail({ email: 'kept-on-disk@example.com' })).length, 1);
      } finally {
        await again.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes no files for an in-memory database, and removes its temporary directory at close', async () => {
    // A temporary directory of this test's own: other processes (test runs beside this one) create
    // and remove directories in the system's at any time.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'embed-tmpdir-'));
    const systemTmp = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    let t: Tenantry | undefined;
    try {
      t = await createTenantry({ https: false });
      const during = fs.readdirSync(tmp);
      assert.equal(during.length, 1);
      assert.match(during[0]!, /^tenantry-/);
      assert.deepEqual(fs.readdirSync(path.join(tmp, during[0]!)), []);
      assert.match(t.url, /^http:\/\/localhost:\d+$/);
      assert.equal(t.ca, undefined);
      assert.equal((await fetch(`${t.url}/health`)).status, 200);
      await t.close();
      assert.deepEqual(fs.readdirSync(tmp), []);
    } finally {
      if (systemTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = systemTmp;
      // A failed assertion above must not leave a server keeping this process alive.
      await t?.close();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});

for (const kind of databaseKinds().filter((k) => k === 'postgres')) {
  describe(`createTenantry on ${kind}`, () => {
    let database: TestDatabase;
    let t: Tenantry;
    before(async () => {
      database = await createTestDatabase(kind);
      t = await createTenantry({ database: database.databaseUrl });
    });
    after(async () => {
      await t?.close();
      await database?.drop();
    });

    it('snapshots and restores on PostgreSQL too', async () => {
      const sdk = sdkOf(t);
      const kept = await sdk.users.create(newUser('pg-kept@example.com'));
      const saved = await t.snapshot();
      await sdk.users.delete(kept.user_id!);
      await t.restore(saved);
      assert.equal((await sdk.users.listUsersByEmail({ email: 'pg-kept@example.com' })).length, 1);
      await t.reset();
      assert.deepEqual(await sdk.users.listUsersByEmail({ email: 'pg-kept@example.com' }), []);
    });
  });
}
