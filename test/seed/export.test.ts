import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import YAML from 'yaml';
import { createTenantry } from '../../src/index.ts';
import type { Seed } from '../../src/seed/schema.ts';
import { SECRET_PLACEHOLDER } from '../../src/seed/export.ts';
import { runCli } from '../helpers/cli.ts';

const SECRET = 'exported-admin-secret-0123456789abcdef';
const SIGNING_SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

describe('tenantry seed export: a tenant as a seed, secrets only when asked', () => {
  let dir: string;
  let env: Record<string, string>;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seed-export-'));
    env = { PATH: process.env.PATH ?? '', DATA_DIR: dir, LOG_LEVEL: 'silent' };
    // A database kept in a directory, which the command then reads as a server's.
    const t = await createTenantry({
      database: dir,
      https: false,
      settings: { DELIVERY_ALLOW_HTTP: 'true' },
      seed: {
        tenants: [
          {
            id: 'default',
            admin: { client_id: 'admin', client_secret: SECRET },
            users: [{ email: 'jane@example.com', password: 'correct horse battery', user_metadata: { plan: 'pro' } }],
            segments: [{ name: 'Europe', rules: [{ match: { country: ['FR'] } }] }],
            captcha: {
              active_provider_id: 'recaptcha_v2',
              recaptcha_v2: { site_key: 'site-key-1', secret: 'the-real-captcha-secret' },
            },
            email_templates: [
              {
                template: 'verify_email',
                subject: 'Welcome {{ user.email }}',
                body: '<p>Verify: {{ url }}</p>',
                enabled: true,
              },
            ],
            custom_domains: [
              { domain: 'login.example.com', type: 'svc_managed_certs', ready: true },
              { domain: 'pending.example.com', type: 'self_managed_certs' },
            ],
            event_streams: [
              {
                name: 'hooks',
                subscriptions: [{ event_type: 'user.created' }],
                destination: {
                  type: 'webhook',
                  configuration: {
                    webhook_endpoint: 'http://127.0.0.1:9/hooks',
                    webhook_authorization: { method: 'bearer', token: 'the-real-webhook-token' },
                  },
                },
                signing_secret: SIGNING_SECRET,
              },
              {
                name: 'quiet',
                destination: {
                  type: 'webhook',
                  configuration: {
                    webhook_endpoint: 'http://127.0.0.1:9/quiet',
                    webhook_authorization: { method: 'basic', username: 'hook', password: 'the-real-basic-password' },
                  },
                },
              },
            ],
          },
          { id: 'acme', domain: 'acme.localhost:{port}' },
          { id: 'fixed', domain: 'fixed.example.test' },
        ],
      },
    });
    // A change after the seed: the export is of the current state.
    await fetch(`${t.url}/api/v2/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await t.token()}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        connection: 'Username-Password-Authentication',
        email: 'later@example.com',
        password: 'correct horse battery',
      }),
    });
    await t.close();
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('writes users, clients, segments and streams without any secret; a start refuses its placeholders', async () => {
    const run = await runCli(env, ['seed', 'export', '--tenant', 'default']);
    assert.equal(run.code, 0, run.stderr);
    assert.doesNotMatch(
      run.stdout,
      /scrypt\$|the-real-webhook-token|exported-admin-secret|the-real-captcha-secret|the-real-basic-password|whsec_/,
    );
    const seed = YAML.parse(run.stdout) as Seed;
    const [tenant] = seed.tenants;
    // The server's own host (localhost:<its port>) is left out: re-seeded, the tenant follows the new port.
    assert.equal(tenant!.domain, undefined);
    assert.deepEqual(tenant!.users!.map((u) => u.email).sort(), ['jane@example.com', 'later@example.com']);
    assert.deepEqual(tenant!.users!.find((u) => u.email === 'jane@example.com')!.user_metadata, { plan: 'pro' });
    assert.deepEqual(
      tenant!.clients!.map((c) => c.client_id),
      ['admin'],
    );
    assert.equal(tenant!.segments![0]!.name, 'Europe');
    const stream = tenant!.event_streams!.find((s) => s.name === 'hooks')!;
    assert.equal(
      (stream.destination.configuration.webhook_authorization as { token: string }).token,
      SECRET_PLACEHOLDER,
    );
    assert.equal(stream.signing_secret, SECRET_PLACEHOLDER);

    // CAPTCHA with its secret as the placeholder, the tenant's own template, its domains (ready kept where it can be).
    assert.equal(tenant!.captcha!.active_provider_id, 'recaptcha_v2');
    assert.deepEqual(tenant!.captcha!.recaptcha_v2, { site_key: 'site-key-1', secret: SECRET_PLACEHOLDER });
    assert.deepEqual(
      tenant!.email_templates!.map((t) => [t.template, t.subject]),
      [['verify_email', 'Welcome {{ user.email }}']],
    );
    assert.deepEqual(tenant!.custom_domains, [
      { domain: 'login.example.com', type: 'svc_managed_certs', tls_policy: 'recommended', ready: true },
      { domain: 'pending.example.com', type: 'self_managed_certs' },
    ]);

    // A placeholder is never used as a secret: the start fails, naming the member to fill in (the first
    // stream in id order, either one).
    await assert.rejects(
      createTenantry({ seed, https: false, settings: { DELIVERY_ALLOW_HTTP: 'true' } }),
      /tenants\[0\]\.event_streams\[0\]\.destination\.configuration\.webhook_authorization\.(token|password): still the placeholder/,
    );
    const streamless = structuredClone(seed);
    delete streamless.tenants[0]!.event_streams;
    await assert.rejects(
      createTenantry({ seed: streamless, https: false }),
      /tenants\[0\]\.captcha\.recaptcha_v2\.secret: still the placeholder/,
    );
  });

  it('writes password hashes and the webhook, signing and CAPTCHA secrets with --with-secrets, to an owner-only file; the file starts a server as it is', async () => {
    const file = path.join(dir, 'export.yaml');
    const run = await runCli(env, ['seed', 'export', '--tenant', 'default', '--with-secrets', '--file', file]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const seed = YAML.parse(fs.readFileSync(file, 'utf8')) as Seed;
    const [tenant] = seed.tenants;
    assert.match(tenant!.users![0]!.password_hash ?? '', /^scrypt\$/);
    assert.equal(tenant!.domain, undefined);
    const stream = tenant!.event_streams!.find((s) => s.name === 'hooks')!;
    assert.deepEqual(stream.destination.configuration.webhook_authorization, {
      method: 'bearer',
      token: 'the-real-webhook-token',
    });
    assert.equal(stream.signing_secret, SIGNING_SECRET);
    // A stream without subscriptions or signing secret is written without them.
    const quiet = tenant!.event_streams!.find((s) => s.name === 'quiet')!;
    assert.deepEqual(quiet.destination.configuration.webhook_authorization, {
      method: 'basic',
      username: 'hook',
      password: 'the-real-basic-password',
    });
    assert.equal('subscriptions' in quiet || 'signing_secret' in quiet, false);
    assert.deepEqual(tenant!.captcha!.recaptcha_v2, { site_key: 'site-key-1', secret: 'the-real-captcha-secret' });
    assert.doesNotMatch(fs.readFileSync(file, 'utf8'), new RegExp(SECRET_PLACEHOLDER));

    // Re-applied, unedited, on a fresh server: it serves on its own URL (a new port), with the exported state.
    const t = await createTenantry({ seed: file, https: false, settings: { DELIVERY_ALLOW_HTTP: 'true' } });
    try {
      assert.equal(t.url, `http://localhost:${t.domain.split(':')[1]}`);
      const headers = { authorization: `Bearer ${await t.token()}` };
      const found = await fetch(`${t.url}/api/v2/users-by-email?email=later@example.com`, { headers });
      assert.equal(found.status, 200);
      assert.equal(((await found.json()) as unknown[]).length, 1);
      const domains = await fetch(`${t.url}/api/v2/custom-domains`, { headers });
      assert.deepEqual(
        ((await domains.json()) as Array<{ domain: string; status: string }>).map((d) => [d.domain, d.status]).sort(),
        [
          ['login.example.com', 'ready'],
          ['pending.example.com', 'pending_verification'],
        ],
      );
      const { eventStreams } = (await (await fetch(`${t.url}/api/v2/event-streams`, { headers })).json()) as {
        eventStreams: Array<{ id: string; name: string }>;
      };
      const signed = eventStreams.find((s) => s.name === 'hooks')!;
      const signing = await fetch(`${t.url}/api/v2/event-streams/${signed.id}/signing-secrets`, { headers });
      assert.equal(((await signing.json()) as { signing_secrets: unknown[] }).signing_secrets.length, 1);
    } finally {
      await t.close();
    }
  });

  it('makes an existing file owner-only when it writes secrets into it, through a link to it too, and writes a pipe through', async () => {
    // An earlier export without secrets left a file anyone may read.
    const file = path.join(dir, 'again.yaml');
    fs.writeFileSync(file, 'earlier\n', { mode: 0o644 });
    fs.chmodSync(file, 0o644);
    let run = await runCli(env, ['seed', 'export', '--tenant', 'default', '--with-secrets', '--file', file]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.match(fs.readFileSync(file, 'utf8'), /the-real-webhook-token/);
    // A link at the path: the file it points to is replaced by an owner-only one; the link stays.
    const target = path.join(dir, 'target.yaml');
    fs.writeFileSync(target, 'earlier\n', { mode: 0o644 });
    fs.chmodSync(target, 0o644);
    const link = path.join(dir, 'link.yaml');
    fs.symlinkSync(target, link);
    run = await runCli(env, ['seed', 'export', '--tenant', 'default', '--with-secrets', '--file', link]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(fs.lstatSync(link).isSymbolicLink(), true);
    assert.equal(fs.statSync(target).mode & 0o777, 0o600);
    assert.match(fs.readFileSync(target, 'utf8'), /the-real-webhook-token/);
    // A pipe (as `--file >(gpg …)` gives) is written through, and stays a pipe.
    const fifo = path.join(dir, 'export.fifo');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const read = new Promise<string>((resolve, reject) => {
      let text = '';
      fs.createReadStream(fifo, 'utf8')
        .on('data', (chunk) => (text += chunk))
        .on('end', () => resolve(text))
        .on('error', reject);
    });
    run = await runCli(env, ['seed', 'export', '--tenant', 'default', '--with-secrets', '--file', fifo]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(await read, /the-real-webhook-token/);
    assert.equal(fs.statSync(fifo).isFIFO(), true);
    // Without secrets, the file is written as any other: no temporary file is left beside any of them.
    run = await runCli(env, ['seed', 'export', '--tenant', 'default', '--file', file]);
    assert.equal(run.code, 0, run.stderr);
    assert.doesNotMatch(fs.readFileSync(file, 'utf8'), /the-real-webhook-token/);
    assert.deepEqual(
      fs.readdirSync(dir).filter((name) => name.endsWith('.tmp')),
      [],
    );
  });

  it("writes another domain on the server's port with {port}, and any other domain as it is", async () => {
    const acme = await runCli(env, ['seed', 'export', '--tenant', 'acme']);
    assert.equal(acme.code, 0, acme.stderr);
    assert.equal((YAML.parse(acme.stdout) as Seed).tenants[0]!.domain, 'acme.localhost:{port}');
    const fixed = await runCli(env, ['seed', 'export', '--tenant', 'fixed']);
    assert.equal(fixed.code, 0, fixed.stderr);
    assert.equal((YAML.parse(fixed.stdout) as Seed).tenants[0]!.domain, 'fixed.example.test');
  });

  it('refuses an unknown tenant', async () => {
    const run = await runCli(env, ['seed', 'export', '--tenant', 'nobody']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /no tenant "nobody"/);
  });
});
