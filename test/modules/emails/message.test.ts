import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { transaction } from '../../../src/db/database.ts';
import { mailboxDir, writeMailboxEntry } from '../../../src/mail/mailbox.ts';
import { databaseKinds } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const PASSWORD = 'correct horse battery';
const LINK = /https:\/\/([^/"]+)\/u\/email-verification\?ticket=([\w-]+)/;

/** A GET over a real socket, the path sent exactly as given: no client normalises `..` or `%2F` away. */
function rawGet(
  port: number,
  rawPath: string,
  headers: Record<string, string>,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, path: rawPath, headers }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.on('error', reject);
    request.end();
  });
}

for (const kind of databaseKinds()) {
  describe(`GET /api/v2/emails/outbox/{id}/message (${kind})`, () => {
    let server: TestServer;
    let port: number;
    before(async () => {
      // No SMTP_URL: the development mailbox.
      server = await startTestServer(kind, { MAIL_POLL_MS: '50' });
      await server.app.listen({ host: '127.0.0.1', port: 0 });
      port = (server.app.server.address() as AddressInfo).port;
    });
    after(() => server.close());

    const messageOf = (id: string, token?: string | null) =>
      server.request({ url: `/api/v2/emails/outbox/${id}/message`, ...(token === undefined ? {} : { token }) });

    /** Creates a user on `host` with `token`; returns the id of its verification email, once it is in the mailbox. */
    async function sentEmailFor(email: string, host = server.domain, token = server.adminToken): Promise<string> {
      const created = await server.app.inject({
        method: 'POST',
        url: '/api/v2/users',
        headers: { host, authorization: `Bearer ${token}` },
        payload: { connection: 'Username-Password-Authentication', password: PASSWORD, email },
      });
      assert.equal(created.statusCode, 201, created.body);
      return eventually(`the email to ${email} sent`, async () => {
        const outbox = await server.app.inject({
          url: '/api/v2/emails/outbox',
          headers: { host, authorization: `Bearer ${token}` },
        });
        const sent = outbox.json().emails.find((e: { to: string; status: string }) => e.to === email);
        return sent?.status === 'sent' ? (sent.id as string) : undefined;
      });
    }

    it('shows a sent email of the tenant whole: its summary, every header of the .eml decoded, its HTML with the link', async () => {
      // A non-ASCII subject: the .eml carries it as encoded words, the API decoded.
      const patched = await server.request({
        method: 'PATCH',
        url: '/api/v2/email-templates/verify_email',
        payload: { subject: 'Vérifiez votre adresse — {{ user.email }}' },
      });
      assert.equal(patched.statusCode, 200, patched.body);
      const id = await sentEmailFor('ada@example.com');
      const entry = JSON.parse(fs.readFileSync(path.join(mailboxDir(server.database.dataDir), `${id}.json`), 'utf8'));
      const eml = fs.readFileSync(path.join(mailboxDir(server.database.dataDir), `${id}.eml`), 'utf8');
      assert.match(eml, /^Subject: =\?UTF-8\?/m, 'the subject is encoded in the file');

      const response = await messageOf(id);
      assert.equal(response.statusCode, 200, response.body);
      const body = response.json();
      const dateHeader = body.headers.find((h: { name: string }) => h.name === 'Date')?.value;
      assert.match(dateHeader, /^\w{3}, \d{2} \w{3} \d{4} \d\d:\d\d:\d\d \+0000$/);
      const encoding = body.headers.find((h: { name: string }) => h.name === 'Content-Transfer-Encoding')?.value;
      assert.deepEqual(body, {
        id,
        from: 'no-reply@tenant.test',
        to: 'ada@example.com',
        subject: 'Vérifiez votre adresse — ada@example.com',
        date: entry.date,
        message_id: `<${id}@tenantry>`,
        headers: [
          { name: 'From', value: 'no-reply@tenant.test' },
          { name: 'To', value: 'ada@example.com' },
          { name: 'Subject', value: 'Vérifiez votre adresse — ada@example.com' },
          { name: 'Message-ID', value: `<${id}@tenantry>` },
          { name: 'Content-Transfer-Encoding', value: encoding },
          { name: 'Date', value: dateHeader },
          { name: 'MIME-Version', value: '1.0' },
          { name: 'Content-Type', value: 'text/html; charset=utf-8' },
        ],
        html: entry.html,
      });
      assert.match(body.html, /<p>Hello ada@example\.com,<\/p>/);
      const [, host, ticket] = LINK.exec(body.html) ?? [];
      assert.equal(host, server.domain);
      assert.ok(ticket && ticket.length >= 40, 'the real link, with its ticket');

      // Its own scope: read:email_messages, not read:email_outbox.
      const reader = await server.clientWithScopes(['read:email_messages']);
      assert.equal((await messageOf(id, reader.token)).statusCode, 200);
      const outboxOnly = await server.clientWithScopes(['read:email_outbox']);
      const refused = await messageOf(id, outboxOnly.token);
      assert.deepEqual(refused.json(), {
        statusCode: 403,
        error: 'Forbidden',
        message: 'Insufficient scope, expected any of: read:email_messages',
        errorCode: 'insufficient_scope',
      });
      assert.ok(!refused.body.includes(ticket!));
      const anonymous = await messageOf(id, null);
      assert.equal(anonymous.statusCode, 401);
      assert.ok(!anonymous.body.includes(ticket!));
    });

    it("answers 404 for another tenant's email, with nothing of it; each tenant reads its own", async () => {
      const other = await server.addTenant('other-tenant', 'other.test');
      const theirs = await sentEmailFor('grace@example.com', 'other.test', other.token);
      const ours = await messageOf(theirs);
      assert.deepEqual(ours.json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'The email does not exist.',
        errorCode: 'inexistent_email',
      });
      assert.ok(!ours.body.includes('grace'));
      const own = await server.app.inject({
        url: `/api/v2/emails/outbox/${theirs}/message`,
        headers: { host: 'other.test', authorization: `Bearer ${other.token}` },
      });
      assert.equal(own.statusCode, 200, own.body);
      assert.equal(own.json().to, 'grace@example.com');
      // An id of the right form that no email has.
      assert.equal((await messageOf('msg_1111111111111111111111')).json().message, 'The email does not exist.');
    });

    it('answers 404 for an email of the tenant that is not in the mailbox (failed, never sent)', async () => {
      const failed = await transaction(server.services.database, (trx) =>
        server.services.mailOutbox.queue(trx, {
          tenantId: server.tenant.id,
          template: 'verify_email',
          from: 'login@example.com',
          to: 'broken@example.com',
          subject: 'Verify',
          html: '',
          failure: 'The template could not be rendered',
        }),
      );
      assert.deepEqual((await messageOf(failed)).json(), {
        statusCode: 404,
        error: 'Not Found',
        message: 'The email is not in the development mailbox: it has not been sent (yet), or its files were removed.',
        errorCode: 'inexistent_email',
      });
    });

    it('refuses malformed ids and path escapes with a 400 before any file is read', async () => {
      // A file beside the mailbox that an escaping path would reach.
      fs.writeFileSync(
        path.join(server.database.dataDir, 'outside.json'),
        JSON.stringify({ id: 'outside', html: 'SECRET-OUTSIDE' }),
      );
      const headers = { host: server.domain, authorization: `Bearer ${server.adminToken}` };
      for (const id of [
        'not-an-id',
        '..%2Foutside',
        '..%2F..%2Foutside',
        '%2E%2E%2Foutside',
        'msg_1111111111111111111111%2F..%2F..%2Foutside',
        'msg_111111111111111111111',
        'msg_0000000000000000000000',
        'msg_1111111111111111111111%00',
      ]) {
        for (const response of [
          await rawGet(port, `/api/v2/emails/outbox/${id}/message`, headers),
          await server.app.inject({ url: `/api/v2/emails/outbox/${id}/message`, headers }),
        ]) {
          const status = 'status' in response ? response.status : response.statusCode;
          assert.equal(status, 400, `${id}: ${response.body}`);
          assert.match(JSON.parse(response.body).message, /^Path validation error: /, id);
          assert.ok(!response.body.includes('SECRET-OUTSIDE'), id);
        }
      }
      // Unencoded dots are resolved by no one: the route does not match at all.
      const dotted = await rawGet(port, '/api/v2/emails/outbox/../../outside/message', headers);
      assert.equal(dotted.status, 404);
      assert.ok(!dotted.body.includes('SECRET-OUTSIDE'));
    });
  });

  describe(`GET /api/v2/emails/outbox/{id}/message with SMTP_URL set (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      // Nothing is sent: the email stays queued, and no worker would write a mailbox anyway.
      server = await startTestServer(kind, { SMTP_URL: 'smtp://127.0.0.1:9', MAIL_WORKER: 'false' });
    });
    after(() => server.close());

    it('answers 404: through SMTP the server keeps no copy of a body, even where a mailbox file has the id', async () => {
      const id = await transaction(server.services.database, (trx) =>
        server.services.mailOutbox.queue(trx, {
          tenantId: server.tenant.id,
          template: 'verify_email',
          from: 'login@example.com',
          to: 'ada@example.com',
          subject: 'Verify',
          html: '<a href="https://tenant.test/u/email-verification?ticket=secret-ticket">Verify</a>',
        }),
      );
      // Left by an earlier run without SMTP_URL: not served once SMTP is configured.
      writeMailboxEntry(
        mailboxDir(server.database.dataDir),
        {
          id,
          date: new Date().toISOString(),
          from: 'login@example.com',
          to: 'ada@example.com',
          subject: 'Verify',
          html: 'secret-ticket',
        },
        Buffer.from('Subject: Verify\n\nsecret-ticket'),
      );
      const response = await server.request({ url: `/api/v2/emails/outbox/${id}/message` });
      assert.deepEqual(response.json(), {
        statusCode: 404,
        error: 'Not Found',
        message:
          'Email bodies are kept only in the development mailbox, and this server sends through SMTP (SMTP_URL is set): it keeps no copy of a sent email.',
        errorCode: 'inexistent_email',
      });
    });
  });
}
