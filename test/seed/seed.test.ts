import assert from 'node:assert/strict';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ManagementClient } from 'auth0';
import { createTenantry, type Tenantry } from '../../src/index.ts';
import type { Seed } from '../../src/seed/schema.ts';
import { STARTER_SEED } from '../../src/cli/seed.ts';
import { runCli } from '../helpers/cli.ts';
import { startServerProcess } from '../helpers/server-process.ts';
import { startWebhookReceiver, verifies } from '../helpers/webhook-receiver.ts';

const ADMIN = { client_id: 'seeded-admin', client_secret: 'seeded-admin-secret-0123456789abcdefghij' };
const READER = { client_id: 'reader', client_secret: 'reader-secret-0123456789abcdefghijklmnop' };

const seed: Seed = {
  tenants: [
    {
      id: 'default',
      admin: ADMIN,
      clients: [{ name: 'Reader', ...READER, scopes: ['read:users'] }],
      users: [
        { email: 'Jane@Example.com', password: 'correct horse battery staple', user_metadata: { plan: 'pro' } },
        {
          user_id: 'google-oauth2|1234',
          email: 'john@example.com',
          identities: [{ provider: 'google-oauth2', user_id: '1234', connection: 'google-oauth2', isSocial: true }],
        },
      ],
      captcha: {
        active_provider_id: 'hcaptcha',
        hcaptcha: { site_key: 'seeded-site-key', secret: 'seeded-hcaptcha-secret' },
      },
      email_templates: [{ template: 'verify_email', subject: 'Seeded: verify {{ user.email }}', enabled: true }],
      custom_domains: [
        { domain: 'login.example.test', type: 'svc_managed_certs', ready: true },
        { domain: 'pending.example.test', type: 'svc_managed_certs' },
      ],
      segments: [{ name: 'Europe', rules: [{ match: { country: ['FR', 'DE'] } }] }],
      event_streams: [
        {
          name: 'users',
          subscriptions: [{ event_type: 'user.created' }],
          destination: {
            type: 'webhook',
            configuration: {
              webhook_endpoint: 'http://127.0.0.1:9/hooks',
              webhook_authorization: { method: 'bearer', token: 'webhook-token' },
            },
          },
        },
      ],
    },
    {
      id: 'acme',
      domain: 'acme.localhost:{port}',
      clients: [{ name: 'Acme admin', ...ADMIN, client_id: 'acme-admin', scopes: 'all' }],
    },
  ],
};

/** A request on another Host than the one connected to: how a second tenant on the same port is reached. */
function onHost(t: Tenantry, host: string, urlPath: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = https.request(
      {
        host: '127.0.0.1',
        port: new URL(t.url).port,
        path: urlPath,
        servername: 'localhost',
        ca: t.ca,
        headers: { host, authorization: `Bearer ${token}` },
      },
      (response) => {
        let body = '';
        response.on('data', (chunk) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      },
    );
    request.on('error', reject);
    request.end();
  });
}

describe('seeds: tenants, clients, users and event streams declared up front', () => {
  let t: Tenantry;
  before(async () => {
    // Webhooks to a local receiver, as tests do (no DNS, no public address).
    t = await createTenantry({ seed, settings: { DELIVERY_ALLOW_HTTP: 'true' } });
  });
  after(() => t?.close());

  const sdk = (clientId: string, clientSecret: string) =>
    new ManagementClient({ domain: t.domain, clientId, clientSecret });

  it("returns the first tenant's seeded admin client, and the seeded users are there", async () => {
    assert.equal(t.clientId, ADMIN.client_id);
    assert.equal(t.clientSecret, ADMIN.client_secret);
    const admin = sdk(t.clientId, t.clientSecret);
    const [jane] = await admin.users.listUsersByEmail({ email: 'jane@example.com' });
    assert.deepEqual(jane?.user_metadata, { plan: 'pro' });
    const john = await admin.users.get('google-oauth2|1234');
    assert.equal(john.email, 'john@example.com');
  });

  it('gives seeded clients exactly their scopes', async () => {
    const reader = sdk(READER.client_id, READER.client_secret);
    assert.equal((await reader.users.listUsersByEmail({ email: 'jane@example.com' })).length, 1);
    await assert.rejects(
      reader.users.create({
        connection: 'Username-Password-Authentication',
        email: 'x@example.com',
        password: 'a b c d e f',
      }),
      /403|Insufficient scope/i,
    );
  });

  it('creates the event streams and segments', async () => {
    const token = await t.token();
    const { eventStreams: streams } = (await (
      await fetch(`${t.url}/api/v2/event-streams`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { eventStreams: Array<{ name: string }> };
    assert.deepEqual(
      streams.map((s) => s.name),
      ['users'],
    );
    const segments = (await (
      await fetch(`${t.url}/api/v2/experimentation/segments`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { segments: Array<{ name: string }> };
    assert.deepEqual(
      segments.segments.map((s) => s.name),
      ['Europe'],
    );
  });

  it('serves the second tenant on its own domain, {port} replaced, with its own clients only', async () => {
    const domain = t.domain.replace('localhost', 'acme.localhost');
    const tokenResponse = await new Promise<string>((resolve, reject) => {
      const body = JSON.stringify({
        grant_type: 'client_credentials',
        client_id: 'acme-admin',
        client_secret: ADMIN.client_secret,
        audience: `https://${domain}/api/v2/`,
      });
      const request = https.request(
        {
          host: '127.0.0.1',
          port: new URL(t.url).port,
          path: '/oauth/token',
          method: 'POST',
          servername: 'localhost',
          ca: t.ca,
          headers: { host: domain, 'content-type': 'application/json' },
        },
        (response) => {
          let text = '';
          response.on('data', (chunk) => (text += chunk));
          response.on('end', () => resolve(text));
        },
      );
      request.on('error', reject);
      request.end(body);
    });
    const token = (JSON.parse(tokenResponse) as { access_token: string }).access_token;
    assert.ok(token, tokenResponse);
    const acme = await onHost(t, domain, '/api/v2/users-by-email?email=jane@example.com', token);
    assert.equal(acme.status, 200);
    assert.deepEqual(JSON.parse(acme.body), []);
    // The first tenant's admin is not a client of acme.
    assert.equal((await onHost(t, domain, '/api/v2/users-by-email?email=a@b.c', await t.token())).status, 401);
  });

  it('sets the CAPTCHA provider and the email template, secrets kept out of the answers', async () => {
    const headers = { authorization: `Bearer ${await t.token()}` };
    const captchaResponse = await fetch(`${t.url}/api/v2/attack-protection/captcha`, { headers });
    const captcha = (await captchaResponse.json()) as { active_provider_id: string; hcaptcha?: { site_key: string } };
    assert.equal(captcha.active_provider_id, 'hcaptcha');
    assert.equal(captcha.hcaptcha?.site_key, 'seeded-site-key');
    assert.doesNotMatch(JSON.stringify(captcha), /seeded-hcaptcha-secret/);
    const template = (await (await fetch(`${t.url}/api/v2/email-templates/verify_email`, { headers })).json()) as {
      subject: string;
    };
    assert.equal(template.subject, 'Seeded: verify {{ user.email }}');
  });

  it('serves the tenant on its custom domain seeded ready, and not on the pending one', async () => {
    const port = new URL(t.url).port;
    const ready = await onHost(t, `login.example.test:${port}`, '/.well-known/openid-configuration', 'none');
    assert.equal(ready.status, 200, ready.body);
    assert.match((JSON.parse(ready.body) as { issuer: string }).issuer, /^https:\/\/login\.example\.test/);
    const pending = await onHost(t, `pending.example.test:${port}`, '/.well-known/openid-configuration', 'none');
    assert.equal(pending.status, 404, pending.body);
  });

  it('answers on a custom domain again once a restore brings it back (no cached "no tenant here")', async () => {
    const port = new URL(t.url).port;
    const host = `login.example.test:${port}`;
    const token = await t.token();
    const saved = await t.snapshot();
    const list = (await (
      await fetch(`${t.url}/api/v2/custom-domains`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as Array<{
      custom_domain_id: string;
      domain: string;
    }>;
    const login = list.find((d) => d.domain === 'login.example.test')!;
    const deleted = await fetch(`${t.url}/api/v2/custom-domains/${login.custom_domain_id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(deleted.status, 204);
    // Looked up (and its absence cached) while deleted…
    assert.equal((await onHost(t, host, '/.well-known/openid-configuration', 'none')).status, 404);
    await t.restore(saved);
    // …and served at once after the restore.
    assert.equal((await onHost(t, host, '/.well-known/openid-configuration', 'none')).status, 200);
  });

  it('reset() returns to the seeded state: a deleted seeded user is back', async () => {
    const admin = sdk(t.clientId, t.clientSecret);
    await admin.users.delete('google-oauth2|1234');
    await assert.rejects(admin.users.get('google-oauth2|1234'), /404|does not exist/i);
    await t.reset();
    assert.equal((await admin.users.get('google-oauth2|1234')).email, 'john@example.com');
  });
});

describe("a seeded stream's signing secret", () => {
  const SIGNING_SECRET = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;

  it('signs deliveries with the seeded secret, again after a rotation and reset()', async () => {
    const receiver = await startWebhookReceiver();
    const t = await createTenantry({
      https: false,
      settings: { DELIVERY_ALLOW_HTTP: 'true', DELIVERY_POLL_MS: '20' },
      seed: {
        tenants: [
          {
            id: 'default',
            event_streams: [
              {
                name: 'signed',
                subscriptions: [{ event_type: 'user.created' }],
                destination: {
                  type: 'webhook',
                  configuration: {
                    webhook_endpoint: receiver.url,
                    webhook_authorization: { method: 'bearer', token: 'signed-webhook-token' },
                  },
                },
                signing_secret: SIGNING_SECRET,
              },
            ],
          },
        ],
      },
    });
    try {
      const headers = { authorization: `Bearer ${await t.token()}`, 'content-type': 'application/json' };
      const createUser = (email: string) =>
        fetch(`${t.url}/api/v2/users`, {
          method: 'POST',
          headers,
          body: JSON.stringify({
            connection: 'Username-Password-Authentication',
            email,
            password: 'correct horse battery',
            verify_email: false,
          }),
        });
      const { eventStreams } = (await (await fetch(`${t.url}/api/v2/event-streams`, { headers })).json()) as {
        eventStreams: Array<{ id: string }>;
      };
      // Rotated away (no overlap): deliveries are signed with the new secret only…
      const rotated = await fetch(`${t.url}/api/v2/event-streams/${eventStreams[0]!.id}/signing-secrets`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ overlap_seconds: 0 }),
      });
      assert.equal(rotated.status, 201);
      const fresh = ((await rotated.json()) as { secret: string }).secret;
      assert.equal((await createUser('before-reset@example.com')).status, 201);
      const [first] = await receiver.waitFor((requests) => requests.length === 1);
      assert.ok(verifies(first!.headers, first!.body, fresh));
      assert.ok(!verifies(first!.headers, first!.body, SIGNING_SECRET));

      // …and reset() brings the seeded one back, as a receiver configured with it expects.
      await t.reset();
      assert.equal((await createUser('after-reset@example.com')).status, 201);
      const requests = await receiver.waitFor((all) => all.length === 2);
      const delivered = requests[1]!;
      assert.equal(delivered.headers.authorization, 'Bearer signed-webhook-token');
      assert.equal(delivered.json().data.object.email, 'after-reset@example.com');
      assert.ok(verifies(delivered.headers, delivered.body, SIGNING_SECRET));
      assert.ok(!verifies(delivered.headers, delivered.body, fresh));
    } finally {
      await t.close();
      await receiver.close();
    }
  });

  it('refuses a signing secret Standard Webhooks libraries would not take, naming it', async () => {
    const stream = (signing_secret: string) => ({
      tenants: [
        {
          id: 'default',
          event_streams: [
            {
              name: 'signed',
              destination: {
                type: 'webhook' as const,
                configuration: {
                  webhook_endpoint: 'https://hooks.example.com/x',
                  webhook_authorization: { method: 'bearer' as const, token: 'x' },
                },
              },
              signing_secret,
            },
          ],
        },
      ],
    });
    for (const bad of ['not-whsec', `whsec_${Buffer.alloc(8).toString('base64')}`, 'whsec_%%%%']) {
      await assert.rejects(
        createTenantry({ seed: stream(bad) }),
        /tenants\[0\]\.event_streams\[0\]\.signing_secret: must be whsec_ and the base64 of a 24 to 64 byte key/,
        bad,
      );
    }
  });
});

describe('invalid seeds fail at start, naming the bad member', () => {
  it('names the member the schema refuses, before anything is created', async () => {
    // A temporary directory of this test's own: other processes create directories in the system's.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'seed-tmpdir-'));
    const systemTmp = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    try {
      const bad = structuredClone(seed);
      bad.tenants[0]!.users![1]!.email = 'not an email';
      await assert.rejects(createTenantry({ seed: bad }), /tenants\[0\]\.users\[1\]\.email: must match format "email"/);
      const unknown = { tenants: [{ id: 'default', clients: [{ name: 'x', scopes: 'all', secret: 'x' }] }] };
      await assert.rejects(
        createTenantry({ seed: unknown as never }),
        /tenants\[0\]\.clients\[0\]: .*additional.*\(secret\)/,
      );
      await assert.rejects(createTenantry({ seed: { tenants: [] } }), /tenants: must NOT have fewer than 1 items/);
      // Half of a surrogate pair, which a text column would store as U+FFFD: in an object or a YAML file
      // (its escapes \ud800 and \U0000DC00 both make one).
      const lone = structuredClone(seed);
      lone.tenants[0]!.segments![0]!.name = 'Eu\ud800rope';
      await assert.rejects(
        createTenantry({ seed: lone }),
        /tenants\[0\]\.segments\[0\]\.name: a string holds a lone UTF-16 surrogate/,
      );
      const yamlFile = path.join(tmp, 'lone.yaml');
      fs.writeFileSync(
        yamlFile,
        'tenants:\n  - id: default\n    segments:\n      - name: "Eu\\U0000DC00rope"\n        rules: [{ match: { country: ["FR"] } }]\n',
      );
      await assert.rejects(
        createTenantry({ seed: yamlFile }),
        /lone\.yaml: tenants\[0\]\.segments\[0\]\.name: a string holds a lone UTF-16 surrogate/,
      );
      fs.rmSync(yamlFile);
      await assert.rejects(
        createTenantry({ seed: { tenants: [{ id: 'one' }, { id: 'one', domain: 'b.test' }] } }),
        /tenants\[1\]\.id: "one" is declared twice/,
      );
      assert.deepEqual(fs.readdirSync(tmp), [], 'nothing is left behind');
    } finally {
      if (systemTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = systemTmp;
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('refuses a self-managed custom domain seeded ready', async () => {
    const bad: Seed = {
      tenants: [
        { id: 'default', custom_domains: [{ domain: 'x.example.test', type: 'self_managed_certs', ready: true }] },
      ],
    };
    await assert.rejects(
      createTenantry({ seed: bad }),
      /tenants\[0\]\.custom_domains\[0\]: ready is for svc_managed_certs/,
    );
  });

  it('names the member a service refuses while applying it', async () => {
    const bad: Seed = { tenants: [{ id: 'default', clients: [{ name: 'x', scopes: ['read:nonsense'] }] }] };
    await assert.rejects(
      createTenantry({ seed: bad }),
      /seed: tenants\[0\]\.clients\[0\]: unknown scopes: read:nonsense/,
    );
  });

  it('reads YAML files, and names the file of a bad one', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seed-test-'));
    try {
      const good = path.join(dir, 'tenantry.seed.yaml');
      fs.writeFileSync(good, STARTER_SEED);
      const t = await createTenantry({ seed: good, https: false });
      try {
        assert.equal(t.clientId, 'test-admin');
        const token = await t.token(['read:users']);
        const found = await fetch(`${t.url}/api/v2/users-by-email?email=jane@example.com`, {
          headers: { authorization: `Bearer ${token}` },
        });
        assert.equal(((await found.json()) as unknown[]).length, 1);
      } finally {
        await t.close();
      }
      const broken = path.join(dir, 'broken.yaml');
      fs.writeFileSync(broken, 'tenants:\n  - id: default\n    users:\n      - email: [\n');
      await assert.rejects(createTenantry({ seed: broken }), (error: Error) => error.message.includes(broken));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('tenantry seed init and serve --seed', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seed-cli-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('writes a starter seed once, and serve refuses a bad seed before starting, naming the member', async () => {
    const env = { PATH: process.env.PATH ?? '', DATA_DIR: path.join(dir, 'data') };
    const file = path.join(dir, 'tenantry.seed.yaml');
    const init = await runCli(env, ['seed', 'init', '--file', file]);
    assert.equal(init.code, 0, init.stderr);
    assert.equal(fs.readFileSync(file, 'utf8'), STARTER_SEED);
    const again = await runCli(env, ['seed', 'init', '--file', file]);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /exists already/);

    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(
      bad,
      JSON.stringify({ tenants: [{ id: 'default', users: [{ email: 'jane@example.com', age: 3 }] }] }),
    );
    const refused = await runCli(env, ['serve', '--seed', bad]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /bad\.json: tenants\[0\]\.users\[0\]: must NOT have additional properties \(age\)/);
    assert.equal(fs.existsSync(path.join(dir, 'data')), false, 'nothing was started');
  });
});

describe('tenantry serve --seed, in memory, with the development endpoints', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seed-serve-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('serves the seeded tenant, resets it over HTTP, and writes nothing to DATA_DIR', async () => {
    const file = path.join(dir, 'tenantry.seed.yaml');
    fs.writeFileSync(file, STARTER_SEED);
    const dataDir = path.join(dir, 'data');
    const operatorToken = 'serve-operator-token-0123456789abcdefgh';
    const server = await startServerProcess(
      { kind: 'sqlite', dataDir, databaseUrl: undefined, drop: async () => undefined },
      {
        SQLITE_MEMORY: 'true',
        ENCRYPTION_KEY: '',
        TENANTRY_DEV_ENDPOINTS: 'true',
        TENANTRY_OPERATOR_TOKEN: operatorToken,
      },
      { args: ['--seed', file], readyWithinMs: 30_000 },
    );
    try {
      const token = async () => {
        const response = await fetch(`${server.base}/oauth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            grant_type: 'client_credentials',
            client_id: 'test-admin',
            client_secret: 'test-admin-secret-change-me-0123456789',
            audience: 'https://process.test/api/v2/',
          }),
        });
        assert.equal(response.status, 200, await response.clone().text());
        return ((await response.json()) as { access_token: string }).access_token;
      };
      const headers = { authorization: `Bearer ${await token()}`, 'content-type': 'application/json' };
      const byEmail = async (email: string) =>
        (await (await fetch(`${server.base}/api/v2/users-by-email?email=${email}`, { headers })).json()) as unknown[];
      assert.equal((await byEmail('jane@example.com')).length, 1);
      const created = await fetch(`${server.base}/api/v2/users`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          connection: 'Username-Password-Authentication',
          email: 'new@example.com',
          password: 'correct horse battery',
          // No verification email: the development mailbox is DATA_DIR/mailbox even in memory, and whether
          // its worker sent the email before the reset below is a matter of timing.
          verify_email: false,
        }),
      });
      assert.equal(created.status, 201);
      const reset = (bearer: string) =>
        fetch(`${server.base}/_tenantry/reset`, { method: 'POST', headers: { authorization: `Bearer ${bearer}` } });
      assert.equal((await reset('wrong-token')).status, 401);
      assert.equal((await byEmail('new@example.com')).length, 1);
      assert.equal((await reset(operatorToken)).status, 204);
      assert.deepEqual(await byEmail('new@example.com'), []);
      assert.equal((await byEmail('jane@example.com')).length, 1);
      // In memory: no database file, no key file, no credentials file (the seed gave the secret).
      assert.deepEqual(fs.existsSync(dataDir) ? fs.readdirSync(dataDir) : [], []);
    } finally {
      await server.stop();
    }
  });
});

describe('tenantry serve without --seed: the seed file of the working directory', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seed-detect-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('applies tenantry.seed.json found in the directory it runs in', async () => {
    const detected: Seed = {
      tenants: [
        {
          id: 'default',
          admin: { client_id: 'detected-admin', client_secret: 'detected-admin-secret-0123456789abcdef' },
          users: [{ email: 'found@example.com', password: 'correct horse battery', user_metadata: { from: 'cwd' } }],
        },
      ],
    };
    fs.writeFileSync(path.join(dir, 'tenantry.seed.json'), JSON.stringify(detected));
    const server = await startServerProcess(
      { kind: 'sqlite', dataDir: path.join(dir, 'data'), databaseUrl: undefined, drop: async () => undefined },
      { SQLITE_MEMORY: 'true', ENCRYPTION_KEY: '' },
      { cwd: dir, readyWithinMs: 30_000 },
    );
    try {
      const response = await fetch(`${server.base}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          grant_type: 'client_credentials',
          client_id: 'detected-admin',
          client_secret: 'detected-admin-secret-0123456789abcdef',
          audience: 'https://process.test/api/v2/',
        }),
      });
      assert.equal(response.status, 200, await response.clone().text());
      const { access_token: token } = (await response.json()) as { access_token: string };
      const found = await fetch(`${server.base}/api/v2/users-by-email?email=found@example.com`, {
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(found.status, 200);
      const users = (await found.json()) as Array<{ user_metadata: unknown }>;
      assert.deepEqual(
        users.map((u) => u.user_metadata),
        [{ from: 'cwd' }],
      );
    } finally {
      await server.stop();
    }
  });
});
