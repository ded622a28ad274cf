import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { READER_GONE_STATUS } from '../../src/cli/main.ts';
import { loadConfig } from '../../src/config.ts';
import { ALL_SCOPES } from '../../src/modules/oauth/scopes.ts';
import { mailboxDir, writeMailboxEntry } from '../../src/mail/mailbox.ts';
import { newId } from '../../src/ids.ts';
import { createServices, type Services } from '../../src/services.ts';
import { runCli } from '../helpers/cli.ts';
import { createTestDatabase, eachDatabase, type TestDatabase } from '../helpers/databases.ts';

const readAll = { fields: [], includeFields: true, withIdpTokens: false };

describe('tenantry command line', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`tenantry command line (${kind})`, () => {
      let database: TestDatabase;
      let env: Record<string, string>;
      let services: Services;

      const cli = (...args: string[]) => runCli(env, args);
      const ok = async (...args: string[]) => {
        const run = await cli(...args);
        assert.equal(run.code, 0, `tenantry ${args.join(' ')} failed: ${run.stderr}`);
        return run.stdout;
      };
      const fails = async (...args: string[]) => {
        const run = await cli(...args);
        assert.notEqual(run.code, 0, `tenantry ${args.join(' ')} should fail`);
        assert.equal(run.stdout, '');
        // One line, no stack trace.
        assert.match(run.stderr, /^tenantry: [^\n]+\n$/);
        return run.stderr;
      };
      const claimsOf = (token: string) =>
        JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;

      before(async () => {
        database = await createTestDatabase(kind);
        env = {
          PATH: process.env.PATH ?? '',
          DATA_DIR: database.dataDir,
          LOG_LEVEL: 'silent',
          ...(database.databaseUrl ? { DATABASE_URL: database.databaseUrl } : {}),
        };
        // Opened alongside the CLI's processes, as a running server would be.
        services = await createServices(loadConfig(env));
      });
      after(async () => {
        await services.close();
        await database.drop();
      });

      it('creates and lists tenants, refusing a duplicate', async () => {
        assert.match(
          await ok('tenants', 'create', '--id', 'acme', '--domain', 'Acme.Example.com'),
          /Created tenant acme/,
        );
        assert.deepEqual(await services.tenants.get('acme'), { id: 'acme', domain: 'acme.example.com' });
        assert.equal((await services.signingKeys.jwks('acme')).keys.length, 1);
        assert.ok(await services.connections.byName('acme', 'Username-Password-Authentication'));
        assert.equal(await ok('tenants', 'list'), 'acme\tacme.example.com\n');
        assert.match(
          await fails('tenants', 'create', '--id', 'acme', '--domain', 'other.example.com'),
          /already exists/,
        );
        assert.match(await fails('tenants', 'create', '--id', 'Not Valid', '--domain', 'x.example.com'), /--id/);
      });

      it('ends quietly, with the status of SIGPIPE, when the reader of its output went away', async () => {
        for (const args of [['tenants', 'list'], ['help']]) {
          const run = await runCli(env, args, { readerGone: true });
          // Before, an unhandled 'error' event (write EPIPE) and its stack, status 1.
          assert.deepEqual([run.code, run.stderr], [READER_GONE_STATUS, ''], args.join(' '));
        }
        // Without a reader of its stderr, a command ends as it would have: a usage error is still status 2
        // (before, the write's EPIPE ended it with 1), and a command that works still works.
        assert.equal((await runCli(env, ['nonsense'], { errorReaderGone: true })).code, 2);
        const listed = await runCli(env, ['tenants', 'list'], { errorReaderGone: true });
        assert.equal(listed.code, 0);
        assert.match(listed.stdout, /^acme\t/m);
      });

      it('creates a client with chosen scopes and issues a token carrying exactly them', async () => {
        const out = await ok(
          'clients',
          'create',
          '--tenant',
          'acme',
          '--name',
          'CI',
          '--scopes',
          'read:users,create:users',
        );
        const clientId = /client_id:\s+(\S+)/.exec(out)![1]!;
        const secret = /client_secret:\s+(\S+)/.exec(out)![1]!;
        assert.ok(await services.clients.authenticate('acme', clientId, secret), 'the printed secret authenticates');
        assert.match(
          await ok('clients', 'list', '--tenant', 'acme'),
          new RegExp(`^${clientId}\tCI\tread:users create:users$`, 'm'),
        );

        const token = (await ok('token', '--tenant', 'acme', '--client-id', clientId)).trim();
        const claims = claimsOf(token);
        assert.equal(claims.iss, 'https://acme.example.com/');
        assert.equal(claims.aud, 'https://acme.example.com/api/v2/');
        assert.equal(claims.scope, 'read:users create:users');
        assert.equal(claims.azp, clientId);
        const principal = await services.accessTokens.verify({ id: 'acme', domain: 'acme.example.com' }, token);
        assert.deepEqual([...principal.scopes], ['read:users', 'create:users']);

        assert.equal(
          claimsOf((await ok('token', '--tenant', 'acme', '--client-id', clientId, '--scopes', 'read:users')).trim())
            .scope,
          'read:users',
        );
        assert.match(
          await fails('token', '--tenant', 'acme', '--client-id', clientId, '--scopes', 'delete:users'),
          /not granted: delete:users/,
        );
        assert.match(await fails('token', '--tenant', 'acme'), /no "Tenantry admin" client/);
        assert.match(
          await fails('clients', 'create', '--tenant', 'acme', '--name', 'x', '--scopes', 'read:userz'),
          /unknown scopes: read:userz/,
        );
        assert.match(
          await fails('clients', 'create', '--tenant', 'nope', '--name', 'x', '--all-scopes'),
          /no tenant "nope"/,
        );
      });

      it('issues a token for the admin client of the default tenant when none is named', async () => {
        await ok('tenants', 'create', '--id', 'default', '--domain', 'default.example.com');
        await services.clients.create('default', { name: 'Tenantry admin', scopes: ALL_SCOPES });
        const claims = claimsOf((await ok('token')).trim());
        assert.equal(claims.aud, 'https://default.example.com/api/v2/');
        assert.equal((claims.scope as string).split(' ').length, ALL_SCOPES.length);
      });

      it('rotates and revokes signing keys', async () => {
        const before = (await services.signingKeys.jwks('acme')).keys.map((k) => k.kid);
        assert.match(await ok('keys', 'rotate', '--tenant', 'acme'), /is current/);
        const rotated = (await services.signingKeys.jwks('acme')).keys.map((k) => k.kid);
        assert.equal(rotated.length, 2);
        assert.match(
          await fails(
            'keys',
            'revoke',
            '--tenant',
            'acme',
            '--kid',
            rotated.find((k) => !before.includes(k))!,
          ),
          /only a key rotated out/,
        );
        await ok('keys', 'revoke', '--tenant', 'acme', '--kid', before[0]!);
        assert.deepEqual(
          (await services.signingKeys.jwks('acme')).keys.map((k) => k.kid),
          rotated.filter((k) => k !== before[0]),
        );
      });

      it('imports NDJSON and JSON files, keeping the case of social emails only', async () => {
        const ndjson = path.join(database.dataDir, 'users.ndjson');
        fs.writeFileSync(
          ndjson,
          [
            JSON.stringify({ email: 'Mixed.Case@Example.com', given_name: 'Db' }),
            '',
            JSON.stringify({
              email: 'Social.User@Example.com',
              identities: [{ provider: 'google-oauth2', connection: 'google-oauth2', user_id: '42', isSocial: true }],
            }),
            JSON.stringify({ email: 'third@example.com', password_hash: '$2b$10$abcdefghijklmnopqrstuv' }),
          ].join('\n'),
        );
        assert.match(
          await ok('users', 'import', '--tenant', 'acme', '--file', ndjson, '--batch', '2'),
          /Imported 3 users into tenant acme in [\d.]+ s \(\d+ users\/s\)/,
        );

        const db = JSON.parse(await services.users.findByEmailJson('acme', 'mixed.case@example.com', readAll));
        assert.equal(db.length, 1);
        assert.equal(db[0].given_name, 'Db');
        assert.equal(db[0].identities[0].provider, 'svc');
        const social = JSON.parse(await services.users.findByEmailJson('acme', 'Social.User@Example.com', readAll));
        assert.equal(social[0].user_id, 'google-oauth2|42');
        assert.deepEqual(
          JSON.parse(await services.users.findByEmailJson('acme', 'social.user@example.com', readAll)),
          [],
        );

        const json = path.join(database.dataDir, 'users.json');
        fs.writeFileSync(
          json,
          `  \n${JSON.stringify([{ email: 'From.Json@Example.com' }, { email: 'second@example.com', connection: 'Username-Password-Authentication' }])}`,
        );
        assert.match(await ok('users', 'import', '--tenant', 'acme', '--file', json), /Imported 2 users/);
        assert.equal(
          JSON.parse(await services.users.findByEmailJson('acme', 'from.json@example.com', readAll)).length,
          1,
        );
      });

      it('stops an import at a bad record or a duplicate, naming where, with earlier batches kept', async () => {
        const bad = path.join(database.dataDir, 'bad.ndjson');
        fs.writeFileSync(
          bad,
          [
            JSON.stringify({ email: 'kept@example.com' }),
            JSON.stringify({ email: 'lost@example.com' }),
            JSON.stringify({ email: 'not-an-email' }),
          ].join('\n'),
        );
        const message = await fails('users', 'import', '--tenant', 'acme', '--file', bad, '--batch', '1');
        assert.match(message, /bad\.ndjson line 3: .*email/);
        assert.match(message, /2 users of earlier batches were imported/);
        assert.equal(JSON.parse(await services.users.findByEmailJson('acme', 'lost@example.com', readAll)).length, 1);

        const unknownMember = path.join(database.dataDir, 'unknown.json');
        fs.writeFileSync(unknownMember, JSON.stringify([{ email: 'a@example.com', pasword: 'typo' }]));
        assert.match(await fails('users', 'import', '--tenant', 'acme', '--file', unknownMember), /record 1: /);
        assert.deepEqual(JSON.parse(await services.users.findByEmailJson('acme', 'a@example.com', readAll)), []);

        // Half of a surrogate pair, as JSON.stringify escapes it: no text column can hold it.
        const lone = path.join(database.dataDir, 'lone.ndjson');
        fs.writeFileSync(lone, JSON.stringify({ email: 'lone@example.com', user_id: 'id\ud800' }));
        assert.match(
          await fails('users', 'import', '--tenant', 'acme', '--file', lone),
          /lone\.ndjson line 1: user_id: a string holds a lone UTF-16 surrogate/,
        );
        assert.deepEqual(JSON.parse(await services.users.findByEmailJson('acme', 'lone@example.com', readAll)), []);

        const duplicate = path.join(database.dataDir, 'duplicate.ndjson');
        fs.writeFileSync(
          duplicate,
          [JSON.stringify({ email: 'fresh@example.com' }), JSON.stringify({ email: 'KEPT@example.com' })].join('\n'),
        );
        assert.match(
          await fails('users', 'import', '--tenant', 'acme', '--file', duplicate),
          /batch 1 \(records 1–2 .*already exists.*0 users of earlier batches/,
        );
        // The whole batch rolled back, the new user with it.
        assert.deepEqual(JSON.parse(await services.users.findByEmailJson('acme', 'fresh@example.com', readAll)), []);
        assert.match(
          await fails('users', 'import', '--tenant', 'acme', '--file', path.join(database.dataDir, 'missing.ndjson')),
          /no file/,
        );
      });

      it('stops an import at a bad record many batches in, and reports a reading thread that fails', async () => {
        // Batches of 10 read on the import's own thread: the first two are stored, the third is not.
        const deep = path.join(database.dataDir, 'deep.ndjson');
        const lines = Array.from({ length: 25 }, (_, i) => JSON.stringify({ email: `deep-${i}@example.com` }));
        lines[22] = JSON.stringify({ email: 'deep-bad' });
        fs.writeFileSync(deep, lines.join('\n'));
        const message = await fails('users', 'import', '--tenant', 'acme', '--file', deep, '--batch', '10');
        assert.match(message, /deep\.ndjson line 23: .*email/);
        assert.match(message, /20 users of earlier batches were imported/);
        assert.equal(
          JSON.parse(await services.users.findByEmailJson('acme', 'deep-19@example.com', readAll)).length,
          1,
        );
        assert.deepEqual(JSON.parse(await services.users.findByEmailJson('acme', 'deep-20@example.com', readAll)), []);

        // Identity-provider tokens are sealed by the command's own thread, and read back.
        const tokens = path.join(database.dataDir, 'tokens.ndjson');
        const identity = { provider: 'github', connection: 'github', user_id: '7', isSocial: true };
        fs.writeFileSync(
          tokens,
          JSON.stringify({ email: 'Token@Example.com', identities: [{ ...identity, access_token: 'gho-secret-7' }] }),
        );
        assert.match(await ok('users', 'import', '--tenant', 'acme', '--file', tokens), /Imported 1 users/);
        const stored = await services.database.db
          .selectFrom('users')
          .select(['document', 'idp_tokens'])
          .where('user_id', '=', 'github|7')
          .executeTakeFirstOrThrow();
        assert.ok(!stored.document.includes('gho-secret-7') && !stored.idp_tokens!.includes('gho-secret-7'));
        const withTokens = { ...readAll, withIdpTokens: true };
        assert.deepEqual(
          JSON.parse(await services.users.findByEmailJson('acme', 'Token@Example.com', withTokens))[0].identities,
          [{ ...identity, access_token: 'gho-secret-7' }],
        );

        // A directory passes the command's check that the file exists; reading it fails the thread.
        assert.match(await fails('users', 'import', '--tenant', 'acme', '--file', database.dataDir), /EISDIR/);
      });

      it('writes development certificates with private keys readable by the owner only', async () => {
        const out = await ok('dev-cert', '--hosts', 'localhost,127.0.0.1');
        const dir = path.join(database.dataDir, 'tls');
        assert.ok(out.includes(`TLS_CERT_FILE=${dir}/server.pem TLS_KEY_FILE=${dir}/server-key.pem`), out);
        assert.ok(out.includes(`NODE_EXTRA_CA_CERTS=${dir}/ca.pem`), out);
        for (const key of ['server-key.pem', 'ca-key.pem'])
          assert.equal(fs.statSync(path.join(dir, key)).mode & 0o777, 0o600, key);
        const cert = new (await import('node:crypto')).X509Certificate(fs.readFileSync(path.join(dir, 'server.pem')));
        assert.equal(cert.subjectAltName, 'DNS:localhost, IP Address:127.0.0.1');
      });

      it('refuses unknown commands and flags with a one-line message', async () => {
        assert.match(await fails('frobnicate'), /unknown command "frobnicate"/);
        assert.match(
          await fails('tenants', 'create', '--id', 'x1x', '--domain', 'x.example.com', '--colour', 'red'),
          /Unknown option '--colour'/,
        );
        assert.match(await fails('clients', 'create', '--tenant', 'acme'), /--name is required/);
        assert.match(
          await fails('users', 'import', '--file', 'x', '--batch', '0'),
          /--batch must be a positive integer/,
        );
        assert.match(await ok('help'), /users import --file FILE/);
      });

      it('prints what tenants wrote with its control characters escaped, so no escape sequence reaches the terminal', async () => {
        await services.tenants.create('ansi', 'ansi.example.com');
        // Retitle the window, clear the screen, fake a line in red, write the clipboard (OSC 52), reverse the text.
        const hostile =
          'Eve\u001b]0;PWNED\u0007\u001b[2J\u001b[31mFAKE\u001b[0m\u001b]52;c;Y3VybA==\u0007\u009b2J\u202e';
        const shown = 'Eve\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mFAKE\\x1b[0m\\x1b]52;c;Y3VybA==\\x07\\x9b2J\\u202e';
        const client = await services.clients.create('ansi', { name: hostile, scopes: ['read:users'] });
        const listed = await ok('clients', 'list', '--tenant', 'ansi');
        assert.ok(listed.includes(`${client.clientId}\t${shown}\tread:users\n`), listed);

        const dir = mailboxDir(database.dataDir);
        const id = newId.email();
        const entry = {
          id,
          date: new Date().toISOString(),
          from: 'no-reply@ansi.example.com',
          to: 'eve@example.com',
          subject: `Welcome ${hostile}`,
          html: `<p>Hello ${hostile}</p>\r\n<p>\tBye</p>`,
        };
        writeMailboxEntry(dir, entry, Buffer.from('unused'));
        const list = await ok('mailbox', 'list');
        assert.ok(list.includes(`${id}\t${entry.date}\teve@example.com\tWelcome ${shown}\n`), list);
        const show = await ok('mailbox', 'show', id);
        assert.ok(show.includes(`Subject: Welcome ${shown}\n`), show);
        // Line breaks and tabs are kept; a CRLF is printed as one line break.
        assert.ok(show.endsWith(`<p>Hello ${shown}</p>\n<p>\tBye</p>\n`), show);
        for (const out of [listed, list, show])
          assert.doesNotMatch(out, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);

        // Within a listed value, tabs and line breaks are escaped too: no forged column or row.
        const forger = await services.clients.create('ansi', {
          name: 'A\tread:users\nforged-id\tB',
          scopes: ['read:users'],
        });
        assert.ok(
          (await ok('clients', 'list', '--tenant', 'ansi')).includes(
            `${forger.clientId}\tA\\x09read:users\\x0aforged-id\\x09B\tread:users\n`,
          ),
        );

        // An error quoting what it refused is shown inert on stderr too.
        const refused = await fails(hostile);
        assert.ok(refused.startsWith(`tenantry: unknown command "${shown}"`), refused);
        assert.doesNotMatch(refused, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);
      });
    });
  }),
);
