import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { databaseKinds } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

const LIMIT_MS = 500;
/** Thread start-up and a loaded machine: the answer still comes long before an unbounded render's. */
const MARGIN_MS = 1500;
const EDGE = 'edge.preview.test';
const READY = 'login.brand.test';
const PENDING = 'pending.brand.test';
const PREVIEW = '/api/v2/email-templates/verify_email/preview';
const DEFAULT_BODY = [
  '<html>',
  '  <body>',
  '    <p>Hello Jane Doe,</p>',
  '    <p>Please confirm that jane.doe@example.com is your email address:</p>',
  '    <p><a href="https://tenant.test/u/email-verification?ticket=preview-not-a-ticket">Verify my email</a></p>',
  '    <p>If you did not ask for this, you can ignore this email.</p>',
  '  </body>',
  '</html>',
].join('\n');

for (const kind of databaseKinds()) {
  describe(`POST /api/v2/email-templates/{templateName}/preview (${kind})`, () => {
    let server: TestServer;
    let dns: TestDnsServer;
    before(async () => {
      dns = await startDnsServer();
      server = await startTestServer(kind, {
        MAIL_WORKER: 'false',
        TEMPLATE_RENDER_TIMEOUT_MS: String(LIMIT_MS),
        DNS_SERVERS: dns.address,
        CUSTOM_DOMAIN_EDGE_DOMAIN: EDGE,
      });
      const created = await server.request({
        method: 'POST',
        url: '/api/v2/custom-domains',
        payload: { domain: READY, type: 'svc_managed_certs', domain_metadata: { brand: 'Brand' } },
      });
      assert.equal(created.statusCode, 201, created.body);
      dns.setCname(READY, created.json().verification.methods[0].record);
      const verified = await server.request({
        method: 'POST',
        url: `/api/v2/custom-domains/${created.json().custom_domain_id}/verify`,
      });
      assert.equal(verified.json().status, 'ready', verified.body);
      const pending = await server.request({
        method: 'POST',
        url: '/api/v2/custom-domains',
        payload: { domain: PENDING, type: 'svc_managed_certs' },
      });
      assert.equal(pending.statusCode, 201, pending.body);
    });
    after(async () => {
      await server.close();
      await dns.close();
    });

    const preview = (payload: unknown, headers: Record<string, string> = {}, token?: string | null) =>
      server.request({
        method: 'POST',
        url: PREVIEW,
        payload: payload as Record<string, unknown>,
        headers,
        ...(token === undefined ? {} : { token }),
      });
    const rowCount = async (table: 'email_outbox' | 'email_verification_tickets') =>
      Number(
        (
          await server.services.database.db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );

    it('renders the default template for a sample user and a placeholder link on the canonical domain; nothing is stored or sent', async () => {
      const response = await preview({});
      assert.equal(response.statusCode, 200, response.body);
      assert.deepEqual(response.json(), {
        template: 'verify_email',
        domain: 'tenant.test',
        from: 'no-reply@tenant.test',
        to: 'jane.doe@example.com',
        subject: 'Verify your email',
        body: DEFAULT_BODY,
        url: 'https://tenant.test/u/email-verification?ticket=preview-not-a-ticket',
      });
      // The body is an object, as for every POST with one: `{}` previews the stored template.
      const bare = await server.request({ method: 'POST', url: PREVIEW });
      assert.deepEqual(bare.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: "Payload validation error: 'Expected type object but found type null'.",
        errorCode: 'invalid_body',
      });
      assert.equal(await rowCount('email_outbox'), 0, 'no email queued');
      assert.equal(await rowCount('email_verification_tickets'), 0, 'no ticket made');
      // The placeholder verifies nothing.
      const followed = await server.app.inject({
        url: '/u/email-verification?ticket=preview-not-a-ticket',
        headers: { host: server.domain },
      });
      assert.notEqual(followed.statusCode, 200);
    });

    it('renders for a ready custom domain chosen with the header, with its metadata, as a real send would', async () => {
      const body =
        '<p>{{ custom_domain.domain }} / {{ custom_domain.domain_metadata.brand }}</p><a href="{{ url }}">go</a>';
      for (const header of ['svc-custom-domain', 'auth0-custom-domain']) {
        const response = await preview(
          { body, subject: '{{ custom_domain.domain_metadata.brand }}: verify' },
          {
            [header]: READY.toUpperCase(),
          },
        );
        assert.equal(response.statusCode, 200, response.body);
        assert.deepEqual(response.json(), {
          template: 'verify_email',
          domain: READY,
          from: `no-reply@${READY}`,
          to: 'jane.doe@example.com',
          subject: 'Brand: verify',
          body: `<p>${READY} / Brand</p><a href="https://${READY}/u/email-verification?ticket=preview-not-a-ticket">go</a>`,
          url: `https://${READY}/u/email-verification?ticket=preview-not-a-ticket`,
        });
      }
      // The canonical domain named in the header is the canonical context, as for sends.
      assert.equal((await preview({}, { 'svc-custom-domain': server.domain })).json().domain, server.domain);
    });

    it('previews unsaved members without storing them, and the stored template when none is given', async () => {
      const before = (await server.request({ url: '/api/v2/email-templates/verify_email' })).json();
      const unsaved = await preview({
        body: '<b>{{ user.email }}</b>',
        subject: 'Hi {{ user.nickname }}',
        from: 'Support <support@{{ custom_domain.domain }}>',
      });
      assert.equal(unsaved.statusCode, 200, unsaved.body);
      assert.equal(unsaved.json().body, '<b>jane.doe@example.com</b>');
      assert.equal(unsaved.json().subject, 'Hi jane.doe');
      assert.equal(unsaved.json().from, 'Support <support@tenant.test>');
      assert.deepEqual((await server.request({ url: '/api/v2/email-templates/verify_email' })).json(), before);

      const patched = await server.request({
        method: 'PATCH',
        url: '/api/v2/email-templates/verify_email',
        payload: { subject: 'Stored: {{ user.name }}', body: '<i>stored</i>', enabled: false },
      });
      assert.equal(patched.statusCode, 200, patched.body);
      const stored = (await preview({})).json();
      assert.equal(stored.subject, 'Stored: Jane Doe');
      assert.equal(stored.body, '<i>stored</i>');
      // Given members replace the stored ones; the others stay the stored ones.
      const mixed = (await preview({ subject: 'Changed' })).json();
      assert.deepEqual([mixed.subject, mixed.body], ['Changed', '<i>stored</i>']);
      const reset = await server.request({
        method: 'PATCH',
        url: '/api/v2/email-templates/verify_email',
        payload: { subject: null, body: null, enabled: true },
      });
      assert.equal(reset.statusCode, 200, reset.body);
    });

    it('refuses a custom domain that is not ready or not the tenant’s, as sends do', async () => {
      const other = await server.addTenant('other-tenant', 'other.test');
      const theirs = await server.app.inject({
        method: 'POST',
        url: '/api/v2/custom-domains',
        headers: { host: 'other.test', authorization: `Bearer ${other.token}` },
        payload: { domain: 'login.other.test', type: 'svc_managed_certs' },
      });
      assert.equal(theirs.statusCode, 201, theirs.body);
      for (const domain of [PENDING, 'login.other.test', 'unknown.example.com']) {
        const response = await preview({}, { 'svc-custom-domain': domain });
        assert.deepEqual(
          response.json(),
          {
            statusCode: 400,
            error: 'Bad Request',
            message: 'The custom domain does not exist for the tenant.',
            errorCode: 'inexistent_custom_domain',
          },
          domain,
        );
      }
      const conflicting = await preview({}, { 'svc-custom-domain': READY, 'auth0-custom-domain': server.domain });
      assert.equal(conflicting.statusCode, 400);
      assert.equal(conflicting.json().errorCode, 'invalid_headers');
    });

    it('refuses a template that loops past the time limit or outgrows the memory limit with a clear 400, within the limit', async () => {
      for (const [body, reason] of [
        ['{% assign a = (1..2000000) %}{{ a | find_exp: "i", "i < 0" }}', /took longer than the limit of 500 ms/],
        [
          '{% for i in (1..100000) %}{% for j in (1..100000) %}{% endfor %}{% endfor %}',
          /took longer than the limit of 500 ms/,
        ],
        [
          '{% assign s = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" %}{% for i in (1..40) %}{% assign s = s | append: s %}{% endfor %}{{ s }}',
          /memory alloc limit exceeded/,
        ],
      ] as const) {
        const started = performance.now();
        const response = await preview({ body });
        const ms = performance.now() - started;
        assert.equal(response.statusCode, 400, response.body);
        const error = response.json();
        assert.equal(error.errorCode, 'invalid_body');
        assert.match(error.message, /^Invalid Liquid template in body: /);
        assert.match(error.message, reason);
        assert.ok(ms < LIMIT_MS + MARGIN_MS, `answered after ${Math.round(ms)} ms`);
      }
      // The threads are still there for the next preview.
      assert.equal((await preview({})).statusCode, 200);
    });

    it('refuses a template that renders past its size limit, however little source makes it, with a clear 400', async () => {
      const piece = 'x'.repeat(99_000);
      for (const [member, source, limit] of [
        // 99 KB of source, 3 MB of output (3,000 turns made 297 MB, which came back whole and held up the
        // server); within this test's time limit.
        ['body', `{% for i in (1..30) %}${piece}{% endfor %}`, 1_000_000],
        ['body', `{% for i in (1..120) %}{% for j in (1..120) %}${'x'.repeat(80)}{% endfor %}{% endfor %}`, 1_000_000],
        ['subject', '{% for i in (1..100) %}xxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}', 2_000],
      ] as const) {
        const response = await preview({ [member]: source });
        assert.equal(response.statusCode, 400, response.body.slice(0, 200));
        assert.equal(response.json().errorCode, 'invalid_body');
        assert.match(
          response.json().message,
          new RegExp(
            `^Invalid Liquid template in ${member}: renders to \\d+ characters, more than the limit of ${limit}$`,
          ),
        );
      }
      // Up to the limit, it renders: a body of 999,000 characters.
      const largest = await preview({ body: `{% for i in (1..999) %}${'y'.repeat(1000)}{% endfor %}` });
      assert.equal(largest.statusCode, 200);
      assert.equal((largest.json() as { body: string }).body.length, 999_000);
    });

    it('refuses Liquid that does not parse, a from that is no address, unknown members and templates', async () => {
      assert.deepEqual(
        (await preview({ body: '{% if %}' })).json().message.split(':')[0],
        'Invalid Liquid template in body',
      );
      assert.deepEqual((await preview({ from: '{{ user.name }}' })).json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: 'Invalid from: "{{ user.name }}" is not an email address (e.g. "Acme <no-reply@acme.example>").',
        errorCode: 'invalid_body',
      });
      const unknownMember = await preview({ body: '<p>x</p>', user: { email: 'real@example.com' } });
      assert.deepEqual(unknownMember.json(), {
        statusCode: 400,
        error: 'Bad Request',
        message: "Payload validation error: 'Additional properties not allowed: user'.",
        errorCode: 'invalid_body',
      });
      const unknownTemplate = await server.request({
        method: 'POST',
        url: '/api/v2/email-templates/reset_email/preview',
        payload: {},
      });
      assert.equal(unknownTemplate.statusCode, 400, unknownTemplate.body);
      assert.match(unknownTemplate.json().message, /^Path validation error: .* on property templateName/);
      assert.equal((await preview({ body: '' })).statusCode, 400);
    });

    it('needs read:email_templates', async () => {
      const reader = await server.clientWithScopes(['read:email_templates']);
      assert.equal((await preview({}, {}, reader.token)).statusCode, 200);
      const writer = await server.clientWithScopes(['update:email_templates']);
      assert.deepEqual((await preview({}, {}, writer.token)).json(), {
        statusCode: 403,
        error: 'Forbidden',
        message: 'Insufficient scope, expected any of: read:email_templates',
        errorCode: 'insufficient_scope',
      });
      assert.equal((await preview({}, {}, null)).statusCode, 401);
    });
  });
}
