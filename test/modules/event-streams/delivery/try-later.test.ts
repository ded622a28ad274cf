import assert from 'node:assert/strict';
import { after, afterEach, before, describe, it } from 'node:test';
import { retryAfterMs } from '../../../../src/modules/event-streams/delivery/send.ts';
import { eachDatabase } from '../../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../../helpers/server.ts';
import {
  startWebhookReceiver,
  waitUntil,
  type ProgrammedAnswer,
  type WebhookReceiver,
} from '../../../helpers/webhook-receiver.ts';

/** Retry-After is honoured up to this; the schedule's own steps are much shorter. */
const RETRY_AFTER_MAX_MS = 3000;

describe('Retry-After values', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  it('reads delta-seconds and each HTTP-date form, and nothing else', () => {
    assert.equal(retryAfterMs('2', now), 2000);
    assert.equal(retryAfterMs(' 0 ', now), 0);
    assert.equal(retryAfterMs('Wed, 01 Jan 2025 00:00:05 GMT', now), 5000);
    assert.equal(retryAfterMs('Wednesday, 01-Jan-25 00:00:07 GMT', now), 7000);
    assert.equal(retryAfterMs('Tue, 31 Dec 2024 23:00:00 GMT', now), 0, 'a date already past asks for no wait');
    for (const unreadable of [undefined, '', '-1', '1.5', 'soon', '2025-01-01T00:00:09Z']) {
      assert.equal(retryAfterMs(unreadable, now), undefined, String(unreadable));
    }
  });
});

describe('"try later" answers from webhooks', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`"try later" answers from webhooks (${kind})`, () => {
      let server: TestServer;
      let receiver: WebhookReceiver | undefined;
      let streamId: string | undefined;
      before(async () => {
        server = await startTestServer(kind, {
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_RETRY_SCHEDULE_MS: '50,100,200',
          DELIVERY_RETRY_AFTER_MAX_MS: String(RETRY_AFTER_MAX_MS),
          DELIVERY_POLL_MS: '20',
        });
      });
      after(() => server.close());
      afterEach(async () => {
        if (streamId) await server.request({ method: 'DELETE', url: `/api/v2/event-streams/${streamId}` });
        streamId = undefined;
        await receiver?.close();
      });

      /** A stream to a receiver answering `answers` then 204, and one user created: the delivery's requests and its final state. */
      const deliverOnce = async (answers: ProgrammedAnswer[]) => {
        receiver = await startWebhookReceiver();
        receiver.program(answers, 204);
        const created = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: {
            name: `try-later-${Date.now()}`,
            subscriptions: [{ event_type: 'user.created' }],
            destination: {
              type: 'webhook',
              configuration: {
                webhook_endpoint: receiver.url,
                webhook_authorization: { method: 'bearer', token: 'try-later-token' },
              },
            },
          },
        });
        assert.equal(created.statusCode, 201, created.body);
        streamId = created.json().id as string;
        const user = await server.request({
          method: 'POST',
          url: '/api/v2/users',
          payload: {
            connection: 'Username-Password-Authentication',
            email: `try-later-${Date.now()}@example.com`,
            password: 'correct horse battery',
          },
        });
        assert.equal(user.statusCode, 201, user.body);
        const [first] = await receiver.waitFor((r) => r.length >= 1, 10_000);
        const eventId = first!.json().id as string;
        const db = server.services.database.db;
        const row = () =>
          db
            .selectFrom('deliveries')
            .select(['status', 'next_attempt_at'])
            .where('stream_id', '=', streamId!)
            .where('event_id', '=', eventId)
            .executeTakeFirstOrThrow();
        const settled = async (timeoutMs: number) => {
          await waitUntil(
            async () => (await row()).status !== 'pending',
            timeoutMs,
            () => `delivery ${eventId} to settle`,
          );
          const attempts = await db
            .selectFrom('delivery_attempts')
            .select('status')
            .where('stream_id', '=', streamId!)
            .where('event_id', '=', eventId)
            .orderBy('seq')
            .execute();
          return {
            status: (await row()).status,
            attempts: attempts.map((a) => a.status),
            requests: receiver!.requests,
          };
        };
        return { settled, row };
      };
      const gap = (requests: ReadonlyArray<{ at: number }>, i: number) => requests[i]!.at - requests[i - 1]!.at;

      it('retries a 429 on the schedule and delivers on the retry', async () => {
        const { settled } = await deliverOnce([429]);
        const { status, attempts, requests } = await settled(10_000);
        assert.equal(status, 'delivered');
        assert.deepEqual(attempts, ['failed', 'delivered']);
        assert.equal(requests.length, 2);
        assert.ok(gap(requests, 1) >= 45, 'after the first step of the schedule');
      });

      it('retries 408, 425 and 503 too', async () => {
        const { settled } = await deliverOnce([408, 425, 503]);
        const { status, attempts } = await settled(10_000);
        assert.equal(status, 'delivered');
        assert.deepEqual(attempts, ['failed', 'failed', 'failed', 'delivered']);
      });

      for (const refused of [400, 404, 410]) {
        it(`fails a ${refused} at once, whatever its Retry-After`, async () => {
          const { settled } = await deliverOnce([{ status: refused, headers: { 'retry-after': '1' } }]);
          const { status, attempts, requests } = await settled(10_000);
          assert.equal(status, 'failed');
          assert.deepEqual(attempts, ['failed']);
          await new Promise((r) => setTimeout(r, 300));
          assert.equal(requests.length, 1, 'never retried');
        });
      }

      it('waits as long as a Retry-After in seconds asks', async () => {
        const { settled, row } = await deliverOnce([{ status: 429, headers: { 'retry-after': '2' } }]);
        const notBefore = new Date(receiver!.requests[0]!.at + 1000).toISOString();
        await waitUntil(
          async () => (await row()).next_attempt_at > notBefore,
          5000,
          () => 'the retry to be scheduled past the schedule step',
        );
        const { status, requests } = await settled(10_000);
        assert.equal(status, 'delivered');
        assert.ok(gap(requests, 1) >= 1990, `retried after ${gap(requests, 1)} ms, not 50`);
      });

      it('waits until a Retry-After date', async () => {
        // HTTP-dates have whole seconds: the date is 2 to 3 s ahead.
        const date = new Date(Math.floor(Date.now() / 1000) * 1000 + 3000).toUTCString();
        const { settled } = await deliverOnce([{ status: 503, headers: { 'retry-after': date } }]);
        const { status, requests } = await settled(10_000);
        assert.equal(status, 'delivered');
        assert.ok(
          requests[1]!.at >= Date.parse(date) - 10,
          `retried at ${new Date(requests[1]!.at).toISOString()}, before ${date}`,
        );
      });

      it('caps a huge Retry-After at DELIVERY_RETRY_AFTER_MAX_MS', async () => {
        const { settled } = await deliverOnce([{ status: 429, headers: { 'retry-after': '86400' } }]);
        const { status, requests } = await settled(RETRY_AFTER_MAX_MS + 10_000);
        assert.equal(status, 'delivered');
        const waited = gap(requests, 1);
        assert.ok(
          waited >= RETRY_AFTER_MAX_MS - 10 && waited < RETRY_AFTER_MAX_MS + 5000,
          `retried after ${waited} ms`,
        );
      });

      it('adds no attempts beyond the schedule', async () => {
        const busy = { status: 429, headers: { 'retry-after': '0' } };
        const { settled } = await deliverOnce([busy, busy, busy, busy, busy]);
        const { status, attempts, requests } = await settled(10_000);
        assert.equal(status, 'failed');
        assert.deepEqual(attempts, ['failed', 'failed', 'failed', 'failed']);
        await new Promise((r) => setTimeout(r, 500));
        assert.equal(requests.length, 4);
      });
    });
  }),
);
