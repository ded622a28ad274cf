import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { simpleParser, type ParsedMail } from 'mailparser';
import { claimDueRows } from '../../../src/db/claim-due.ts';
import { listMailbox, mailboxDir, readMailboxEntry } from '../../../src/mail/mailbox.ts';
import { loadConfig, ConfigError } from '../../../src/config.ts';
import { smtpTransport } from '../../../src/mail/transport.ts';
import { MailOutbox } from '../../../src/mail/outbox.ts';
import { MailWorker } from '../../../src/mail/worker.ts';
import { runCli } from '../../helpers/cli.ts';
import { eachDatabase } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { startSmtpReceiver, type SmtpReceiver } from '../../helpers/smtp-receiver.ts';

const EDGE = 'edge.emails.test';
const BRAND_A = 'login.brand-a.test';
const BRAND_B = 'login.brand-b.test';
const PENDING = 'login.brand-pending.test';
const SMTP_PASSWORD = 'smtp-password-never-logged-7f3a';
const PASSWORD = 'correct horse battery';

/** The verification link in an email's HTML. */
function linkOf(mail: ParsedMail): URL {
  const href = /href="([^"]+)"/.exec(String(mail.html))?.[1];
  assert.ok(href, `no link in ${String(mail.html)}`);
  return new URL(href.replace(/&amp;/g, '&'));
}

const sha256Hex = (value: string) => createHash('sha256').update(value).digest('hex');

/** The email's HTML with its link blanked out: what must not change with the domain unless the template says so. */
const textWithoutLink = (mail: ParsedMail) => String(mail.html).replace(/href="[^"]+"/, 'href="LINK"');

async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('verification emails, the mail outbox and the development mailbox', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`verification emails and the custom-domain header (${kind})`, () => {
      let server: TestServer;
      let dns: TestDnsServer;
      let smtp: SmtpReceiver;
      let userCount = 0;

      before(async () => {
        dns = await startDnsServer();
        smtp = await startSmtpReceiver({ user: 'mailer', pass: SMTP_PASSWORD });
        server = await startTestServer(kind, {
          SMTP_URL: smtp.url,
          MAIL_POLL_MS: '50',
          MAIL_RETRY_SCHEDULE_MS: '100,100',
          DNS_SERVERS: dns.address,
          CUSTOM_DOMAIN_EDGE_DOMAIN: EDGE,
        });
        for (const domain of [BRAND_A, BRAND_B]) {
          const created = await server.request({
            method: 'POST',
            url: '/api/v2/custom-domains',
            payload: { domain, type: 'svc_managed_certs', domain_metadata: { brand: domain.split('.')[1]! } },
          });
          assert.equal(created.statusCode, 201, created.body);
          dns.setCname(domain, created.json().verification.methods[0].record);
          const verified = await server.request({
            method: 'POST',
            url: `/api/v2/custom-domains/${created.json().custom_domain_id}/verify`,
          });
          assert.equal(verified.json().status, 'ready', verified.body);
        }
        const pending = await server.request({
          method: 'POST',
          url: '/api/v2/custom-domains',
          payload: { domain: PENDING, type: 'svc_managed_certs' },
        });
        assert.equal(pending.statusCode, 201, pending.body);
      });
      after(async () => {
        await server.close();
        await smtp.close();
        await dns.close();
      });

      const newEmail = () => `user${++userCount}@example.com`;
      const createUser = (payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
        server.request({
          method: 'POST',
          url: '/api/v2/users',
          payload: { connection: 'Username-Password-Authentication', password: PASSWORD, ...payload },
          headers,
        });
      const patchTemplate = (payload: Record<string, unknown>) =>
        server.request({ method: 'PATCH', url: '/api/v2/email-templates/verify_email', payload });
      const follow = (link: URL) =>
        server.app.inject({ url: `${link.pathname}${link.search}`, headers: { host: link.host } });
      const userById = async (id: string) =>
        (await server.request({ url: `/api/v2/users/${encodeURIComponent(id)}` })).json();
      const outboxCount = async () =>
        Number(
          (
            await server.services.database.db
              .selectFrom('email_outbox')
              .select((eb) => eb.fn.countAll().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const ticketCount = async () =>
        Number(
          (
            await server.services.database.db
              .selectFrom('email_verification_tickets')
              .select((eb) => eb.fn.countAll().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const ticketHashesOf = async (userId: string) =>
        (
          await server.services.database.db
            .selectFrom('email_verification_tickets')
            .select('ticket_hash')
            .where('user_id', '=', userId)
            .execute()
        ).map((t) => t.ticket_hash);
      const outboxRowFor = (recipient: string) =>
        server.services.database.db
          .selectFrom('email_outbox')
          .selectAll()
          .where('recipient', '=', recipient)
          .executeTakeFirst();
      /** Sends a verification email through POST /users and returns it as received over SMTP. */
      const mailForNewUser = async (headers: Record<string, string> = {}) => {
        const email = newEmail();
        const created = await createUser({ email, verify_email: true }, headers);
        assert.equal(created.statusCode, 201, created.body);
        return { user: created.json(), mail: await smtp.next(email) };
      };

      it("serves the default verify_email template, stores the tenant's own with POST once, and changes it with PATCH", async () => {
        const initial = await server.request({ url: '/api/v2/email-templates/verify_email' });
        assert.equal(initial.statusCode, 200, initial.body);
        const template = initial.json();
        assert.deepEqual(Object.keys(template), [
          'template',
          'body',
          'subject',
          'syntax',
          'includeEmailInRedirect',
          'enabled',
        ]);
        assert.equal(template.template, 'verify_email');
        assert.match(template.body, /\{\{ url \}\}/);
        assert.equal(template.syntax, 'liquid');
        assert.equal(template.enabled, true);

        const body = {
          template: 'verify_email',
          body: '<p>Hi {{ user.email }}</p><a href="{{ url }}">verify</a>',
          from: 'Acme <no-reply@acme.test>',
          subject: 'Verify {{ user.email }}',
          resultUrl: 'https://app.example.com/verified',
          syntax: 'liquid',
          urlLifetimeInSeconds: 3600,
          includeEmailInRedirect: true,
          enabled: true,
        };
        const created = await server.request({ method: 'POST', url: '/api/v2/email-templates', payload: body });
        assert.equal(created.statusCode, 201, created.body);
        // The original's key order.
        assert.deepEqual(Object.keys(created.json()), [
          'template',
          'body',
          'from',
          'resultUrl',
          'subject',
          'syntax',
          'urlLifetimeInSeconds',
          'includeEmailInRedirect',
          'enabled',
        ]);
        assert.deepEqual(created.json(), body);
        const again = await server.request({ method: 'POST', url: '/api/v2/email-templates', payload: body });
        assert.deepEqual(again.json(), {
          statusCode: 409,
          error: 'Conflict',
          message: 'Template verify_email already exists.',
        });

        const patched = await patchTemplate({
          template: 'verify_email',
          subject: 'Please verify',
          urlLifetimeInSeconds: null,
        });
        assert.equal(patched.statusCode, 200, patched.body);
        assert.equal(patched.json().subject, 'Please verify');
        assert.equal(
          'urlLifetimeInSeconds' in patched.json(),
          false,
          'null restores the default: no lifetime of its own',
        );
        assert.equal(patched.json().body, body.body);
        assert.deepEqual(
          (await server.request({ url: '/api/v2/email-templates/verify_email' })).json(),
          patched.json(),
        );
        const restored = await patchTemplate({ subject: null });
        assert.equal(restored.json().subject, 'Verify your email');
      });

      it('refuses invalid Liquid, file tags and bad members with a 400 and stores nothing', async () => {
        const before = (await server.request({ url: '/api/v2/email-templates/verify_email' })).json();
        const unclosed = await patchTemplate({ body: '{% if user.email %}never closed', subject: 'changed' });
        assert.deepEqual(unclosed.json(), {
          statusCode: 400,
          error: 'Bad Request',
          errorCode: 'invalid_body',
          message: 'Invalid Liquid template in body: tag {% if user.email %} not closed, line:1, col:1',
        });
        const cases: Array<[Record<string, unknown>, RegExp]> = [
          [
            { body: '{{ user.email | no_such_filter }}' },
            /^Invalid Liquid template in body: undefined filter: no_such_filter/,
          ],
          [{ body: '{% include "/etc/passwd" %}' }, /^Invalid Liquid template in body: tag "include" not found/],
          [{ subject: 'Hi {{ user.email' }, /^Invalid Liquid template in subject: output "\{\{ user.email" not closed/],
          [
            { body: '{% for i in (1..100000000) %}x{% endfor %}' },
            /^Invalid Liquid template in body: memory alloc limit exceeded/,
          ],
          [{ from: 'not an address' }, /^Invalid from: "not an address" is not an email address/],
          [
            { resultUrl: 'javascript:alert(1)' },
            /^Payload validation error: 'String does not match pattern .*' on property resultUrl/,
          ],
          [{ syntax: 'handlebars' }, /^Payload validation error: 'No enum match for: handlebars' on property syntax/],
          [{ colour: 'red' }, /^Payload validation error: 'Additional properties not allowed: colour'\.$/],
        ];
        for (const [payload, message] of cases) {
          const response = await patchTemplate(payload);
          assert.equal(response.statusCode, 400, `${JSON.stringify(payload)}: ${response.body}`);
          assert.match(response.json().message, message);
          assert.equal(response.json().errorCode, 'invalid_body');
        }
        assert.deepEqual(
          (await server.request({ url: '/api/v2/email-templates/verify_email' })).json(),
          before,
          'nothing was stored',
        );
        const otherTemplate = await server.request({ url: '/api/v2/email-templates/reset_email' });
        assert.equal(otherTemplate.statusCode, 400);
        assert.equal(otherTemplate.json().errorCode, 'invalid_uri');
        const { token } = await server.clientWithScopes(['read:email_templates']);
        assert.equal((await server.request({ url: '/api/v2/email-templates/verify_email', token })).statusCode, 200);
        const refused = await server.request({
          method: 'PATCH',
          url: '/api/v2/email-templates/verify_email',
          payload: { subject: 'x' },
          token,
        });
        assert.deepEqual(refused.json(), {
          statusCode: 403,
          error: 'Forbidden',
          message: 'Insufficient scope, expected any of: update:email_templates',
          errorCode: 'insufficient_scope',
        });
      });

      it('sends the verification email of POST /users over SMTP; its link, on the canonical default domain, verifies once and redirects', async () => {
        await patchTemplate({
          body: '<p>Hi {{ user.email }}</p><a href="{{ url }}">verify</a>',
          from: 'Acme <no-reply@acme.test>',
          subject: 'Verify {{ user.email }}',
          resultUrl: 'https://app.example.com/verified',
          includeEmailInRedirect: true,
        });
        const { user, mail } = await mailForNewUser();
        assert.equal(user.email_verified, false);
        assert.deepEqual(mail.from?.value, [{ name: 'Acme', address: 'no-reply@acme.test' }]);
        assert.equal(mail.subject, `Verify ${user.email}`);
        assert.match(mail.messageId ?? '', /^<msg_[1-9A-HJ-NP-Za-km-z]{22}@tenantry>$/);
        const link = linkOf(mail);
        assert.equal(link.protocol, 'https:');
        assert.equal(link.host, server.domain);
        assert.equal(link.pathname, '/u/email-verification');
        assert.match(link.searchParams.get('ticket') ?? '', /^[A-Za-z0-9_-]{43}$/);
        // Only a hash of the ticket is stored, and a sent email keeps no copy of its body.
        const stored = await server.services.database.db
          .selectFrom('email_verification_tickets')
          .select('ticket_hash')
          .execute();
        assert.ok(stored.every((t) => t.ticket_hash !== link.searchParams.get('ticket')));
        assert.deepEqual(await ticketHashesOf(user.user_id), [sha256Hex(link.searchParams.get('ticket') ?? '')]);
        await eventually(
          async () => ((await outboxRowFor(user.email))?.status === 'sent' ? true : undefined),
          'the outbox to record the send',
        );
        const row = await outboxRowFor(user.email);
        assert.equal(row?.body, null);
        assert.equal(row?.attempt_count, 1);

        const head = await server.app.inject({
          method: 'HEAD',
          url: `${link.pathname}${link.search}`,
          headers: { host: link.host },
        });
        assert.equal(head.statusCode, 404, 'a HEAD does not spend the ticket');
        const followed = await follow(link);
        assert.equal(followed.statusCode, 302, followed.body);
        const target = new URL(followed.headers.location as string);
        assert.equal(`${target.origin}${target.pathname}`, 'https://app.example.com/verified');
        assert.equal(target.searchParams.get('email'), user.email);
        assert.equal(target.searchParams.get('success'), 'true');
        assert.equal(target.searchParams.get('code'), 'success');
        assert.equal(followed.headers['referrer-policy'], 'no-referrer');
        assert.equal((await userById(user.user_id)).email_verified, true);

        const reused = await follow(link);
        assert.equal(reused.statusCode, 302);
        const reusedTarget = new URL(reused.headers.location as string);
        assert.equal(reusedTarget.searchParams.get('success'), 'false');
        assert.equal(reusedTarget.searchParams.get('code'), 'already_used');
        assert.equal(reusedTarget.searchParams.get('email'), null);
        const unknown = await server.app.inject({
          url: '/u/email-verification?ticket=not-a-ticket',
          headers: { host: server.domain },
        });
        assert.equal(unknown.statusCode, 404);
        assert.match(unknown.body, /This URL is not valid/);
      });

      it('builds the link on the custom domain the header names; the text changes with the domain only when the template uses it', async () => {
        await patchTemplate({
          body: '<p>Hi {{ user.email }}</p><a href="{{ url }}">verify</a>',
          subject: 'Verify your email',
        });
        const canonical = await mailForNewUser();
        const brandA = await mailForNewUser({ 'svc-custom-domain': BRAND_A });
        const brandB = await mailForNewUser({ 'svc-custom-domain': BRAND_B.toUpperCase() });
        assert.equal(linkOf(canonical.mail).host, server.domain);
        assert.equal(linkOf(brandA.mail).host, BRAND_A);
        assert.equal(linkOf(brandB.mail).host, BRAND_B);
        // Rule 5: a template that does not use custom_domain reads the same on every domain but for the link.
        const strip = (m: { mail: ParsedMail; user: { email: string } }) =>
          textWithoutLink(m.mail).replace(m.user.email, 'EMAIL');
        assert.equal(strip(brandA), strip(canonical));
        assert.equal(strip(brandB), strip(canonical));
        assert.equal(brandA.mail.subject, canonical.mail.subject);

        await patchTemplate({
          body: '<p>Welcome to {{ custom_domain.domain }} ({{ custom_domain.domain_metadata.brand }})</p><a href="{{ url }}">verify</a>',
          subject: 'Verify your {{ custom_domain.domain }} account',
        });
        const withA = await mailForNewUser({ 'svc-custom-domain': BRAND_A });
        const withB = await mailForNewUser({ 'svc-custom-domain': BRAND_B });
        assert.match(String(withA.mail.html), /Welcome to login\.brand-a\.test \(brand-a\)/);
        assert.match(String(withB.mail.html), /Welcome to login\.brand-b\.test \(brand-b\)/);
        assert.equal(withA.mail.subject, `Verify your ${BRAND_A} account`);
        assert.notEqual(textWithoutLink(withA.mail), textWithoutLink(withB.mail));

        // The link works on the domain it was built for: that host reaches the tenant.
        const followed = await follow(linkOf(withA.mail));
        assert.equal(followed.statusCode, 302, followed.body);
        assert.equal((await userById(withA.user.user_id)).email_verified, true);
      });

      it("uses the default domain without the header, and takes the original's auth0-custom-domain as an alias", async () => {
        await patchTemplate({ body: '<a href="{{ url }}">verify</a>' });
        const setDefault = await server.request({
          method: 'PATCH',
          url: '/api/v2/custom-domains/default',
          payload: { domain: BRAND_A },
        });
        assert.equal(setDefault.statusCode, 200, setDefault.body);
        try {
          assert.equal(linkOf((await mailForNewUser()).mail).host, BRAND_A);
          assert.equal(linkOf((await mailForNewUser({ 'auth0-custom-domain': BRAND_B })).mail).host, BRAND_B);
          assert.equal(
            linkOf((await mailForNewUser({ 'svc-custom-domain': server.domain })).mail).host,
            server.domain,
            'the canonical domain may be named too',
          );
          const both = await createUser(
            { email: newEmail() },
            { 'svc-custom-domain': BRAND_A, 'auth0-custom-domain': BRAND_B },
          );
          assert.deepEqual(both.json(), {
            statusCode: 400,
            error: 'Bad Request',
            message: 'The svc-custom-domain and auth0-custom-domain headers name different domains.',
            errorCode: 'invalid_headers',
          });
        } finally {
          await server.request({
            method: 'PATCH',
            url: '/api/v2/custom-domains/default',
            payload: { domain: server.domain },
          });
        }
      });

      it('answers 400 for an unknown, unverified or malformed domain in the header, and creates and queues nothing', async () => {
        const [outboxBefore, ticketsBefore] = [await outboxCount(), await ticketCount()];
        const { user } = await mailForNewUser();
        const [outboxAfterUser, ticketsAfterUser] = [await outboxCount(), await ticketCount()];
        assert.deepEqual([outboxAfterUser, ticketsAfterUser], [outboxBefore + 1, ticketsBefore + 1]);
        const refusal = {
          statusCode: 400,
          error: 'Bad Request',
          message: 'The custom domain does not exist for the tenant.',
          errorCode: 'inexistent_custom_domain',
        };
        for (const headers of [
          { 'svc-custom-domain': 'unknown.example.com' },
          { 'svc-custom-domain': PENDING },
          { 'auth0-custom-domain': PENDING },
        ] as Array<Record<string, string>>) {
          const email = newEmail();
          const created = await createUser({ email, verify_email: true }, headers);
          assert.deepEqual(created.json(), refusal, JSON.stringify(headers));
          assert.deepEqual(
            (await server.request({ url: `/api/v2/users-by-email?email=${encodeURIComponent(email)}` })).json(),
            [],
            'no user was created',
          );
          const ticket = await server.request({
            method: 'POST',
            url: '/api/v2/tickets/email-verification',
            payload: { user_id: user.user_id },
            headers,
          });
          assert.deepEqual(ticket.json(), refusal);
          const job = await server.request({
            method: 'POST',
            url: '/api/v2/jobs/verification-email',
            payload: { user_id: user.user_id },
            headers,
          });
          assert.deepEqual(job.json(), refusal);
        }
        const malformed = await createUser({ email: newEmail() }, { 'svc-custom-domain': 'not a domain!' });
        assert.equal(malformed.statusCode, 400);
        assert.equal(malformed.json().errorCode, 'invalid_headers');
        assert.match(
          malformed.json().message,
          /^Headers validation error: 'String does not match pattern .*' on property svc-custom-domain/,
        );
        assert.deepEqual(
          [await outboxCount(), await ticketCount()],
          [outboxAfterUser, ticketsAfterUser],
          'nothing was queued',
        );
      });

      it('sends nothing when verify_email is false, or when it is absent and email_verified is true; without it an unverified user gets one', async () => {
        const quiet = [newEmail(), newEmail()];
        assert.equal((await createUser({ email: quiet[0], verify_email: false })).statusCode, 201);
        assert.equal((await createUser({ email: quiet[1], email_verified: true })).statusCode, 201);
        const implicit = newEmail();
        assert.equal((await createUser({ email: implicit })).statusCode, 201);
        await smtp.next(implicit);
        for (const email of quiet) assert.equal(await outboxRowFor(email), undefined, email);
      });

      it('answers 409 custom_domain_conflict when the default domain is no longer ready and several others are', async () => {
        await patchTemplate({ body: '<a href="{{ url }}">verify</a>' });
        const third = 'login.brand-c.test';
        const created = await server.request({
          method: 'POST',
          url: '/api/v2/custom-domains',
          payload: { domain: third, type: 'svc_managed_certs' },
        });
        dns.setCname(third, created.json().verification.methods[0].record);
        assert.equal(
          (
            await server.request({
              method: 'POST',
              url: `/api/v2/custom-domains/${created.json().custom_domain_id}/verify`,
            })
          ).json().status,
          'ready',
        );
        assert.equal(
          (await server.request({ method: 'PATCH', url: '/api/v2/custom-domains/default', payload: { domain: third } }))
            .statusCode,
          200,
        );
        // The state a failed certificate or DNS re-check leaves: the default is there but no longer ready.
        await server.services.database.db
          .updateTable('custom_domains')
          .set({ status: 'failed' })
          .where('domain', '=', third)
          .execute();
        server.services.tenants.forget();
        try {
          const email = newEmail();
          const conflicted = await createUser({ email, verify_email: true });
          assert.deepEqual(conflicted.json(), {
            statusCode: 409,
            error: 'Conflict',
            message: 'The tenant has multiple verified custom domains.',
            errorCode: 'custom_domain_conflict',
          });
          assert.deepEqual(
            (await server.request({ url: `/api/v2/users-by-email?email=${encodeURIComponent(email)}` })).json(),
            [],
          );
          // Naming a domain resolves it.
          assert.equal(linkOf((await mailForNewUser({ 'svc-custom-domain': BRAND_B })).mail).host, BRAND_B);
        } finally {
          await server.services.database.db
            .updateTable('custom_domains')
            .set({ status: 'ready' })
            .where('domain', '=', third)
            .execute();
          await server.request({
            method: 'PATCH',
            url: '/api/v2/custom-domains/default',
            payload: { domain: server.domain },
          });
        }
      });

      it('returns an email-verification ticket on the selected domain that verifies once, before it expires, while the email is unchanged', async () => {
        const created = await createUser({ email: newEmail(), verify_email: false });
        const user = created.json();
        const ticket = await server.request({
          method: 'POST',
          url: '/api/v2/tickets/email-verification',
          headers: { 'svc-custom-domain': BRAND_B },
          payload: {
            user_id: user.user_id,
            result_url: 'https://app.example.com/done?from=ticket',
            includeEmailInRedirect: false,
            ttl_sec: 0,
          },
        });
        assert.equal(ticket.statusCode, 201, ticket.body);
        assert.deepEqual(Object.keys(ticket.json()), ['ticket']);
        const link = new URL(ticket.json().ticket);
        assert.equal(link.host, BRAND_B);
        assert.equal(link.pathname, '/u/email-verification');
        const expiry = await server.services.database.db
          .selectFrom('email_verification_tickets')
          .select(['expires_at', 'created_at'])
          .where('user_id', '=', user.user_id)
          .executeTakeFirstOrThrow();
        assert.equal(
          Date.parse(expiry.expires_at) - Date.parse(expiry.created_at),
          432_000_000,
          'ttl_sec 0 means five days',
        );
        const followed = await follow(link);
        assert.equal(followed.statusCode, 302);
        const target = new URL(followed.headers.location as string);
        assert.equal(target.searchParams.get('from'), 'ticket', 'the result_url keeps its own query');
        assert.equal(target.searchParams.get('email'), null, 'includeEmailInRedirect false');
        assert.equal(target.searchParams.get('success'), 'true');
        assert.equal((await userById(user.user_id)).email_verified, true);

        const short = await server.request({
          method: 'POST',
          url: '/api/v2/tickets/email-verification',
          payload: { user_id: user.user_id, ttl_sec: 1 },
        });
        assert.equal(new URL(short.json().ticket).host, server.domain, 'without the header: the default domain');
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        const expired = await follow(new URL(short.json().ticket));
        assert.equal(expired.statusCode, 400);
        assert.match(expired.body, /This URL has expired/);

        const other = (await createUser({ email: newEmail(), verify_email: false })).json();
        const stale = await server.request({
          method: 'POST',
          url: '/api/v2/tickets/email-verification',
          payload: { user_id: other.user_id },
        });
        await server.request({
          method: 'PATCH',
          url: `/api/v2/users/${encodeURIComponent(other.user_id)}`,
          payload: { email: newEmail() },
        });
        assert.equal(
          (await follow(new URL(stale.json().ticket))).statusCode,
          404,
          'a link for a former address verifies nothing',
        );
        assert.equal((await userById(other.user_id)).email_verified, false);

        const missing = await server.request({
          method: 'POST',
          url: '/api/v2/tickets/email-verification',
          payload: { user_id: 'svc|000000000000000000000000' },
        });
        assert.deepEqual(missing.json(), {
          statusCode: 404,
          error: 'Not Found',
          message: 'The user does not exist.',
          errorCode: 'inexistent_user',
        });
        const badUrl = await server.request({
          method: 'POST',
          url: '/api/v2/tickets/email-verification',
          payload: { user_id: other.user_id, result_url: 'javascript:alert(1)' },
        });
        assert.equal(badUrl.statusCode, 400);
        const { token } = await server.clientWithScopes(['update:users']);
        const refused = await server.request({
          method: 'POST',
          url: '/api/v2/tickets/email-verification',
          payload: { user_id: other.user_id },
          token,
        });
        assert.equal(refused.json().message, 'Insufficient scope, expected any of: create:user_tickets');
      });

      it("answers another tenant's ticket on this tenant's host as not valid, and spends nothing", async () => {
        const other = await server.addTenant(`tickets-${kind}`, `tickets-${kind}.test`);
        const user = (
          await server.request({
            method: 'POST',
            url: '/api/v2/users',
            token: other.token,
            headers: { host: `tickets-${kind}.test` },
            payload: {
              email: newEmail(),
              connection: 'Username-Password-Authentication',
              password: 'Str0ng!Passw0rd-x',
              verify_email: false,
            },
          })
        ).json();
        const ticket = await server.request({
          method: 'POST',
          url: '/api/v2/tickets/email-verification',
          token: other.token,
          headers: { host: `tickets-${kind}.test` },
          payload: { user_id: user.user_id },
        });
        assert.equal(ticket.statusCode, 201, ticket.body);
        const link = new URL(ticket.json().ticket);
        const elsewhere = await follow(new URL(`https://${server.domain}${link.pathname}${link.search}`));
        assert.equal(elsewhere.statusCode, 404, elsewhere.body);
        assert.match(elsewhere.body, /This URL is not valid/);
        const verified = async () =>
          (
            await server.request({
              url: `/api/v2/users/${encodeURIComponent(user.user_id)}`,
              token: other.token,
              headers: { host: `tickets-${kind}.test` },
            })
          ).json().email_verified;
        assert.equal(await verified(), false);
        // Not spent: it still verifies on its own tenant's host, once.
        const own = await follow(link);
        assert.equal(own.statusCode, 200, own.body);
        assert.doesNotMatch(own.body, /already|not valid/i);
        assert.equal(await verified(), true);
      });

      // The link is public: anyone may send made-up or spent tickets. On SQLite those must not wait for (nor
      // take) the one write lock, or a flood of them would hold up every write of every tenant.
      if (kind === 'sqlite') {
        it('answers made-up and spent links from a read, while another process holds the write lock', async () => {
          const user = (await createUser({ email: newEmail(), verify_email: false })).json();
          const issue = async () =>
            new URL(
              (
                await server.request({
                  method: 'POST',
                  url: '/api/v2/tickets/email-verification',
                  payload: { user_id: user.user_id, result_url: 'https://app.example.com/done' },
                })
              ).json().ticket,
            );
          const spent = await issue();
          assert.equal((await follow(spent)).statusCode, 302);
          const usable = await issue();
          const writer = new BetterSqlite3(path.join(server.database.dataDir, 'tenantry.sqlite'));
          writer.exec('BEGIN IMMEDIATE');
          try {
            const madeUp = await follow(new URL(`https://${server.domain}/u/email-verification?ticket=made-up-ticket`));
            assert.equal(madeUp.statusCode, 404, madeUp.body);
            assert.match(madeUp.body, /This URL is not valid/);
            const again = await follow(spent);
            assert.equal(again.statusCode, 302, again.body);
            assert.equal(new URL(again.headers.location as string).searchParams.get('code'), 'already_used');
          } finally {
            writer.exec('ROLLBACK');
            writer.close();
          }
          // A usable ticket is spent under the lock, once it is free.
          const verified = await follow(usable);
          assert.equal(verified.statusCode, 302, verified.body);
          assert.equal(new URL(verified.headers.location as string).searchParams.get('success'), 'true');
          assert.equal((await follow(usable)).headers.location?.toString().includes('already_used'), true);
        });
      }

      it('refuses a result_url that matches the pattern but is no URL, and a link whose stored one is none shows its page', async () => {
        // Each of these passed the pattern and was stored; following its link then answered 500.
        const user = (await createUser({ email: newEmail(), verify_email: false })).json();
        for (const resultUrl of ['http://[bad', 'https://app.example.com:99999/', 'http://%zz']) {
          const ticket = await server.request({
            method: 'POST',
            url: '/api/v2/tickets/email-verification',
            payload: { user_id: user.user_id, result_url: resultUrl },
          });
          assert.equal(ticket.statusCode, 400, `${resultUrl}: ${ticket.body}`);
          assert.deepEqual(ticket.json(), {
            statusCode: 400,
            error: 'Bad Request',
            message: `Payload validation error: 'Object didn't pass validation for format result-url: ${resultUrl}' on property result_url (Where the link redirects once used (http or https)).`,
            errorCode: 'invalid_body',
          });
          const template = await patchTemplate({ resultUrl });
          assert.equal(template.statusCode, 400, `${resultUrl}: ${template.body}`);
          assert.equal(template.json().errorCode, 'invalid_body');
          assert.match(template.json().message, /format result-url/);
        }
        // A link stored before the check: it verifies and shows its page instead of failing.
        const ticket = await server.request({
          method: 'POST',
          url: '/api/v2/tickets/email-verification',
          payload: { user_id: user.user_id, result_url: 'https://app.example.com/done' },
        });
        assert.equal(ticket.statusCode, 201, ticket.body);
        await server.services.database.db
          .updateTable('email_verification_tickets')
          .set({ result_url: 'http://[bad' })
          .where('user_id', '=', user.user_id)
          .execute();
        const followed = await follow(new URL(ticket.json().ticket));
        assert.equal(followed.statusCode, 200, followed.body);
        assert.match(followed.body, /Your email was verified/);
        assert.equal((await userById(user.user_id)).email_verified, true);
      });

      it('sends a verification email from POST /jobs/verification-email and reports it in GET /jobs/{id}', async () => {
        await patchTemplate({ body: '<a href="{{ url }}">verify</a>' });
        const user = (await createUser({ email: newEmail(), verify_email: false })).json();
        const { token } = await server.clientWithScopes(['update:users']);
        const created = await server.request({
          method: 'POST',
          url: '/api/v2/jobs/verification-email',
          payload: { user_id: user.user_id },
          headers: { 'auth0-custom-domain': BRAND_A },
          token,
        });
        assert.equal(created.statusCode, 201, created.body);
        const job = created.json();
        assert.deepEqual(Object.keys(job), ['status', 'type', 'created_at', 'id']);
        assert.equal(job.status, 'pending');
        assert.equal(job.type, 'verification_email');
        assert.match(job.id, /^job_[0-9A-Za-z]{16}$/);
        assert.equal(linkOf(await smtp.next(user.email)).host, BRAND_A);
        const done = await eventually(async () => {
          const read = (await server.request({ url: `/api/v2/jobs/${job.id}` })).json();
          return read.status === 'completed' ? read : undefined;
        }, 'the job to complete');
        assert.deepEqual(done, { ...job, status: 'completed' });

        assert.equal(
          (
            await server.request({
              method: 'POST',
              url: '/api/v2/jobs/verification-email',
              payload: { user_id: 'svc|000000000000000000000000' },
            })
          ).statusCode,
          404,
        );
        assert.equal((await server.request({ url: '/api/v2/jobs/job_0000000000000000' })).statusCode, 404);
        const malformed = await server.request({ url: '/api/v2/jobs/nope' });
        assert.equal(malformed.statusCode, 400);
        assert.equal(malformed.json().errorCode, 'invalid_uri');
        const { token: ticketsOnly } = await server.clientWithScopes(['create:user_tickets']);
        const refused = await server.request({
          method: 'POST',
          url: '/api/v2/jobs/verification-email',
          payload: { user_id: user.user_id },
          token: ticketsOnly,
        });
        assert.equal(refused.json().message, 'Insufficient scope, expected any of: update:users');

        await patchTemplate({ enabled: false });
        try {
          const disabled = await server.request({
            method: 'POST',
            url: '/api/v2/jobs/verification-email',
            payload: { user_id: user.user_id },
          });
          assert.deepEqual(disabled.json(), {
            statusCode: 400,
            error: 'Bad Request',
            message: 'The verify_email template is disabled.',
            errorCode: 'operation_not_supported',
          });
          const email = newEmail();
          assert.equal(
            (await createUser({ email, verify_email: true })).statusCode,
            201,
            'a disabled template sends nothing but creates the user',
          );
          assert.equal(await outboxRowFor(email), undefined);
        } finally {
          await patchTemplate({ enabled: true });
        }
      });

      it('retries an email the SMTP server refuses for now (4xx) and fails one it refuses for good (5xx), never showing the SMTP password', async () => {
        await patchTemplate({ body: '<a href="{{ url }}">verify</a>' });
        const refusedBefore = smtp.refusedCount();
        smtp.refuseNext(1, 451, 'Greylisted, try again later');
        const { user, mail } = await mailForNewUser();
        // The retry delivers the email as it was queued: its link carries the ticket stored for the user.
        assert.deepEqual(await ticketHashesOf(user.user_id), [
          sha256Hex(linkOf(mail).searchParams.get('ticket') ?? ''),
        ]);
        assert.equal(smtp.refusedCount(), refusedBefore + 1);
        const retried = await eventually(async () => {
          const row = await outboxRowFor(user.email);
          return row?.status === 'sent' ? row : undefined;
        }, 'the retried email to be recorded as sent');
        assert.equal(retried.attempt_count, 2);

        smtp.refuseNext(5, 550, 'No such mailbox');
        try {
          const target = (await createUser({ email: newEmail(), verify_email: false })).json();
          const job = (
            await server.request({
              method: 'POST',
              url: '/api/v2/jobs/verification-email',
              payload: { user_id: target.user_id },
            })
          ).json();
          await eventually(
            async () =>
              (await server.request({ url: `/api/v2/jobs/${job.id}` })).json().status === 'failed' ? true : undefined,
            'the job to fail',
          );
          const row = await outboxRowFor(target.email);
          assert.equal(row?.status, 'failed');
          assert.equal(row?.attempt_count, 1, 'a 5xx is not retried');
          assert.match(row?.last_error ?? '', /550/);
          assert.equal(smtp.refusedCount(), refusedBefore + 2);
        } finally {
          smtp.refuseNext(0, 0, '');
        }
        const rows = await server.services.database.db.selectFrom('email_outbox').select(['last_error']).execute();
        assert.ok(rows.every((r) => !(r.last_error ?? '').includes(SMTP_PASSWORD)));
        assert.match(server.services.mailWorker!.description, /^SMTP smtp:\/\/mailer:\*\*\*@127\.0\.0\.1:\d+$/);
      });

      it('lists the new operations and the custom-domain header in the OpenAPI document', async () => {
        const document = (await server.app.inject({ url: '/api/v2/openapi.json' })).json();
        for (const path of [
          '/api/v2/email-templates',
          '/api/v2/email-templates/{templateName}',
          '/api/v2/tickets/email-verification',
          '/api/v2/jobs/verification-email',
          '/api/v2/jobs/{id}',
        ]) {
          assert.ok(document.paths[path], path);
        }
        const headers = (document.paths['/api/v2/users'].post.parameters as Array<{ in: string; name: string }>)
          .filter((p) => p.in === 'header')
          .map((p) => p.name);
        assert.deepEqual(headers.sort(), ['auth0-custom-domain', 'svc-custom-domain']);
      });
    });

    describe(`the mail outbox lease (${kind})`, () => {
      let server: TestServer;
      let smtp: SmtpReceiver;
      before(async () => {
        smtp = await startSmtpReceiver();
        server = await startTestServer(kind, { SMTP_URL: smtp.url, MAIL_WORKER: 'false' });
      });
      after(async () => {
        await server.close();
        await smtp.close();
      });

      const queueFor = async (email: string) => {
        const created = await server.request({
          method: 'POST',
          url: '/api/v2/users',
          payload: { connection: 'Username-Password-Authentication', password: PASSWORD, email, verify_email: true },
        });
        assert.equal(created.statusCode, 201, created.body);
      };
      const spec = { table: 'email_outbox', key: 'id', returning: ['id'] as const };

      it('never hands one email to two concurrent claims', async () => {
        for (let i = 0; i < 12; i++) await queueFor(`claim${i}@example.com`);
        const at = new Date().toISOString();
        const [a, b] = await Promise.all([
          claimDueRows<{ id: string }>(server.services.database, spec, { at, leaseMs: 60_000 }, 12),
          claimDueRows<{ id: string }>(server.services.database, spec, { at, leaseMs: 60_000 }, 12),
        ]);
        const ids = [...a, ...b].map((r) => r.id);
        assert.equal(ids.length, 12);
        assert.equal(new Set(ids).size, 12);
        assert.deepEqual(
          await claimDueRows(server.services.database, spec, { at, leaseMs: 60_000 }, 12),
          [],
          'leased rows are not due',
        );
        await server.services.database.db.deleteFrom('email_outbox').execute();
      });

      it('sends again, once its lease runs out, an email whose worker died before sending it', async () => {
        await queueFor('crash@example.com');
        // A worker claims it and dies: nothing but its lease is left behind.
        const leaseUntil = Date.now() + 1_500;
        const claimed = await claimDueRows<{ id: string }>(
          server.services.database,
          spec,
          { leaseMs: leaseUntil - Date.now() },
          10,
        );
        assert.equal(claimed.length, 1);
        const { config } = server.services;
        const outbox = new MailOutbox(server.services.database, server.services.secretBox);
        const worker = new MailWorker(
          outbox,
          smtpTransport(smtp.url, { timeoutMs: 10_000, concurrency: 2 }),
          { ...config, mailPollMs: 50 },
          server.services.logger,
        );
        worker.start();
        try {
          const mail = await smtp.next('crash@example.com');
          assert.ok(Date.now() >= leaseUntil, 'not before the lease ran out');
          assert.match(mail.messageId ?? '', new RegExp(`^<${claimed[0]!.id}@tenantry>$`));
          await eventually(
            async () =>
              (
                await server.services.database.db
                  .selectFrom('email_outbox')
                  .select('status')
                  .where('id', '=', claimed[0]!.id)
                  .executeTakeFirst()
              )?.status === 'sent'
                ? true
                : undefined,
            'the send to be recorded',
          );
        } finally {
          await worker.stop();
        }
      });
    });
    describe(`the development mailbox (${kind})`, () => {
      let server: TestServer;
      before(async () => {
        server = await startTestServer(kind, { MAIL_POLL_MS: '50' });
      });
      after(() => server.close());

      const cli = (...args: string[]) =>
        runCli({ PATH: process.env.PATH ?? '', DATA_DIR: server.database.dataDir, LOG_LEVEL: 'silent' }, [
          'mailbox',
          ...args,
        ]);

      it('writes emails to DATA_DIR/mailbox when SMTP_URL is unset, and tenantry mailbox lists and shows them', async () => {
        assert.match(
          server.services.mailWorker!.description,
          /^the development mailbox .*mailbox \(tenantry mailbox list\)$/,
        );
        const created = await server.request({
          method: 'POST',
          url: '/api/v2/users',
          payload: { connection: 'Username-Password-Authentication', password: PASSWORD, email: 'dev@example.com' },
        });
        assert.equal(created.statusCode, 201, created.body);
        const dir = mailboxDir(server.database.dataDir);
        const [entry] = await eventually(async () => {
          const entries = listMailbox(dir);
          return entries.length > 0 ? entries : undefined;
        }, 'the email in the mailbox');
        assert.equal(entry!.to, 'dev@example.com');
        assert.equal(entry!.subject, 'Verify your email');
        // The .eml is the message as it would go over SMTP.
        const parsed = await simpleParser(fs.readFileSync(path.join(dir, `${entry!.id}.eml`)));
        assert.equal(parsed.subject, 'Verify your email');
        assert.equal(linkOf(parsed).host, server.domain);

        const listed = await cli('list');
        assert.equal(listed.code, 0, listed.stderr);
        assert.equal(listed.stdout, `${entry!.id}\t${entry!.date}\tdev@example.com\tVerify your email\n`);
        const shown = await cli('show', entry!.id);
        assert.equal(shown.code, 0, shown.stderr);
        assert.match(
          shown.stdout,
          /^Id: msg_\S+\nDate: \S+\nFrom: no-reply@tenant\.test\nTo: dev@example\.com\nSubject: Verify your email\nFile: \S+\.eml\n\n<html>/,
        );
        assert.ok(shown.stdout.includes(linkOf(parsed).toString()), 'the link is shown');
        const missing = await cli('show', 'msg_1111111111111111111111');
        assert.equal(missing.code, 2);
        assert.match(missing.stderr, /^tenantry: mailbox show: no email "msg_1111111111111111111111"/);
        assert.equal(
          readMailboxEntry(dir, '../tenantry'),
          undefined,
          'what is not an id never reaches the file system',
        );
      });
    });
  }),
);

describe('mail settings', () => {
  it('refuses an SMTP_URL that is not smtp(s) without echoing it, and a lease shorter than the sends', () => {
    assert.throws(
      () => loadConfig({ SMTP_URL: 'http://user:hunter2@mail.example.com' }),
      (error: Error) => error instanceof ConfigError && !error.message.includes('hunter2'),
    );
    assert.throws(() => loadConfig({ MAIL_TIMEOUT_MS: '10000', MAIL_LEASE_MS: '20000' }), /MAIL_LEASE_MS/);
    assert.equal(
      loadConfig({ SMTP_URL: 'smtps://u:p@mail.example.com:465' }).smtpUrl,
      'smtps://u:p@mail.example.com:465',
    );
  });
});
