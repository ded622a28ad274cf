import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { migrate, openDatabase, type Database } from '../../src/db/database.ts';
import { Deliveries } from '../../src/modules/event-streams/deliveries.ts';
import { recordOutcomes } from '../../src/modules/event-streams/store/outcomes.ts';
import { DeliveryStore } from '../../src/modules/event-streams/store/deliveries.ts';
import { StreamStore } from '../../src/modules/event-streams/store/streams.ts';
import { RedeliveryStore } from '../../src/modules/event-streams/store/redeliveries.ts';
import { createTestDatabase, eachDatabase, migrateTo, type TestDatabase } from '../helpers/databases.ts';

const T0 = '2026-06-01T00:00:00.000Z';
const QUEUED = '2026-06-02T00:00:00.000Z';
const T2 = '2026-06-02T00:00:05.000Z';
const [waiting, attempted, fresh] = ['evt_a', 'evt_b', 'evt_c'];

const delivery = (event_id: string, status: 'pending' | 'delivered', count: number, seq: number, at: string) => ({
  stream_id: 'est_1',
  event_id,
  event_type: 'user.created',
  event_time: T0,
  status,
  attempt_count: count,
  attempt_seq: seq,
  next_attempt_at: at,
  claimed_until: null,
  updated_at: at,
});
const attempt = (event_id: string, seq: number, status: 'failed' | 'retrying' | 'delivered', timestamp: string) => ({
  stream_id: 'est_1',
  event_id,
  seq,
  status,
  timestamp,
  error_message: status === 'failed' ? 'HTTP 503' : null,
  duration: status === 'retrying' ? null : 3,
});
const event = (id: string) => ({
  id,
  tenant_id: 't1',
  type: 'user.created',
  time: T0,
  source: 'urn:test',
  data: '{}',
  purpose: null,
});

/** The deliveries service as the routes use it: the delivery view and the attempts feed. */
const deliveriesOf = (database: Database) =>
  new Deliveries(database, new StreamStore(database), new DeliveryStore(database), async () => undefined, {
    store: new RedeliveryStore(database),
    chunkRows: 2000,
    lanes: 1,
    recorded: () => undefined,
  });

/**
 * Migration 019: a redelivery no longer writes its `retrying` rows when it is queued (they are read from the
 * delivery until its next attempt writes them). The rows an earlier version wrote for deliveries still
 * waiting are removed, so that each is shown once and its attempt can write it; every other row stays.
 */
describe('migration 019: retrying attempts of waiting redeliveries', () => {
  eachDatabase((kind) => {
    let testDatabase: TestDatabase;
    let database: Database;

    before(async () => {
      testDatabase = await createTestDatabase(kind);
      database = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      await migrateTo(database, '018_deliveries_pending_by_stream');
      const db = database.db;
      await db.insertInto('tenants').values({ id: 't1', domain: 't1.test', created_at: T0 }).execute();
      await db
        .insertInto('event_streams')
        .values({
          id: 'est_1',
          tenant_id: 't1',
          name: 'one',
          status: 'enabled',
          subscriptions: '[]',
          destination: '{"type":"webhook"}',
          secret: null,
          consecutive_failures: 0,
          created_at: T0,
          updated_at: T0,
        })
        .execute();
      await db.insertInto('events').values([waiting, attempted, fresh].map(event)).execute();
      await db
        .insertInto('deliveries')
        .values([
          // Queued again by the earlier version, not attempted since.
          delivery(waiting, 'pending', 0, 2, QUEUED),
          // Queued again and delivered since.
          delivery(attempted, 'delivered', 1, 3, T2),
          // Not attempted yet.
          delivery(fresh, 'pending', 0, 0, T0),
        ])
        .execute();
      await db
        .insertInto('delivery_attempts')
        .values([
          attempt(waiting, 1, 'failed', T0),
          attempt(waiting, 2, 'retrying', QUEUED),
          attempt(attempted, 1, 'failed', T0),
          attempt(attempted, 2, 'retrying', QUEUED),
          attempt(attempted, 3, 'delivered', T2),
        ])
        .execute();
      await migrate(database);
    });

    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    const rows = async () =>
      (
        await database.db
          .selectFrom('delivery_attempts')
          .select(['event_id', 'seq', 'status', 'timestamp'])
          .orderBy('event_id')
          .orderBy('seq')
          .execute()
      ).map((r) => `${r.event_id}#${r.seq} ${r.status} ${r.timestamp}`);

    it('removes only the rows of redeliveries still waiting, and shows each retrying attempt once', async () => {
      assert.deepEqual(await rows(), [
        `${waiting}#1 failed ${T0}`,
        `${attempted}#1 failed ${T0}`,
        `${attempted}#2 retrying ${QUEUED}`,
        `${attempted}#3 delivered ${T2}`,
      ]);
      const deliveries = deliveriesOf(database);
      const shown = await deliveries.get('t1', 'est_1', waiting);
      assert.deepEqual(
        shown.attempts.map((a) => [a.status, a.timestamp]),
        [
          ['failed', T0],
          ['retrying', QUEUED],
        ],
      );
      // Newest first; at one time, the higher event id first.
      const feed = await deliveries.attempts('t1', 'est_1', {});
      assert.deepEqual(
        feed.attempts.map((a) => `${a.event_id}#${a.seq} ${a.status}`),
        [
          `${attempted}#3 delivered`,
          `${attempted}#2 retrying`,
          `${waiting}#2 retrying`,
          `${attempted}#1 failed`,
          `${waiting}#1 failed`,
        ],
      );
    });

    it('shows once a retrying row written when queueing, as a node of an earlier version still does', async () => {
      const db = database.db;
      await db.insertInto('events').values(event('evt_d')).execute();
      await db
        .insertInto('deliveries')
        .values(delivery('evt_d', 'pending', 0, 2, T2))
        .execute();
      await db
        .insertInto('delivery_attempts')
        .values([attempt('evt_d', 1, 'failed', T0), attempt('evt_d', 2, 'retrying', T2)])
        .execute();
      const deliveries = deliveriesOf(database);
      const feed = await deliveries.attempts('t1', 'est_1', { take: 100 });
      assert.deepEqual(
        feed.attempts.filter((a) => a.event_id === 'evt_d').map((a) => `${a.seq} ${a.status}`),
        ['2 retrying', '1 failed'],
      );
      const shown = await deliveries.get('t1', 'est_1', 'evt_d');
      assert.deepEqual(
        shown.attempts.map((a) => a.status),
        ['failed', 'retrying'],
      );
      await db.deleteFrom('delivery_attempts').where('event_id', '=', 'evt_d').execute();
      await db.deleteFrom('deliveries').where('event_id', '=', 'evt_d').execute();
    });

    it("writes the waiting one's retrying row with its next attempt", async () => {
      const lease = '2026-06-02T00:01:00.000Z';
      await database.db
        .updateTable('deliveries')
        .set({ claimed_until: lease })
        .where('event_id', '=', waiting)
        .execute();
      const recorded = await recordOutcomes(database, [
        {
          stream_id: 'est_1',
          event_id: waiting,
          lease,
          status: 'delivered',
          attempt_count: 1,
          next_attempt_at: T2,
          at: T2,
          seq: 3,
          attempt_status: 'delivered',
          error_message: null,
          duration: 4,
          requeued_at: QUEUED,
        },
      ]);
      assert.equal(recorded, 1);
      assert.deepEqual(
        (await rows()).filter((r) => r.startsWith(waiting)),
        [`${waiting}#1 failed ${T0}`, `${waiting}#2 retrying ${QUEUED}`, `${waiting}#3 delivered ${T2}`],
      );
    });
  });
});
