import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Management, ManagementClient } from 'auth0';
import { databaseKinds } from '../../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../../helpers/dns-server.ts';
import { startHttpsTestServer, type HttpsTestServer } from '../../helpers/https.ts';
import { ADMIN_ID, ADMIN_SECRET } from '../../helpers/server.ts';
import { startSmtpReceiver, type SmtpReceiver } from '../../helpers/smtp-receiver.ts';

const BRAND = 'login.sdk-brand.test';

const linkIn = (html: string | false | undefined) =>
  new URL(/href="([^"]+)"/.exec(String(html))![1]!.replace(/&amp;/g, '&'));

// The official SDK's withCustomDomainHeader sends the original's Auth0-Custom-Domain header on the
// operations that email users; these tests drive the email operations exactly as a customer would.
for (const kind of databaseKinds()) {
  describe(`auth0 SDK v7 against email templates, tickets and jobs (${kind})`, () => {
    let https: HttpsTestServer;
    let dns: TestDnsServer;
    let smtp: SmtpReceiver;
    before(async () => {
      dns = await startDnsServer();
      smtp = await startSmtpReceiver();
      https = await startHttpsTestServer(kind, {
        SMTP_URL: smtp.url,
        MAIL_POLL_MS: '50',
        DNS_SERVERS: dns.address,
        CUSTOM_DOMAIN_EDGE_DOMAIN: 'edge.sdk.test',
      });
      const created = await https.server.request({
        method: 'POST',
        url: '/api/v2/custom-domains',
        payload: { domain: BRAND, type: 'svc_managed_certs' },
        headers: { host: https.domain },
      });
      assert.equal(created.statusCode, 201, created.body);
      dns.setCname(BRAND, created.json().verification.methods[0].record);
      const verified = await https.server.request({
        method: 'POST',
        url: `/api/v2/custom-domains/${created.json().custom_domain_id}/verify`,
        headers: { host: https.domain },
      });
      assert.equal(verified.json().status, 'ready', verified.body);
    });
    after(async () => {
      await https.close();
      await smtp.close();
      await dns.close();
    });

    const sdk = (customDomain?: string) =>
      new ManagementClient({
        domain: https.domain,
        clientId: ADMIN_ID,
        clientSecret: ADMIN_SECRET,
        ...(customDomain ? { withCustomDomainHeader: customDomain } : {}),
      });

    it('updates the verify_email template and sends its email, with links on the custom domain the SDK names', async () => {
      const client = sdk(BRAND);
      const updated = await client.emailTemplates.update('verify_email', {
        body: '<p>{{ custom_domain.domain }}</p><a href="{{ url }}">verify</a>',
        subject: 'Welcome',
      });
      assert.equal(updated.subject, 'Welcome');
      assert.equal((await client.emailTemplates.get('verify_email')).body, updated.body);

      const user = await client.users.create({
        connection: 'Username-Password-Authentication',
        email: 'sdk.mail@example.com',
        password: 'correct horse battery',
        verify_email: true,
      });
      const mail = await smtp.next('sdk.mail@example.com');
      assert.equal(mail.subject, 'Welcome');
      assert.match(String(mail.html), new RegExp(`<p>${BRAND.replace(/\./g, '\\.')}</p>`));
      assert.equal(linkIn(mail.html).host, BRAND);

      const ticket = await client.tickets.verifyEmail({
        user_id: user.user_id!,
        result_url: 'https://app.example.com/done',
      });
      assert.equal(new URL(ticket.ticket).host, BRAND);

      const job = await client.jobs.verificationEmail.create({ user_id: user.user_id! });
      assert.equal(job.type, 'verification_email');
      assert.match(job.id, /^job_/);
      assert.equal(linkIn((await smtp.next('sdk.mail@example.com')).html).host, BRAND);
      assert.equal((await client.jobs.get(job.id)).id, job.id);
    });

    it('surfaces a custom domain the tenant does not have as the SDK BadRequestError, creating nothing', async () => {
      const client = sdk('unknown.sdk.test');
      await assert.rejects(
        client.users.create({
          connection: 'Username-Password-Authentication',
          email: 'never@example.com',
          password: 'correct horse battery',
          verify_email: true,
        }),
        (error: unknown) => {
          assert.ok(error instanceof Management.BadRequestError, String(error));
          assert.equal(error.statusCode, 400);
          assert.match(JSON.stringify(error.body), /The custom domain does not exist for the tenant\./);
          return true;
        },
      );
      assert.deepEqual(await sdk().users.listUsersByEmail({ email: 'never@example.com' }), []);
    });
  });
}
