import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { transaction, type Database } from '../../../src/db/database.ts';
import { BASE58, newId } from '../../../src/ids.ts';
import { redeliveryChunk, redeliveryCursor } from '../../../src/modules/event-streams/redelivery/worker.ts';
import { REDELIVERIES_UNDER_WAY_MAX, RedeliveryStore } from '../../../src/modules/event-streams/store/redeliveries.ts';
import { eachDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { jobTotals, logLines } from '../../helpers/log-lines.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/**
 * POST …/redeliver of more failed deliveries than one chunk (EVENT_STREAM_REDELIVERY_CHUNK_ROWS): the
 * request queues the first chunk and records the redelivery in one transaction; background work queues
 * the rest chunk by chunk, with the request's filter, up to the last delivery that was failed when it
 * was asked for.
 */

const CHUNK_ROWS = 3;
const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const minute = (i: number) => new Date(T0 + i * 60_000).toISOString();
/** `count` user.created events, a minute apart from T0: fillFailed's most common fixture. */
const createdEach = (count: number) =>
  Array.from({ length: count }, (_, i) => ({ type: 'user.created', time: minute(i) }));
/** After every event id newId makes today: a delivery that failed after the redelivery was asked for. */
const LATER_EVENT = `evt_${'z'.repeat(22)}`;

/** Failed deliveries of the stream, one event each, of the given types and times; their ids in order. */
async function fillFailed(
  database: Database,
  tenantId: string,
  streamId: string,
  deliveries: Array<{ type: string; time: string }>,
  ids: string[] = Array.from(deliveries, () => newId.event()).sort(),
): Promise<string[]> {
  for (const [i, { type, time }] of deliveries.entries()) {
    await database.db
      .insertInto('events')
      .values({ id: ids[i]!, tenant_id: tenantId, type, time, source: 'urn:test', data: '{}', purpose: null })
      .execute();
    await database.db
      .insertInto('deliveries')
      .values({
        stream_id: streamId,
        event_id: ids[i]!,
        event_type: type,
        event_time: time,
        status: 'failed',
        attempt_count: 4,
        attempt_seq: 4,
        next_attempt_at: time,
        claimed_until: null,
        updated_at: time,
      })
      .execute();
  }
  return ids;
}

/** Each delivery's status, in the order of `ids`. */
async function statusesOf(database: Database, streamId: string, ids: string[]): Promise<string[]> {
  const rows = await database.db
    .selectFrom('deliveries')
    .select(['event_id', 'status'])
    .where('stream_id', '=', streamId)
    .execute();
  const byId = new Map(rows.map((r) => [r.event_id, r.status]));
  return ids.map((id) => byId.get(id) ?? 'gone');
}

const recordedOf = (database: Database, streamId: string) =>
  database.db.selectFrom('event_stream_redeliveries').selectAll().where('stream_id', '=', streamId).execute();

/** A stream of user.created events to `endpoint`, on the server's default tenant; its id. */
async function createStream(server: TestServer, name: string, endpoint: string): Promise<string> {
  const created = await server.request({
    method: 'POST',
    url: '/api/v2/event-streams',
    payload: {
      name,
      subscriptions: [{ event_type: 'user.created' }],
      destination: {
        type: 'webhook',
        configuration: {
          webhook_endpoint: endpoint,
          webhook_authorization: { method: 'bearer', token: 'redelivery-token' },
        },
      },
    },
  });
  assert.equal(created.statusCode, 201, created.body);
  return created.json().id as string;
}

const redeliverOn = (server: TestServer, streamId: string, payload: object, token?: string) =>
  server.request({ method: 'POST', url: `/api/v2/event-streams/${streamId}/redeliver`, payload, token });

describe('a redelivery larger than one chunk', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`POST …/redeliver in chunks of ${CHUNK_ROWS} (${kind})`, () => {
      let server: TestServer;
      let receiver: WebhookReceiver;
      const logs = logLines();

      before(async () => {
        receiver = await startWebhookReceiver();
        server = await startTestServer(
          kind,
          {
            LOG_LEVEL: 'info',
            // Nothing is sent: what is under test is what is queued.
            DELIVERY_WORKER: 'false',
            DELIVERY_ALLOW_HTTP: 'true',
            EVENT_STREAM_REDELIVERY_CHUNK_ROWS: String(CHUNK_ROWS),
            // One lane: the walks below are one row each (lanes are tested after).
            EVENT_STREAM_REDELIVERY_LANES: '1',
          },
          { logStream: logs.stream },
        );
      });
      after(async () => {
        await server.close();
        await receiver.close();
      });

      const worker = () => server.services.redeliveryWorker!;
      const database = () => server.services.database;
      const stream = (name: string) => createStream(server, name, receiver.url);
      const redeliver = (streamId: string, payload: object, token?: string) =>
        redeliverOn(server, streamId, payload, token);
      /** What the background did for the stream's redelivery, its log lines added up, once it ended. */
      const queuedLine = (streamId: string) =>
        eventually(`the redelivery of ${streamId} logged as queued`, async () =>
          jobTotals(logs.lines, {
            name: 'event stream redelivery',
            finished: 'event stream redelivery queued',
            streamId,
          }),
        );

      /**
       * A stream of seven failed user.created deliveries, a minute apart, whose redelivery of them all was
       * just asked for (the request queued the first three and recorded the rest); their ids in order.
       */
      const redeliveredStream = async (name: string) => {
        const streamId = await stream(name);
        const ids = await fillFailed(database(), server.tenant.id, streamId, createdEach(7));
        const response = await redeliver(streamId, {});
        assert.equal(response.statusCode, 202, response.body);
        return { streamId, ids };
      };

      it('queues the first chunk in the request and the rest in the background, with the same filter', async () => {
        await worker().pause();
        const streamId = await stream('filtered');
        // Ten failed deliveries, types alternating, a minute apart; the filter takes user.updated from
        // minute 1 up to minute 8: the 2nd, 4th, 6th and 8th.
        const ids = await fillFailed(
          database(),
          server.tenant.id,
          streamId,
          Array.from({ length: 10 }, (_, i) => ({ type: i % 2 ? 'user.updated' : 'user.created', time: minute(i) })),
        );
        const filter = {
          event_types: ['user.updated'],
          date_from: minute(1).slice(0, 19) + 'Z',
          date_to: minute(8).slice(0, 19) + 'Z',
        };

        // Another tenant's token: the stream is not its, nothing is queued or recorded.
        const other = await server.addTenant('redelivery-other', 'redelivery-other.test');
        const refused = await server.app.inject({
          method: 'POST',
          url: `/api/v2/event-streams/${streamId}/redeliver`,
          headers: { host: 'redelivery-other.test', authorization: `Bearer ${other.token}` },
          payload: filter,
        });
        assert.equal(refused.statusCode, 404, refused.body);
        assert.deepEqual(await recordedOf(database(), streamId), []);

        const response = await redeliver(streamId, filter);
        assert.equal(response.statusCode, 202, response.body);
        assert.deepEqual(response.json(), filter);
        // The request walked the first three: of them only the 2nd matches.
        const F = 'failed';
        const P = 'pending';
        assert.deepEqual(await statusesOf(database(), streamId, ids), [F, P, F, F, F, F, F, F, F, F]);
        const [recorded, ...more] = await recordedOf(database(), streamId);
        assert.equal(more.length, 0);
        assert.deepEqual(
          {
            after: recorded!.after_event_id,
            until: recorded!.until_event_id,
            queued: recorded!.queued,
            types: recorded!.event_types,
            from: recorded!.time_from,
            to: recorded!.time_to,
          },
          {
            after: ids[2],
            until: ids[9],
            queued: 1,
            types: '["user.updated"]',
            from: minute(1),
            to: minute(8),
          },
        );

        worker().resume();
        const line = await queuedLine(streamId);
        // Three more chunks (the 4th to 6th, 7th to 9th, the 10th), three more queued.
        assert.deepEqual([line.chunks, line.rows], [3, 3]);
        assert.ok(
          logs.lines.some(
            (l) =>
              l.msg === 'event stream redelivery queued' &&
              l.event_stream_id === streamId &&
              l.tenant_id === server.tenant.id &&
              l.redelivery_id === recorded!.id,
          ),
          'the line names the stream, its tenant and the redelivery',
        );
        assert.deepEqual(await statusesOf(database(), streamId, ids), [F, P, F, P, F, P, F, P, F, F]);
        assert.deepEqual(await recordedOf(database(), streamId), [], 'the redelivery is gone once queued');
        // Each queued one shows its `retrying` attempt, as a redelivery in one step left it.
        const shown = await server.request({ url: `/api/v2/event-streams/${streamId}/deliveries/${ids[7]}` });
        assert.equal(shown.statusCode, 200, shown.body);
        assert.deepEqual(
          (shown.json().attempts as Array<{ status: string }>).map((a) => a.status),
          ['retrying'],
        );
        const attempts = await server.request({ url: `/api/v2/event-streams/${streamId}/attempts?take=10` });
        assert.equal(attempts.statusCode, 200, attempts.body);
        assert.deepEqual(
          (attempts.json().attempts as Array<{ status: string; event_id: string; seq: number }>)
            .map((a) => [a.status, a.event_id, a.seq])
            .sort(),
          [ids[1], ids[3], ids[5], ids[7]].map((id) => ['retrying', id, 5]).sort(),
        );
      });

      it('ends where it began: one it queued that failed again, and one failed since, are left', async () => {
        await worker().pause();
        const { streamId, ids } = await redeliveredStream('bounded');
        assert.deepEqual(await statusesOf(database(), streamId, ids), [
          'pending',
          'pending',
          'pending',
          ...Array(4).fill('failed'),
        ]);
        // The first one is sent and fails again before the background goes on; another delivery, of an
        // event after every one walked, fails meanwhile.
        await database()
          .db.updateTable('deliveries')
          .set({ status: 'failed', attempt_count: 4 })
          .where('stream_id', '=', streamId)
          .where('event_id', '=', ids[0]!)
          .execute();
        await fillFailed(
          database(),
          server.tenant.id,
          streamId,
          [{ type: 'user.created', time: minute(9) }],
          [LATER_EVENT],
        );

        worker().resume();
        const line = await queuedLine(streamId);
        assert.deepEqual([line.chunks, line.rows], [2, 4]);
        assert.deepEqual(await statusesOf(database(), streamId, [...ids, LATER_EVENT]), [
          'failed',
          ...Array(6).fill('pending'),
          'failed',
        ]);
      });

      it('ends once its stream is being deleted, queuing nothing more', async () => {
        await worker().pause();
        await server.services.streamDeletionWorker!.pause();
        try {
          const { streamId, ids } = await redeliveredStream('deleted meanwhile');
          assert.equal((await recordedOf(database(), streamId)).length, 1);
          const deleted = await server.request({ method: 'DELETE', url: `/api/v2/event-streams/${streamId}` });
          assert.equal(deleted.statusCode, 204, deleted.body);

          worker().resume();
          const line = await queuedLine(streamId);
          assert.deepEqual([line.chunks, line.rows], [1, 0]);
          assert.deepEqual(await recordedOf(database(), streamId), []);
          assert.deepEqual(await statusesOf(database(), streamId, ids), [
            ...Array(3).fill('pending'),
            ...Array(4).fill('failed'),
          ]);
        } finally {
          server.services.streamDeletionWorker!.resume();
        }
      });

      it('a stream has at most REDELIVERIES_UNDER_WAY_MAX redeliveries under way: one more is refused, nothing queued', async () => {
        await worker().pause();
        const streamId = await stream('flooded');
        let ids: string[] = [];
        try {
          ids = await fillFailed(database(), server.tenant.id, streamId, createdEach(7));
          // A filter that takes none of them: each request walks a chunk, queues nothing and leaves the
          // rest of the walk to the background, as many times as it is sent.
          const nothing = { event_types: ['user.deleted'] };
          for (let i = 0; i < REDELIVERIES_UNDER_WAY_MAX; i++) {
            const response = await redeliver(streamId, nothing);
            assert.equal(response.statusCode, 202, response.body);
          }
          assert.equal((await recordedOf(database(), streamId)).length, REDELIVERIES_UNDER_WAY_MAX);

          const refused = await redeliver(streamId, {});
          assert.equal(refused.statusCode, 409, refused.body);
          assert.equal(refused.json().message, 'One or more events is not in a state that allows redelivery.');
          assert.equal((await recordedOf(database(), streamId)).length, REDELIVERIES_UNDER_WAY_MAX);
          assert.deepEqual(
            await statusesOf(database(), streamId, ids),
            Array(7).fill('failed'),
            'its first chunk rolled back',
          );

          // One that needs no background work still goes through at once.
          const small = await stream('flooded, one chunk');
          const [one] = await fillFailed(database(), server.tenant.id, small, [
            { type: 'user.created', time: minute(0) },
          ]);
          const single = await redeliver(small, {});
          assert.equal(single.statusCode, 202, single.body);
          assert.deepEqual(await statusesOf(database(), small, [one!]), ['pending']);
        } finally {
          worker().resume();
        }
        // Once they are done, the stream takes redeliveries again.
        await eventually('the redeliveries under way done', async () =>
          (await recordedOf(database(), streamId)).length === 0 ? true : undefined,
        );
        const again = await redeliver(streamId, {});
        assert.equal(again.statusCode, 202, again.body);
        await eventually('the redelivery queued', async () =>
          (await statusesOf(database(), streamId, ids)).every((status) => status === 'pending') ? true : undefined,
        );
      });

      it('a chunk run under a lease taken over since changes nothing', async () => {
        await worker().pause();
        try {
          const { streamId, ids } = await redeliveredStream('taken over');
          const store = new RedeliveryStore(database());
          const chunk = redeliveryChunk(database(), { chunkRows: CHUNK_ROWS }, async () => undefined);
          const [stale] = (await store.claimDue(1, 10)).filter((r) => r.stream_id === streamId);
          assert.ok(stale, 'claimed');
          await new Promise((resolve) => setTimeout(resolve, 20));
          const [current] = (await store.claimDue(60_000, 10)).filter((r) => r.stream_id === streamId);
          assert.ok(current && current.lease !== stale.lease, 'claimed again once the first lease ran out');
          const cursor = redeliveryCursor(stale);
          const later = new Date(Date.now() + 60_000).toISOString();

          assert.equal(await chunk(stale, later, cursor), undefined, 'the stale run is told its lease is gone');
          assert.deepEqual(await statusesOf(database(), streamId, ids), [
            ...Array(3).fill('pending'),
            ...Array(4).fill('failed'),
          ]);
          const [unchanged] = await recordedOf(database(), streamId);
          assert.deepEqual([unchanged!.after_event_id, unchanged!.claimed_until], [ids[2], current.lease]);

          const outcome = await chunk(current, later, cursor);
          assert.deepEqual(outcome, { rows: 3, finished: false, cursor: { ...cursor, after: ids[5], queued: 6 } });
          const [moved] = await recordedOf(database(), streamId);
          assert.deepEqual([moved!.after_event_id, moved!.queued, moved!.claimed_until], [ids[5], 6, later]);
          await store.release({ ...current, lease: later }, later, new Date().toISOString());
        } finally {
          worker().resume();
        }
      });
    });
  }),
);

const LANES = 3;

describe('a redelivery walked in lanes', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`POST …/redeliver, its rest in ${LANES} lanes (${kind})`, () => {
      let server: TestServer;
      const logs = logLines();

      before(async () => {
        server = await startTestServer(
          kind,
          {
            LOG_LEVEL: 'info',
            DELIVERY_WORKER: 'false',
            DELIVERY_ALLOW_HTTP: 'true',
            EVENT_STREAM_REDELIVERY_CHUNK_ROWS: '2',
            EVENT_STREAM_REDELIVERY_LANES: String(LANES),
          },
          { logStream: logs.stream },
        );
      });
      after(() => server.close());

      const worker = () => server.services.redeliveryWorker!;
      const database = () => server.services.database;
      // Nothing is sent (no delivery worker): the endpoint is never asked.
      const stream = (name: string) => createStream(server, name, 'http://127.0.0.1:9/hook');
      const redeliver = (streamId: string, payload: object) => redeliverOn(server, streamId, payload);
      const lanesOf = async (streamId: string) =>
        (await recordedOf(database(), streamId)).sort((a, b) => (a.after_event_id < b.after_event_id ? -1 : 1));
      /**
       * Claims the stream's recorded redeliveries and walks each alone, the last first, chunk by chunk,
       * every delivery set back to failed before each: which each queued, in the order of their ranges.
       */
      const walkEachAlone = async (streamId: string, ids: string[]) => {
        const store = new RedeliveryStore(database());
        const chunk = redeliveryChunk(database(), { chunkRows: 2 }, async () => undefined);
        const later = new Date(Date.now() + 60_000).toISOString();
        // A row still to be cut is cut first (its first chunk), and let go.
        for (const uncut of (await store.claimDue(60_000, 100)).filter((r) => r.stream_id === streamId)) {
          let lease = uncut.lease;
          if (uncut.lanes !== null) {
            assert.ok(await chunk(uncut, later, redeliveryCursor(uncut)), 'the lease held');
            lease = later;
          }
          await store.release({ ...uncut, lease }, lease, new Date().toISOString());
        }
        const claimed = (await store.claimDue(60_000, 100)).filter((r) => r.stream_id === streamId);
        const pendingBy: string[][] = [];
        for (const lane of claimed.sort((a, b) => (a.after_event_id < b.after_event_id ? 1 : -1))) {
          await database()
            .db.updateTable('deliveries')
            .set({ status: 'failed' })
            .where('stream_id', '=', streamId)
            .execute();
          let run = lane;
          let cursor = redeliveryCursor(lane);
          for (let i = 0; ; i++) {
            assert.ok(i < 200, 'the lane ended');
            const outcome = await chunk(run, later, cursor);
            assert.ok(outcome, 'the lease held');
            if (outcome.finished) break;
            run = { ...run, lease: later };
            cursor = outcome.cursor;
          }
          const statuses = await statusesOf(database(), streamId, ids);
          pendingBy.unshift(ids.filter((_, i) => statuses[i] === 'pending'));
        }
        return pendingBy;
      };
      /** The rows each lane of the stream's redeliveries queued, from its log lines (all its turns), in lane order of appearance. */
      const rowsPerLane = (streamId: string) => {
        const perLane = new Map<string, number>();
        for (const l of logs.lines)
          if (
            l.event_stream_id === streamId &&
            (l.msg === 'event stream redelivery queued' || l.msg === 'event stream redelivery hands its turn on')
          )
            perLane.set(String(l.lane_id), (perLane.get(String(l.lane_id)) ?? 0) + Number(l.rows));
        return [...perLane.values()].sort((a, b) => a - b);
      };
      const cutLines = (streamId: string) =>
        logs.lines
          .filter((l) => l.msg === 'event stream redelivery cut into lanes' && l.event_stream_id === streamId)
          .map((l) => [l.lanes, l.counted]);
      const allDone = (streamId: string) =>
        eventually(`the lanes of ${streamId} done`, async () =>
          (await recordedOf(database(), streamId)).length === 0 ? true : undefined,
        );

      it('records the rest as one row, cut into lanes of as many rows by the node that claims it, that together queue each match once', async () => {
        await worker().pause();
        const streamId = await stream('lanes');
        // Twenty failed deliveries, types alternating; the filter takes user.updated: the 2nd, 4th, … 20th.
        const ids = await fillFailed(
          database(),
          server.tenant.id,
          streamId,
          Array.from({ length: 20 }, (_, i) => ({ type: i % 2 ? 'user.updated' : 'user.created', time: minute(i) })),
        );
        const response = await redeliver(streamId, { event_types: ['user.updated'] });
        assert.equal(response.statusCode, 202, response.body);

        // The request walked the first two (queued the 2nd) and recorded the rest, after ids[1] up to
        // ids[19], as one row to be cut into three lanes.
        const [recorded, ...more] = await lanesOf(streamId);
        assert.deepEqual(more, []);
        assert.deepEqual(
          [
            recorded!.after_event_id,
            recorded!.until_event_id,
            recorded!.lanes,
            recorded!.queued,
            recorded!.event_types,
          ],
          [ids[1], ids[19], LANES, 1, '["user.updated"]'],
        );
        assert.equal(recorded!.redelivery_id, recorded!.id);

        worker().resume();
        await allDone(streamId);
        const expected = ids.map((_, i) => (i % 2 ? 'pending' : 'failed'));
        assert.deepEqual(await statusesOf(database(), streamId, ids), expected);
        // The nine matches after ids[1] (of 18 failed) were cut into three lanes of three, by the matches
        // (the writes), not by the rows walked past; each logs its own end, under the redelivery's id.
        assert.deepEqual(cutLines(streamId), [[LANES, 9]]);
        assert.deepEqual(rowsPerLane(streamId), [3, 3, 3]);
        const ends = logs.lines.filter(
          (l) => l.msg === 'event stream redelivery queued' && l.event_stream_id === streamId,
        );
        assert.equal(ends.length, LANES);
        assert.ok(ends.every((l) => l.redelivery_id === recorded!.id));
        assert.equal(new Set(ends.map((l) => l.lane_id)).size, LANES, 'each lane named once');
        const lines = logs.lines.filter(
          (l) =>
            l.event_stream_id === streamId &&
            (l.msg === 'event stream redelivery queued' || l.msg === 'event stream redelivery hands its turn on'),
        );
        assert.equal(
          lines.reduce((sum, l) => sum + Number(l.rows), 0),
          9,
          'the nine matches after the first',
        );
        // Each queued one has a single retrying attempt: no lane queued it twice.
        const attempts = await server.request({ url: `/api/v2/event-streams/${streamId}/attempts?take=50` });
        assert.equal(attempts.statusCode, 200, attempts.body);
        assert.deepEqual(
          (attempts.json().attempts as Array<{ status: string; event_id: string; seq: number }>)
            .map((a) => [a.status, a.event_id, a.seq])
            .sort(),
          ids
            .filter((_, i) => i % 2)
            .map((id) => ['retrying', id, 5])
            .sort(),
        );
      });

      it('cuts by rows, so failures bunched in time are shared evenly, and each delivery is walked by one lane alone', async () => {
        await worker().pause();
        const streamId = await stream('lane shares');
        // An outage's failures: 60 ids of one millisecond, then one failure much later. Cuts at equal
        // spans of time would have put all 60 in the first lane.
        const stem = newId.event().slice(0, -2);
        const burst = ['2', '3'].flatMap((next) => [...BASE58].map((last) => `${stem}${next}${last}`)).slice(0, 60);
        const ids = [`evt_${'1'.repeat(22)}`, ...burst, LATER_EVENT];
        await fillFailed(
          database(),
          server.tenant.id,
          streamId,
          ids.map((_, i) => ({ type: 'user.created', time: minute(i) })),
          ids,
        );
        // The request queues the first two (chunks of 2); the 60 after are cut into three lanes of 20.
        const rest = ids.slice(2);
        const response = await redeliver(streamId, {});
        assert.equal(response.statusCode, 202, response.body);
        worker().resume();
        await allDone(streamId);
        assert.deepEqual(cutLines(streamId), [[LANES, 60]]);
        assert.deepEqual(rowsPerLane(streamId), [20, 20, 20]);
        assert.deepEqual(await statusesOf(database(), streamId, ids), Array(ids.length).fill('pending'));

        // Again, the row cut by one claim's first chunk, which queues nothing, then each lane walked alone
        // with every delivery set back to failed before it: a lane queues its range and no other, and the
        // ranges meet without a gap.
        await worker().pause();
        try {
          await database()
            .db.updateTable('deliveries')
            .set({ status: 'failed' })
            .where('stream_id', '=', streamId)
            .execute();
          const again = await redeliver(streamId, {});
          assert.equal(again.statusCode, 202, again.body);
          const store = new RedeliveryStore(database());
          const chunk = redeliveryChunk(database(), { chunkRows: 2 }, async () => undefined);
          const [whole] = (await store.claimDue(60_000, 10)).filter((r) => r.stream_id === streamId);
          const later = new Date(Date.now() + 60_000).toISOString();
          const cursor = redeliveryCursor(whole!);
          assert.equal(cursor.lanes, LANES);
          assert.deepEqual(await chunk(whole!, later, cursor), {
            rows: 0,
            finished: false,
            cursor: { ...cursor, until: rest[19], lanes: 1 },
            cut: { lanes: LANES, counted: 60 },
          });
          await store.release({ ...whole!, lease: later }, later, new Date().toISOString());
          const lanes = await lanesOf(streamId);
          // The lanes cut off are due since the request (at once on any node's clock).
          assert.ok(lanes.every((l) => l.next_attempt_at === whole!.created_at || l.id === whole!.id));
          assert.deepEqual(
            lanes.map((l) => [l.after_event_id, l.until_event_id, l.lanes, l.redelivery_id]),
            [
              [ids[1], rest[19], null, whole!.id],
              [rest[19], rest[39], null, whole!.id],
              [rest[39], LATER_EVENT, null, whole!.id],
            ],
          );
          assert.deepEqual(await walkEachAlone(streamId, ids), [rest.slice(0, 20), rest.slice(20, 40), rest.slice(40)]);
          assert.deepEqual(await recordedOf(database(), streamId), [], 'every lane ended');
        } finally {
          worker().resume();
        }
      });

      it('cuts by the deliveries the filter takes, so lanes share its writes even where they bunch among the failures', async () => {
        await worker().pause();
        const streamId = await stream('filtered shares');
        // 32 failed: the request walks the first two; of the 30 after, the last 12 are user.updated, which
        // the filter takes. Cut by failed rows, the lanes would queue 0, 2 and 10.
        const ids = await fillFailed(
          database(),
          server.tenant.id,
          streamId,
          Array.from({ length: 32 }, (_, i) => ({ type: i >= 20 ? 'user.updated' : 'user.created', time: minute(i) })),
        );
        assert.equal((await redeliver(streamId, { event_types: ['user.updated'] })).statusCode, 202);
        worker().resume();
        await allDone(streamId);
        assert.deepEqual(cutLines(streamId), [[LANES, 12]]);
        assert.deepEqual(rowsPerLane(streamId), [4, 4, 4]);
        assert.deepEqual(
          await statusesOf(database(), streamId, ids),
          ids.map((_, i) => (i >= 20 ? 'pending' : 'failed')),
        );
      });

      it('cuts fewer lanes where the rest holds less than a chunk a lane, and none for less than two', async () => {
        await worker().pause();
        try {
          const streamId = await stream('few to cut');
          // Seven failed: the request queues two; five are left, two chunks' worth: two lanes (2 and 3).
          const ids = await fillFailed(database(), server.tenant.id, streamId, createdEach(7));
          assert.equal((await redeliver(streamId, {})).statusCode, 202);
          assert.deepEqual(await walkEachAlone(streamId, ids), [ids.slice(2, 4), ids.slice(4)]);
          assert.deepEqual(await recordedOf(database(), streamId), []);
          // Five failed, three left: one lane.
          const other = await stream('too few to cut');
          const few = await fillFailed(database(), server.tenant.id, other, createdEach(5));
          assert.equal((await redeliver(other, {})).statusCode, 202);
          assert.deepEqual(await walkEachAlone(other, few), [few.slice(2)]);
          assert.deepEqual(await recordedOf(database(), other), []);
        } finally {
          worker().resume();
        }
      });

      it('a row still to be cut is walked whole by a node that does not cut (a version before migration 025)', async () => {
        await worker().pause();
        try {
          const streamId = await stream('walked uncut');
          const ids = await fillFailed(database(), server.tenant.id, streamId, createdEach(12));
          assert.equal((await redeliver(streamId, {})).statusCode, 202);
          const store = new RedeliveryStore(database());
          const chunk = redeliveryChunk(database(), { chunkRows: 2 }, async () => undefined);
          const [whole] = (await store.claimDue(60_000, 10)).filter((r) => r.stream_id === streamId);
          assert.equal(whole!.lanes, LANES);
          // As such a node reads the row: no lanes.
          let run = whole!;
          let cursor = { ...redeliveryCursor(whole!), lanes: 1 };
          const later = new Date(Date.now() + 60_000).toISOString();
          for (let i = 0; ; i++) {
            assert.ok(i < 20, 'the walk ended');
            const outcome = await chunk(run, later, cursor);
            assert.ok(outcome && outcome.cut === undefined, 'not cut');
            if (outcome.finished) break;
            run = { ...run, lease: later };
            cursor = outcome.cursor;
          }
          assert.deepEqual(await statusesOf(database(), streamId, ids), Array(12).fill('pending'));
          assert.deepEqual(await recordedOf(database(), streamId), []);
        } finally {
          worker().resume();
        }
      });

      it('a stream deleted once its redelivery was cut ends every lane, none queuing anything', async () => {
        await worker().pause();
        try {
          // The deletion's own removal waits, so that each lane finds the stream being deleted.
          await server.services.streamDeletionWorker!.pause();
          const streamId = await stream('deleted after the cut');
          await fillFailed(database(), server.tenant.id, streamId, createdEach(12));
          assert.equal((await redeliver(streamId, {})).statusCode, 202);
          const store = new RedeliveryStore(database());
          const chunk = redeliveryChunk(database(), { chunkRows: 2 }, async () => undefined);
          const later = new Date(Date.now() + 60_000).toISOString();
          const [whole] = (await store.claimDue(60_000, 10)).filter((r) => r.stream_id === streamId);
          const cut = await chunk(whole!, later, redeliveryCursor(whole!));
          assert.deepEqual(cut?.cut, { lanes: LANES, counted: 10 });
          await store.release({ ...whole!, lease: later }, later, new Date().toISOString());
          const deleted = await server.request({ method: 'DELETE', url: `/api/v2/event-streams/${streamId}` });
          assert.equal(deleted.statusCode, 204, deleted.body);
          const lanes = (await store.claimDue(60_000, 10)).filter((r) => r.stream_id === streamId);
          assert.equal(lanes.length, LANES);
          for (const lane of lanes)
            assert.deepEqual(await chunk(lane, later, redeliveryCursor(lane)), {
              rows: 0,
              finished: true,
              cursor: redeliveryCursor(lane),
            });
          assert.deepEqual(await recordedOf(database(), streamId), []);
        } finally {
          server.services.streamDeletionWorker!.resume();
          worker().resume();
        }
      });

      it('a redelivery a node recorded before lanes (no redelivery_id) counts once and is queued under its own id', async () => {
        await worker().pause();
        const streamId = await stream('recorded before lanes');
        const ids = await fillFailed(database(), server.tenant.id, streamId, createdEach(6));
        const at = new Date().toISOString();
        const oldId = 'recorded-before-024';
        try {
          await database()
            .db.insertInto('event_stream_redeliveries')
            .values({
              id: oldId,
              redelivery_id: null,
              stream_id: streamId,
              tenant_id: server.tenant.id,
              event_types: null,
              time_from: null,
              time_to: null,
              after_event_id: ids[0]!,
              until_event_id: ids[5]!,
              queued: 0,
              status: 'pending',
              next_attempt_at: at,
              claimed_until: null,
              created_at: at,
            })
            .execute();
          // Nine more, each in lanes: the old row counts as the tenth.
          for (let i = 0; i < REDELIVERIES_UNDER_WAY_MAX - 1; i++) {
            const response = await redeliver(streamId, { event_types: ['user.deleted'] });
            assert.equal(response.statusCode, 202, response.body);
          }
          const refused = await redeliver(streamId, { event_types: ['user.deleted'] });
          assert.equal(refused.statusCode, 409, refused.body);
        } finally {
          worker().resume();
        }
        await allDone(streamId);
        assert.deepEqual(await statusesOf(database(), streamId, ids), ['failed', ...Array(5).fill('pending')]);
        const end = logs.lines.find((l) => l.msg === 'event stream redelivery queued' && l.redelivery_id === oldId);
        assert.ok(end && end.lane_id === undefined, 'logged under its own id');
      });

      it('counts a redelivery once however many lanes it has: the 11th under way is refused', async () => {
        await worker().pause();
        const streamId = await stream('lanes flooded');
        try {
          const ids = await fillFailed(database(), server.tenant.id, streamId, createdEach(9));
          const nothing = { event_types: ['user.deleted'] };
          for (let i = 0; i < REDELIVERIES_UNDER_WAY_MAX; i++) {
            const response = await redeliver(streamId, nothing);
            assert.equal(response.statusCode, 202, response.body);
          }
          // Each cut into three lanes (its filter takes none, so the count would not cut it).
          const store = new RedeliveryStore(database());
          const later = new Date(Date.now() + 60_000).toISOString();
          const claimed = (await store.claimDue(60_000, 100)).filter((r) => r.stream_id === streamId);
          assert.equal(claimed.length, REDELIVERIES_UNDER_WAY_MAX);
          for (const whole of claimed) {
            assert.ok(await transaction(database(), (trx) => store.split(trx, whole, later, [ids[4]!, ids[6]!])));
            await store.release({ ...whole, lease: later }, later, new Date().toISOString());
          }
          const lanes = await recordedOf(database(), streamId);
          assert.equal(lanes.length, REDELIVERIES_UNDER_WAY_MAX * LANES);
          assert.equal(new Set(lanes.map((l) => l.redelivery_id)).size, REDELIVERIES_UNDER_WAY_MAX);

          const refused = await redeliver(streamId, {});
          assert.equal(refused.statusCode, 409, refused.body);
          assert.equal((await recordedOf(database(), streamId)).length, REDELIVERIES_UNDER_WAY_MAX * LANES);
          assert.deepEqual(await statusesOf(database(), streamId, ids), Array(9).fill('failed'));
        } finally {
          worker().resume();
        }
        await allDone(streamId);
      });
    });
  }),
);
