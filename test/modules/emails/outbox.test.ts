import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { transaction } from '../../../src/db/database.ts';
import { databaseKinds } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';

for (const kind of databaseKinds()) {
  describe(`GET /api/v2/emails/outbox (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      // No worker: queued emails stay pending, so the listing shows them as the API saw them queued.
      server = await startTestServer(kind, { MAIL_WORKER: 'false' });
    });
    after(() => server.close());

    const queue = (tenantId: string, to: string, failure?: string) =>
      transaction(server.services.database, (trx) =>
        server.services.mailOutbox.queue(trx, {
          tenantId,
          template: 'verify_email',
          from: 'login@example.com',
          to,
          subject: `Verify ${to}`,
          html: '<a href="https://example.com/u/email-verification?ticket=secret-ticket">Verify</a>',
          ...(failure ? { failure } : {}),
        }),
      );

    it("lists the tenant's emails newest first, pages and filters them, never their bodies; read:email_outbox only", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push(await queue(server.tenant.id, `user${i}@example.com`));
        // Distinct creation times, so "newest first" has one answer.
        await new Promise((resolve) => setTimeout(resolve, 3));
      }
      const failed = await queue(server.tenant.id, 'broken@example.com', 'The template could not be rendered');
      const other = await server.addTenant('other-tenant', 'other.test');
      await queue(other.tenant.id, 'elsewhere@example.com');

      const all = await server.request({ url: '/api/v2/emails/outbox' });
      assert.equal(all.statusCode, 200, all.body);
      const body = all.json();
      assert.deepEqual(
        body.emails.map((e: { id: string }) => e.id),
        [failed, ...ids.slice().reverse()],
      );
      assert.ok(!all.body.includes('secret-ticket'), 'no body, no link');
      assert.ok(!all.body.includes('elsewhere@example.com'), "another tenant's email is not listed");
      const first = body.emails[1];
      assert.deepEqual(Object.keys(first).sort(), [
        'attempts',
        'created_at',
        'from',
        'id',
        'next_attempt_at',
        'status',
        'subject',
        'template',
        'to',
      ]);
      assert.equal(first.status, 'pending');
      assert.equal(first.to, 'user4@example.com');
      assert.equal(body.emails[0].status, 'failed');
      assert.equal(body.emails[0].last_error, 'The template could not be rendered');

      const page1 = (await server.request({ url: '/api/v2/emails/outbox?take=2' })).json();
      assert.equal(page1.emails.length, 2);
      const page2 = (
        await server.request({ url: `/api/v2/emails/outbox?take=2&from=${encodeURIComponent(page1.next)}` })
      ).json();
      const page3 = (
        await server.request({ url: `/api/v2/emails/outbox?take=2&from=${encodeURIComponent(page2.next)}` })
      ).json();
      assert.deepEqual(
        [...page1.emails, ...page2.emails, ...page3.emails].map((e: { id: string }) => e.id),
        body.emails.map((e: { id: string }) => e.id),
      );
      assert.equal(page3.next, undefined);

      const onlyFailed = (await server.request({ url: '/api/v2/emails/outbox?status=failed' })).json();
      assert.deepEqual(
        onlyFailed.emails.map((e: { id: string }) => e.id),
        [failed],
      );
      assert.equal((await server.request({ url: '/api/v2/emails/outbox?from=not-a-cursor' })).statusCode, 400);
      assert.equal((await server.request({ url: '/api/v2/emails/outbox?status=bounced' })).statusCode, 400);

      const reader = await server.clientWithScopes(['read:email_outbox']);
      assert.equal((await server.request({ url: '/api/v2/emails/outbox', token: reader.token })).statusCode, 200);
      const templates = await server.clientWithScopes(['read:email_templates']);
      assert.equal((await server.request({ url: '/api/v2/emails/outbox', token: templates.token })).statusCode, 403);
      assert.equal((await server.request({ url: '/api/v2/emails/outbox', token: null })).statusCode, 401);
    });
  });
}
