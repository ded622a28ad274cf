import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const URL_PATH = '/api/v2/attack-protection/captcha';
const FRESH = { active_provider_id: 'auth_challenge', simple_captcha: {}, auth_challenge: { fail_open: false } };

for (const kind of databaseKinds()) {
  describe(`CAPTCHA configuration (${kind})`, () => {
    let server: TestServer;
    let logs = '';
    before(async () => {
      const logStream = new Writable({
        write(chunk, _encoding, done) {
          logs += String(chunk);
          done();
        },
      });
      // Debug logging so that a secret leaking into any log line would be caught.
      server = await startTestServer(kind, { LOG_LEVEL: 'debug' }, { logStream });
    });
    after(() => server.close());

    const get = (token?: string) => server.request({ method: 'GET', url: URL_PATH, token });
    const patch = (payload: Record<string, unknown>, token?: string) =>
      server.request({ method: 'PATCH', url: URL_PATH, payload, token });
    const storedRows = () =>
      server.services.database.db
        .selectFrom('captcha_providers')
        .selectAll()
        .where('tenant_id', '=', server.tenant.id)
        .orderBy('provider')
        .execute();

    it('gives a fresh tenant the documented default configuration', async () => {
      const response = await get();
      assert.equal(response.statusCode, 200);
      assert.equal(response.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(response.body, JSON.stringify(FRESH));
      // An empty body changes nothing and answers with the configuration.
      const empty = await patch({});
      assert.equal(empty.statusCode, 200);
      assert.equal(empty.body, JSON.stringify(FRESH));
      assert.deepEqual(await storedRows(), []);
    });

    it('needs read:attack_protection to read and update:attack_protection to change', async () => {
      const { token: reader } = await server.clientWithScopes(['read:attack_protection']);
      const { token: writer } = await server.clientWithScopes(['update:attack_protection']);
      assert.equal((await get(reader)).statusCode, 200);
      assert.equal((await patch({ auth_challenge: { fail_open: false } }, writer)).statusCode, 200);
      const cannotWrite = await patch({ auth_challenge: { fail_open: true } }, reader);
      assert.equal(cannotWrite.statusCode, 403);
      assert.deepEqual(cannotWrite.json(), {
        statusCode: 403,
        error: 'Forbidden',
        message: 'Insufficient scope, expected any of: update:attack_protection',
        errorCode: 'insufficient_scope',
      });
      const cannotRead = await get(writer);
      assert.equal(cannotRead.statusCode, 403);
      assert.equal(cannotRead.json().message, 'Insufficient scope, expected any of: read:attack_protection');
      assert.equal((await get()).json().auth_challenge.fail_open, false);
      assert.equal((await server.request({ method: 'GET', url: URL_PATH, token: null })).statusCode, 401);
    });

    it('keeps every provider stored on its own and answers in the original key order, without secrets', async () => {
      const setup = await patch({
        auth_challenge: { fail_open: true },
        recaptcha_enterprise: {
          site_key: 'updated-site-key-enterprise',
          api_key: 'enterprise-api-key-plain',
          project_id: 'updated-project-id-enterprise',
        },
        hcaptcha: { site_key: 'updated-site-key-hcaptcha', secret: 'hcaptcha-secret-plain' },
        friendly_captcha: { site_key: 'updated-site-key-friendly', secret: 'friendly-secret-plain' },
        arkose: {
          fail_open: true,
          verify_subdomain: 'updated-verify-api',
          site_key: 'updated-site-key-arkose',
          secret: 'arkose-secret-plain',
          client_subdomain: 'updated-client-api',
        },
      });
      assert.equal(setup.statusCode, 200, setup.body);
      assert.equal(
        setup.json().active_provider_id,
        'auth_challenge',
        'providers are configured without being activated',
      );

      // The exchange recorded against the original, byte for byte.
      const wire = await patch({
        active_provider_id: 'recaptcha_v2',
        recaptcha_v2: { site_key: 'test-site-key-v2', secret: 'test-secret-v2' },
      });
      assert.equal(wire.statusCode, 200);
      const expected =
        '{"active_provider_id":"recaptcha_v2","simple_captcha":{},"auth_challenge":{"fail_open":true},' +
        '"recaptcha_v2":{"site_key":"test-site-key-v2"},' +
        '"recaptcha_enterprise":{"site_key":"updated-site-key-enterprise","project_id":"updated-project-id-enterprise"},' +
        '"hcaptcha":{"site_key":"updated-site-key-hcaptcha"},"friendly_captcha":{"site_key":"updated-site-key-friendly"},' +
        '"arkose":{"site_key":"updated-site-key-arkose","client_subdomain":"updated-client-api","verify_subdomain":"updated-verify-api","fail_open":true}}';
      assert.equal(wire.body, expected);
      assert.equal((await get()).body, expected);

      // Switching the provider and updating one provider leave all the others as they were.
      const switched = await patch({
        active_provider_id: 'simple_captcha',
        hcaptcha: { site_key: 'hcaptcha-2', secret: 'hcaptcha-secret-2' },
      });
      assert.deepEqual(switched.json(), {
        ...JSON.parse(expected),
        active_provider_id: 'simple_captcha',
        hcaptcha: { site_key: 'hcaptcha-2' },
      });
      assert.deepEqual((await get()).json(), switched.json());

      // A provider object replaces that provider's settings: optional members not given are gone.
      const arkose = await patch({ arkose: { site_key: 'arkose-2', secret: 'arkose-secret-2' } });
      assert.deepEqual(arkose.json().arkose, { site_key: 'arkose-2' });

      const secrets = new Map(
        (await storedRows()).map((row) => [
          row.provider,
          row.secret === null ? null : server.services.secretBox.open(row.secret),
        ]),
      );
      assert.deepEqual(Object.fromEntries(secrets), {
        arkose: 'arkose-secret-2',
        auth_challenge: null,
        friendly_captcha: 'friendly-secret-plain',
        hcaptcha: 'hcaptcha-secret-2',
        recaptcha_enterprise: 'enterprise-api-key-plain',
        recaptcha_v2: 'test-secret-v2',
      });
      // simple_captcha accepts members but keeps nothing, as the original always answers {}.
      const simple = await patch({ simple_captcha: { anything: 'goes' } });
      assert.equal(simple.statusCode, 200);
      assert.deepEqual(simple.json().simple_captcha, {});
      assert.ok(!(await storedRows()).some((row) => row.provider === 'simple_captcha'));
    });

    it('refuses invalid bodies with invalid_body and stores nothing of them', async () => {
      const before = (await get()).body;
      const rowsBefore = await storedRows();
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ recaptcha: {} }, "Payload validation error: 'Additional properties not allowed: recaptcha'."],
        [
          { active_provider_id: 'hcaptcha', hcaptcha: { site_key: 'k', secret: 's', extra: 1 } },
          "Payload validation error: 'Additional properties not allowed: extra' on property hcaptcha.",
        ],
        [
          { recaptcha_enterprise: { site_key: 'k', api_key: 'a' } },
          "Payload validation error: 'Missing required property: project_id' on property recaptcha_enterprise.",
        ],
        [
          { arkose: { site_key: 'k' } },
          "Payload validation error: 'Missing required property: secret' on property arkose.",
        ],
        [
          { auth_challenge: {} },
          "Payload validation error: 'Missing required property: fail_open' on property auth_challenge.",
        ],
        [
          { auth_challenge: { fail_open: 'yes' } },
          "Payload validation error: 'Expected type boolean but found type string' on property auth_challenge.fail_open (Whether the challenge lets the login through when it cannot run.).",
        ],
        [
          { active_provider_id: 'recaptcha_v3' },
          "Payload validation error: 'No enum match for: recaptcha_v3' on property active_provider_id (The provider in use.).",
        ],
        [
          { hcaptcha: { site_key: '', secret: 's' } },
          "Payload validation error: 'String is too short (0 chars), minimum 1' on property hcaptcha.site_key (Site key for hCaptcha.).",
        ],
        [
          { hcaptcha: { site_key: 'k', secret: `too-long-secret-${'x'.repeat(100)}` } },
          "Payload validation error: 'String is too long (116 chars), maximum 100' on property hcaptcha.secret (Secret for hCaptcha; write-only, never returned.).",
        ],
        [
          { simple_captcha: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i])) },
          "Payload validation error: 'Too many properties defined (17), maximum 16' on property simple_captcha (Simple CAPTCHA: no settings.).",
        ],
      ];
      for (const [payload, message] of cases) {
        const response = await patch({ auth_challenge: { fail_open: false }, ...payload });
        assert.equal(response.statusCode, 400, JSON.stringify(payload));
        assert.deepEqual(response.json(), {
          statusCode: 400,
          error: 'Bad Request',
          message,
          errorCode: 'invalid_body',
        });
      }
      assert.equal((await get()).body, before);
      assert.deepEqual(await storedRows(), rowsBefore);
    });

    it('accepts form-encoded bodies, coercing booleans', async () => {
      const response = await server.request({
        method: 'PATCH',
        url: URL_PATH,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload:
          'active_provider_id=hcaptcha&hcaptcha[site_key]=form-key&hcaptcha[secret]=form-secret&auth_challenge[fail_open]=true',
      });
      assert.equal(response.statusCode, 200, response.body);
      const config = response.json();
      assert.equal(config.active_provider_id, 'hcaptcha');
      assert.deepEqual(config.hcaptcha, { site_key: 'form-key' });
      assert.deepEqual(config.auth_challenge, { fail_open: true });
      const row = (await storedRows()).find((r) => r.provider === 'hcaptcha')!;
      assert.equal(server.services.secretBox.open(row.secret!), 'form-secret');

      const unknown = await server.request({
        method: 'PATCH',
        url: URL_PATH,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'hcaptcha[site_key]=k&hcaptcha[secret]=s&hcaptcha[other]=x',
      });
      assert.equal(unknown.statusCode, 400);
      assert.equal(unknown.json().errorCode, 'invalid_body');
    });

    it('never writes a secret in clear to the database, the responses or the logs', async () => {
      const secret = 'PLAINTEXT-captcha-secret-7f3a9c';
      const apiKey = 'PLAINTEXT-enterprise-api-key-1b2d';
      const siteKey = 'visible-site-key-5e8f';
      const response = await patch({
        arkose: { site_key: siteKey, secret },
        recaptcha_enterprise: { site_key: siteKey, api_key: apiKey, project_id: 'p' },
      });
      assert.equal(response.statusCode, 200);
      const readBack = (await get()).body;
      for (const body of [response.body, readBack]) {
        assert.ok(!body.includes(secret) && !body.includes(apiKey));
        assert.ok(!/"(secret|api_key)"/.test(body));
      }

      let stored: string;
      if (kind === 'sqlite') {
        const file = path.join(server.database.dataDir, 'tenantry.sqlite');
        stored = [file, `${file}-wal`]
          .filter((f) => fs.existsSync(f))
          .map((f) => fs.readFileSync(f).toString('latin1'))
          .join('\n');
      } else {
        const result = await sql<{ row: string }>`select t::text as row from captcha_providers t`.execute(
          server.services.database.db,
        );
        stored = result.rows.map((r) => r.row).join('\n');
      }
      // The site key is found where the rows live, so the search looks at the right bytes.
      assert.ok(stored.includes(siteKey), 'the stored bytes hold the configuration');
      assert.ok(!stored.includes(secret), 'secret found in clear in the database');
      assert.ok(!stored.includes(apiKey), 'api_key found in clear in the database');

      // A refused body must not echo the secret either.
      const refused = await patch({ hcaptcha: { site_key: 'k', secret, unknown: true } });
      assert.equal(refused.statusCode, 400);
      assert.ok(!refused.body.includes(secret));

      assert.ok(logs.includes(URL_PATH), 'the requests were logged');
      assert.ok(!logs.includes(secret) && !logs.includes(apiKey), 'a secret reached the logs');
    });

    it('keeps each tenant’s configuration apart', async () => {
      const other = await server.addTenant(`captcha-${kind}`, `captcha-${kind}.test`);
      const response = await server.app.inject({
        method: 'GET',
        url: URL_PATH,
        headers: { host: `captcha-${kind}.test`, authorization: `Bearer ${other.token}` },
      });
      assert.equal(response.statusCode, 200);
      assert.equal(response.body, JSON.stringify(FRESH));
    });

    it('loses no update when clients change different providers at the same time', async () => {
      const clients = await Promise.all(
        [0, 1, 2].map(() => server.clientWithScopes(['read:attack_protection', 'update:attack_protection'])),
      );
      const providers = ['recaptcha_v2', 'recaptcha_enterprise', 'hcaptcha', 'friendly_captcha', 'arkose'] as const;
      const rounds = 4;
      const body = (provider: (typeof providers)[number], round: number) => {
        const site_key = `${provider}-round-${round}`;
        const secret = `${provider}-secret-${round}`;
        return provider === 'recaptcha_enterprise'
          ? { site_key, api_key: secret, project_id: `project-${round}` }
          : { site_key, secret };
      };
      let sent = 0;
      // One chain per provider: its writes are ordered, so its last write is known, while the five
      // chains race each other — 20 PATCHes, each provider's chain rotating over three clients.
      await Promise.all(
        providers.map(async (provider, p) => {
          for (let round = 0; round < rounds; round++) {
            const token = clients[(p + round) % clients.length]!.token;
            const response = await patch({ [provider]: body(provider, round) }, token);
            sent++;
            assert.equal(response.statusCode, 200, response.body);
            assert.equal(response.json()[provider].site_key, `${provider}-round-${round}`);
          }
        }),
      );
      assert.equal(sent, providers.length * rounds);
      const config = (await get()).json();
      const rows = new Map((await storedRows()).map((row) => [row.provider, row]));
      for (const provider of providers) {
        assert.equal(config[provider].site_key, `${provider}-round-${rounds - 1}`, provider);
        assert.equal(server.services.secretBox.open(rows.get(provider)!.secret!), `${provider}-secret-${rounds - 1}`);
      }
      assert.equal(config.recaptcha_enterprise.project_id, `project-${rounds - 1}`);
    });
  });
}
