import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { newId } from '../../../src/ids.ts';
import { eachDatabase } from '../../helpers/databases.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/** GET /api/v2/event-streams/{id}/attempts: a stream's attempts as they are recorded, polled by cursor. */

const T0 = '2026-03-01T10:00:00.000Z';
const T1 = '2026-03-01T10:00:01.000Z';
const T2 = '2026-03-01T10:00:02.500Z';
const T3 = '2026-03-01T10:00:03.000Z';
const T4 = '2026-03-01T10:00:04.000Z';

interface AttemptFixture {
  event: string;
  seq: number;
  status: 'delivered' | 'failed' | 'retrying';
  timestamp: string;
  error_message?: string;
  duration?: number;
}

describe('a stream’s attempts as they are recorded', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`GET …/event-streams/{id}/attempts (${kind})`, () => {
      let server: TestServer;
      let receiver: WebhookReceiver;
      let streamId: string;
      // Two events whose attempts share a timestamp: ordered by event id, then attempt number.
      const [low, high] = [newId.event(), newId.event()].sort() as [string, string];
      const third = newId.event();
      const url = (query = '') => `/api/v2/event-streams/${streamId}/attempts${query}`;

      /** A webhook stream to the receiver, subscribed to one event type. */
      const createStream = async (name: string, eventType: string, status: 'enabled' | 'disabled' = 'enabled') => {
        const created = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: {
            name,
            status,
            subscriptions: [{ event_type: eventType }],
            destination: {
              type: 'webhook',
              configuration: {
                webhook_endpoint: receiver.url,
                webhook_authorization: { method: 'bearer', token: 't' },
              },
            },
          },
        });
        assert.equal(created.statusCode, 201, created.body);
        return created.json().id as string;
      };

      /** Events, deliveries and attempts written as the delivery worker records them. */
      const record = async (types: Record<string, string>, attempts: AttemptFixture[]) => {
        const db = server.services.database.db;
        for (const [event, type] of Object.entries(types)) {
          await db
            .insertInto('events')
            .values({
              id: event,
              tenant_id: server.tenant.id,
              type,
              time: T0,
              source: 'urn:test',
              data: '{}',
              purpose: null,
            })
            .execute();
          await db
            .insertInto('deliveries')
            .values({
              stream_id: streamId,
              event_id: event,
              event_type: type,
              event_time: T0,
              status: 'delivered',
              attempt_count: 1,
              attempt_seq: 1,
              next_attempt_at: T0,
              claimed_until: null,
              updated_at: T0,
            })
            .execute();
        }
        await db
          .insertInto('delivery_attempts')
          .values(
            attempts.map((a) => ({
              stream_id: streamId,
              event_id: a.event,
              seq: a.seq,
              status: a.status,
              timestamp: a.timestamp,
              error_message: a.error_message ?? null,
              duration: a.duration ?? null,
            })),
          )
          .execute();
      };

      before(async () => {
        receiver = await startWebhookReceiver();
        server = await startTestServer(kind, {
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_RETRY_SCHEDULE_MS: '50,100,200',
          DELIVERY_POLL_MS: '20',
          DELIVERY_TIMEOUT_MS: '2000',
        });
        // Disabled: nothing of the user-made events of the last test reaches it.
        streamId = await createStream('recorded', 'user.created', 'disabled');
      });
      after(async () => {
        await server.close();
        await receiver.close();
      });

      it('has no attempts and no cursor for a stream that made none', async () => {
        const empty = await server.request({ url: url() });
        assert.equal(empty.statusCode, 200, empty.body);
        assert.deepEqual(empty.json(), { attempts: [] });
      });

      it('gives the latest attempts newest first, ties in event and attempt order, at most take', async () => {
        await record({ [low]: 'user.created', [high]: 'user.deleted', [third]: 'user.updated' }, [
          { event: low, seq: 1, status: 'failed', timestamp: T0, error_message: 'HTTP 500', duration: 12.5 },
          { event: low, seq: 2, status: 'retrying', timestamp: T1 },
          { event: high, seq: 1, status: 'delivered', timestamp: T1, duration: 40 },
          { event: low, seq: 3, status: 'delivered', timestamp: T2, duration: 7 },
          { event: third, seq: 1, status: 'failed', timestamp: T3, error_message: 'connect ECONNREFUSED', duration: 3 },
        ]);
        const latest = await server.request({ url: url() });
        assert.equal(latest.statusCode, 200, latest.body);
        const body = latest.json();
        assert.deepEqual(body.attempts, [
          {
            event_id: third,
            event_type: 'user.updated',
            seq: 1,
            status: 'failed',
            timestamp: T3,
            error_message: 'connect ECONNREFUSED',
            duration: 3,
          },
          { event_id: low, event_type: 'user.created', seq: 3, status: 'delivered', timestamp: T2, duration: 7 },
          { event_id: high, event_type: 'user.deleted', seq: 1, status: 'delivered', timestamp: T1, duration: 40 },
          { event_id: low, event_type: 'user.created', seq: 2, status: 'retrying', timestamp: T1 },
          {
            event_id: low,
            event_type: 'user.created',
            seq: 1,
            status: 'failed',
            timestamp: T0,
            error_message: 'HTTP 500',
            duration: 12.5,
          },
        ]);
        assert.deepEqual(Object.keys(body), ['attempts', 'next']);
        assert.match(body.next, /^[A-Za-z0-9_-]+$/, 'an opaque cursor');

        const two = (await server.request({ url: url('?take=2') })).json();
        assert.deepEqual(
          two.attempts.map((a: { event_id: string; seq: number }) => `${a.event_id}#${a.seq}`),
          [`${third}#1`, `${low}#3`],
        );
        assert.equal(two.next, body.next, 'the cursor marks the newest attempt either way');
        const hundred = await server.request({ url: url('?take=100') });
        assert.equal(hundred.statusCode, 200);
        assert.equal(hundred.json().attempts.length, 5);
      });

      it('with after, gives only the attempts recorded since, oldest first, in take-sized steps without gaps', async () => {
        const cursor = (await server.request({ url: url() })).json().next as string;
        const nothing = await server.request({ url: url(`?after=${cursor}`) });
        assert.equal(nothing.statusCode, 200, nothing.body);
        assert.deepEqual(nothing.json(), { attempts: [], next: cursor }, 'nothing newer: the same cursor back');

        const fourth = newId.event();
        const [a, b] = [third, fourth].sort() as [string, string];
        await record({ [fourth]: 'user.created' }, [
          { event: third, seq: 2, status: 'delivered', timestamp: T4, duration: 5 },
          { event: fourth, seq: 1, status: 'delivered', timestamp: T4, duration: 6 },
        ]);
        const shown = (attempt: { event_id: string; seq: number }) => `${attempt.event_id}#${attempt.seq}`;
        const expected = [a === third ? `${third}#2` : `${fourth}#1`, b === third ? `${third}#2` : `${fourth}#1`];

        const newer = await server.request({ url: url(`?after=${cursor}`) });
        assert.equal(newer.statusCode, 200, newer.body);
        assert.deepEqual(newer.json().attempts.map(shown), expected);
        assert.deepEqual(newer.json().attempts[expected[0] === `${third}#2` ? 0 : 1], {
          event_id: third,
          event_type: 'user.updated',
          seq: 2,
          status: 'delivered',
          timestamp: T4,
          duration: 5,
        });
        const caughtUp = newer.json().next as string;
        assert.notEqual(caughtUp, cursor);
        assert.deepEqual((await server.request({ url: url(`?after=${caughtUp}`) })).json(), {
          attempts: [],
          next: caughtUp,
        });
        // The newest-first view now starts at what the cursor marks.
        assert.equal((await server.request({ url: url('?take=1') })).json().next, caughtUp);

        // One at a time: each step gives the next attempt, none twice, none skipped (the tie at T4 included).
        const first = (await server.request({ url: url(`?after=${cursor}&take=1`) })).json();
        assert.deepEqual(first.attempts.map(shown), [expected[0]]);
        const second = (await server.request({ url: url(`?after=${first.next}&take=1`) })).json();
        assert.deepEqual(second.attempts.map(shown), [expected[1]]);
        assert.equal(second.next, caughtUp);
      });

      it('shows an attempt the delivery worker records, found by the cursor polling', async () => {
        receiver.program([], 204);
        const liveId = await createStream('live', 'user.created');
        const liveUrl = (query = '') => `/api/v2/event-streams/${liveId}/attempts${query}`;
        assert.deepEqual((await server.request({ url: liveUrl() })).json(), { attempts: [] });
        const user = await server.request({
          method: 'POST',
          url: '/api/v2/users',
          payload: {
            connection: 'Username-Password-Authentication',
            password: 'correct horse battery',
            email: `live-${kind}@example.com`,
          },
        });
        assert.equal(user.statusCode, 201, user.body);
        const delivered = await receiver.waitFor((r) => r.length >= 1);
        const eventId = delivered[0]!.json().id as string;
        let page: { attempts: Array<Record<string, unknown>>; next?: string } = { attempts: [] };
        const deadline = Date.now() + 10_000;
        while (page.attempts.length === 0) {
          assert.ok(Date.now() < deadline, 'the attempt was not shown within 10 s');
          await new Promise((resolve) => setTimeout(resolve, 50));
          page = (await server.request({ url: liveUrl() })).json();
        }
        assert.equal(page.attempts.length, 1);
        const [attempt] = page.attempts;
        assert.equal(attempt!.event_id, eventId);
        assert.equal(attempt!.event_type, 'user.created');
        assert.equal(attempt!.seq, 1);
        assert.equal(attempt!.status, 'delivered');
        assert.equal(typeof attempt!.duration, 'number');
        assert.ok(Math.abs(Date.parse(attempt!.timestamp as string) - Date.now()) < 60_000);
        assert.equal(attempt!.error_message, undefined);
        assert.deepEqual((await server.request({ url: liveUrl(`?after=${page.next}`) })).json(), {
          attempts: [],
          next: page.next,
        });
        // The other stream (disabled) recorded nothing of it.
        assert.equal((await server.request({ url: url('?take=100') })).json().attempts.length, 7);
      });

      it("shows a redelivery's retrying attempt at once, and once only after the attempt that writes it", async () => {
        const again = await createStream('again', 'user.deleted');
        const feed = async (query = '') => {
          const page = await server.request({ url: `/api/v2/event-streams/${again}/attempts${query}` });
          assert.equal(page.statusCode, 200, page.body);
          return page.json() as { attempts: Array<Record<string, unknown>>; next?: string };
        };
        const until = async (query: string, count: number) => {
          const deadline = Date.now() + 10_000;
          for (;;) {
            const page = await feed(query);
            if (page.attempts.length >= count) return page;
            assert.ok(Date.now() < deadline, `${count} attempts not shown within 10 s: ${JSON.stringify(page)}`);
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        };
        // A 400 fails it at once, for good.
        receiver.program([400], 204);
        const sent = await server.request({
          method: 'POST',
          url: `/api/v2/event-streams/${again}/test`,
          payload: { event_type: 'user.deleted' },
        });
        assert.equal(sent.statusCode, 202, sent.body);
        const eventId = sent.json().id as string;
        const failed = await until('', 1);
        assert.deepEqual(
          failed.attempts.map((a) => [a.event_id, a.seq, a.status]),
          [[eventId, 1, 'failed']],
        );
        // Disabled, the stream keeps the redelivery waiting.
        const disabled = await server.request({
          method: 'PATCH',
          url: `/api/v2/event-streams/${again}`,
          payload: { status: 'disabled' },
        });
        assert.equal(disabled.statusCode, 200, disabled.body);
        const queued = await server.request({
          method: 'POST',
          url: `/api/v2/event-streams/${again}/redeliver/${eventId}`,
        });
        assert.equal(queued.statusCode, 202, queued.body);

        const waiting = await feed(`?after=${failed.next}`);
        assert.equal(waiting.attempts.length, 1, JSON.stringify(waiting));
        const retrying = waiting.attempts[0]!;
        assert.deepEqual(Object.keys(retrying).sort(), ['event_id', 'event_type', 'seq', 'status', 'timestamp']);
        assert.deepEqual(
          [retrying.event_id, retrying.event_type, retrying.seq, retrying.status],
          [eventId, 'user.deleted', 2, 'retrying'],
        );
        assert.ok(Math.abs(Date.parse(retrying.timestamp as string) - Date.now()) < 60_000);
        assert.deepEqual((await feed('?take=1')).attempts, [retrying], 'the newest attempt');
        const delivery = (
          await server.request({ url: `/api/v2/event-streams/${again}/deliveries/${eventId}` })
        ).json() as { status: string; attempts: Array<{ status: string; timestamp: string }> };
        assert.equal(delivery.status, 'pending');
        assert.deepEqual(
          delivery.attempts.map((a) => [a.status, a.timestamp]),
          [
            ['failed', failed.attempts[0]!.timestamp],
            ['retrying', retrying.timestamp],
          ],
        );

        // Enabled again: the attempt is made and writes the retrying row with it, under the same key.
        const enabled = await server.request({
          method: 'PATCH',
          url: `/api/v2/event-streams/${again}`,
          payload: { status: 'enabled' },
        });
        assert.equal(enabled.statusCode, 200, enabled.body);
        const done = await until(`?after=${failed.next}`, 2);
        assert.deepEqual(
          done.attempts.map((a) => [a.seq, a.status]),
          [
            [2, 'retrying'],
            [3, 'delivered'],
          ],
        );
        assert.deepEqual(done.attempts[0], retrying, 'the same row, written');
        assert.deepEqual(
          (await feed(`?after=${waiting.next}`)).attempts.map((a) => [a.seq, a.status]),
          [[3, 'delivered']],
          'a poller that saw the retrying attempt is not given it again',
        );
        const rows = await server.services.database.db
          .selectFrom('delivery_attempts')
          .select(['seq', 'status', 'timestamp'])
          .where('stream_id', '=', again)
          .orderBy('seq')
          .execute();
        assert.deepEqual(
          rows.map((r) => [r.seq, r.status]),
          [
            [1, 'failed'],
            [2, 'retrying'],
            [3, 'delivered'],
          ],
        );
        assert.equal(rows[1]!.timestamp, retrying.timestamp);
      });

      it('refuses take out of 1–100, unknown query properties and cursors it did not make, with 400', async () => {
        for (const take of ['0', '101', 'many']) {
          const refused = await server.request({ url: url(`?take=${take}`) });
          assert.equal(refused.statusCode, 400, `take=${take}`);
          assert.equal(refused.json().errorCode, 'invalid_query_string');
          assert.match(refused.json().message, /^Query validation error: .* on property take/);
        }
        const unknown = await server.request({ url: url('?since=2026-01-01T00:00:00Z') });
        assert.equal(unknown.statusCode, 400);
        assert.equal(unknown.json().errorCode, 'invalid_query_string');
        assert.match(unknown.json().message, /since/);

        const invalidCursor = {
          statusCode: 400,
          error: 'Bad Request',
          message:
            "Query validation error: 'Invalid cursor' on property after (Cursor: only the attempts recorded after it, oldest first (the next of an earlier answer)).",
          errorCode: 'invalid_query_string',
        };
        const b64 = (text: string) => Buffer.from(text).toString('base64url');
        for (const cursor of [
          'not a cursor!',
          b64(low),
          b64(`${T0} ${low}`),
          b64(`yesterday ${low} 1`),
          b64(`${T0} evt_short 1`),
          b64(`${T0} ${low} -1`),
          b64(`${T0} ${low} 1 extra`),
          // The right shape, but no time the server could have written.
          b64(`9999-99-99T99:99:99Z ${low} 1`),
          b64(`2016-12-31T23:59:60Z ${low} 1`),
          `${b64(`${T0} ${low} 1`)}==`,
        ]) {
          const refused = await server.request({ url: url(`?after=${encodeURIComponent(cursor)}`) });
          assert.equal(refused.statusCode, 400, cursor);
          assert.deepEqual(refused.json(), invalidCursor, cursor);
        }
      });

      it("answers 404 for another tenant's stream or none, 403 without read:event_streams, 401 without a token", async () => {
        const other = await server.addTenant('other-attempts', 'other-attempts.test');
        const elsewhere = await server.app.inject({
          url: url(),
          headers: { host: 'other-attempts.test', authorization: `Bearer ${other.token}` },
        });
        const notFound = { statusCode: 404, error: 'Not Found', message: 'The requested stream does not exist.' };
        assert.equal(elsewhere.statusCode, 404);
        assert.deepEqual(elsewhere.json(), notFound);
        const none = await server.request({ url: '/api/v2/event-streams/est_1111111111111111111111/attempts' });
        assert.equal(none.statusCode, 404);
        assert.deepEqual(none.json(), notFound);

        const { token } = await server.clientWithScopes(['read:event_deliveries', 'update:event_streams']);
        const forbidden = await server.request({ url: url(), token });
        assert.equal(forbidden.statusCode, 403);
        assert.deepEqual(forbidden.json(), {
          statusCode: 403,
          error: 'Forbidden',
          message: 'Insufficient scope, expected any of: read:event_streams',
          errorCode: 'insufficient_scope',
        });
        const reader = await server.clientWithScopes(['read:event_streams']);
        assert.equal((await server.request({ url: url(), token: reader.token })).statusCode, 200);

        const anonymous = await server.request({ url: url(), token: null });
        assert.equal(anonymous.statusCode, 401);
        assert.equal(anonymous.json().statusCode, 401);
      });
    });
  }),
);
