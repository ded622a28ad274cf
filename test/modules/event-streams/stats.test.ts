import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { migrate, openDatabase, transaction, type Database } from '../../../src/db/database.ts';
import { Deliveries } from '../../../src/modules/event-streams/deliveries.ts';
import type { Outcome } from '../../../src/modules/event-streams/delivery/outcome.ts';
import { statsWindow } from '../../../src/modules/event-streams/stats.ts';
import { DeliveryStore } from '../../../src/modules/event-streams/store/deliveries.ts';
import { recordOutcomes } from '../../../src/modules/event-streams/store/outcomes.ts';
import { StreamStore } from '../../../src/modules/event-streams/store/streams.ts';
import { RedeliveryStore } from '../../../src/modules/event-streams/store/redeliveries.ts';
import { createTestDatabase, eachDatabase, migrateTo, type TestDatabase } from '../../helpers/databases.ts';

const T0 = '2026-06-01T00:00:00.000Z';
const LEASE = '2026-06-01T10:00:00.000Z';

/** A stream of tenant t1, as stored. */
const stream = (id: string) => ({
  id,
  tenant_id: 't1',
  name: `name of ${id}`,
  status: 'enabled' as const,
  subscriptions: '[]',
  destination: '{"type":"webhook"}',
  secret: null,
  consecutive_failures: 0,
  created_at: T0,
  updated_at: T0,
});

async function seedTenant(database: Database, streams: string[]): Promise<void> {
  await database.db.insertInto('tenants').values({ id: 't1', domain: 't1.test', created_at: T0 }).execute();
  await database.db.insertInto('event_streams').values(streams.map(stream)).execute();
}

let made = 0;

/** `n` events, each with a delivery on `streamId` claimed under LEASE, waiting for its outcome. */
async function claimedDeliveries(database: Database, streamId: string, n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, () => `evt_${String(made++).padStart(6, '0')}`);
  await database.db
    .insertInto('events')
    .values(
      ids.map((id) => ({
        id,
        tenant_id: 't1',
        type: 'user.created',
        time: T0,
        source: 'urn:t',
        data: '{}',
        purpose: null,
      })),
    )
    .execute();
  await database.db
    .insertInto('deliveries')
    .values(
      ids.map((event_id) => ({
        stream_id: streamId,
        event_id,
        event_type: 'user.created',
        event_time: T0,
        status: 'pending' as const,
        attempt_count: 0,
        attempt_seq: 0,
        next_attempt_at: T0,
        claimed_until: LEASE,
        updated_at: T0,
      })),
    )
    .execute();
  return ids;
}

const outcome = (
  stream_id: string,
  event_id: string,
  attempt_status: 'delivered' | 'failed',
  at: string,
  lease = LEASE,
): Outcome => ({
  stream_id,
  event_id,
  lease,
  status: attempt_status === 'delivered' ? 'delivered' : 'failed',
  attempt_count: 1,
  next_attempt_at: at,
  at,
  seq: 1,
  attempt_status,
  error_message: attempt_status === 'failed' ? 'HTTP 500' : null,
  duration: 2,
  requeued_at: null,
});

const countRows = async (database: Database) =>
  (await database.db.selectFrom('delivery_counts').selectAll().orderBy('stream_id').orderBy('minute').execute()).map(
    (r) => `${r.stream_id} ${r.minute} ${r.delivered}/${r.failed}`,
  );

/** What the attempts themselves say, counted per stream and minute: what the counts must always equal. */
const countedFromAttempts = async (database: Database) =>
  (
    await sql<{ stream_id: string; minute: string; delivered: number; failed: number }>`
      SELECT stream_id, substr(timestamp, 1, 16) AS minute,
        sum(CASE WHEN status = 'delivered' THEN 1 ELSE 0 END) AS delivered,
        sum(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS failed
      FROM delivery_attempts WHERE status <> 'retrying'
      GROUP BY stream_id, substr(timestamp, 1, 16) ORDER BY stream_id, minute`.execute(database.db)
  ).rows.map((r) => `${r.stream_id} ${r.minute} ${Number(r.delivered)}/${Number(r.failed)}`);

const deliveriesOf = (database: Database) =>
  new Deliveries(database, new StreamStore(database), new DeliveryStore(database), async () => undefined, {
    store: new RedeliveryStore(database),
    chunkRows: 2000,
    lanes: 1,
    recorded: () => undefined,
  });

describe('stream statistics: per-minute counts written with the attempts', () => {
  eachDatabase((kind) => {
    let testDatabase: TestDatabase;
    let database: Database;

    before(async () => {
      testDatabase = await createTestDatabase(kind);
      database = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      await migrate(database);
      await seedTenant(database, ['est_a', 'est_b']);
    });

    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    it('adds each recorded attempt to its stream and minute, and nothing for an outcome whose lease was lost', async () => {
      const a = await claimedDeliveries(database, 'est_a', 5);
      const b = await claimedDeliveries(database, 'est_b', 2);
      const recorded = await recordOutcomes(database, [
        outcome('est_a', a[0]!, 'delivered', '2026-06-01T10:00:59.999Z'),
        outcome('est_a', a[1]!, 'failed', '2026-06-01T10:00:01.000Z'),
        outcome('est_b', b[0]!, 'failed', '2026-06-01T10:00:30.000Z'),
        outcome('est_a', a[2]!, 'delivered', '2026-06-01T10:01:00.000Z'),
        // Another worker's lease by now: neither the attempt nor its count is written.
        outcome('est_a', a[3]!, 'delivered', '2026-06-01T10:01:00.000Z', '2026-06-01T09:00:00.000Z'),
      ]);
      assert.equal(recorded, 4);
      assert.deepEqual(await countRows(database), [
        'est_a 2026-06-01T10:00 1/1',
        'est_a 2026-06-01T10:01 1/0',
        'est_b 2026-06-01T10:00 0/1',
      ]);
      // A later batch adds to the minutes already counted.
      await recordOutcomes(database, [
        outcome('est_a', a[3]!, 'failed', '2026-06-01T10:00:10.000Z'),
        outcome('est_a', a[4]!, 'failed', '2026-06-01T10:02:00.000Z'),
        outcome('est_b', b[1]!, 'delivered', '2026-06-01T10:00:00.000Z'),
      ]);
      assert.deepEqual(await countRows(database), [
        'est_a 2026-06-01T10:00 1/2',
        'est_a 2026-06-01T10:01 1/0',
        'est_a 2026-06-01T10:02 0/1',
        'est_b 2026-06-01T10:00 1/1',
      ]);
      assert.deepEqual(await countRows(database), await countedFromAttempts(database));
    });

    it('counts every attempt of batches recorded at once on the same minutes', async () => {
      const ids = await claimedDeliveries(database, 'est_b', 400);
      const batches = Array.from({ length: 8 }, (_, i) =>
        ids
          .slice(i * 50, (i + 1) * 50)
          .map((id, j) => outcome('est_b', id, j % 3 ? 'delivered' : 'failed', `2026-06-01T11:0${j % 2}:00.000Z`)),
      );
      const recorded = await Promise.all(batches.map((batch) => recordOutcomes(database, batch)));
      assert.deepEqual(recorded, Array(8).fill(50));
      assert.deepEqual(await countRows(database), await countedFromAttempts(database));
      const counts = await database.db
        .selectFrom('delivery_counts')
        .select((eb) => [eb.fn.sum<number>('delivered').as('d'), eb.fn.sum<number>('failed').as('f')])
        .where('minute', '>=', '2026-06-01T11:00')
        .executeTakeFirstOrThrow();
      assert.equal(Number(counts.d) + Number(counts.f), 400);
    });

    it('answers the window from the counts: whole buckets, every one of them, and only the stream asked for', async () => {
      const deliveries = deliveriesOf(database);
      const hourly = await deliveries.stats('t1', 'est_a', {
        date_from: '2026-06-01T10:00:30Z',
        date_to: '2026-06-01T10:01:30Z',
      });
      assert.deepEqual(hourly.window, {
        date_from: '2026-06-01T10:00:00.000Z',
        date_to: '2026-06-01T10:00:00.000Z',
        bucket_interval: { scale_factor: 3600 },
      });
      assert.deepEqual(hourly.buckets, ['2026-06-01T10:00:00.000Z']);
      assert.deepEqual(
        hourly.metrics.map((m) => [m.name, m.window_total, m.data]),
        [
          ['svc.event_streams.successful_deliveries', 2, [2]],
          ['svc.event_streams.failed_deliveries', 3, [3]],
        ],
      );
      const minutes = await deliveries.stats('t1', 'est_a', {
        date_from: '2026-06-01T09:59:00Z',
        date_to: '2026-06-01T10:01:59.999Z',
        scale_factor: 60,
      });
      assert.deepEqual(minutes.buckets, [
        '2026-06-01T09:59:00.000Z',
        '2026-06-01T10:00:00.000Z',
        '2026-06-01T10:01:00.000Z',
      ]);
      assert.deepEqual(
        minutes.metrics.map((m) => m.data),
        [
          [0, 1, 1],
          [0, 2, 0],
        ],
      );
      const daily = await deliveries.stats('t1', 'est_b', {
        date_from: '2026-05-30T12:00:00Z',
        date_to: '2026-06-02T00:00:00Z',
      });
      assert.equal(daily.window.bucket_interval.scale_factor, 86400);
      assert.deepEqual(daily.buckets, [
        '2026-05-30T00:00:00.000Z',
        '2026-05-31T00:00:00.000Z',
        '2026-06-01T00:00:00.000Z',
        '2026-06-02T00:00:00.000Z',
      ]);
      const b = await countedFromAttempts(database);
      const bTotal = b
        .filter((row) => row.startsWith('est_b'))
        .reduce((sum, row) => sum + Number(row.split(' ')[2]!.split('/')[0]), 0);
      assert.deepEqual(daily.metrics[0]!.data, [0, 0, bTotal, 0]);
    });
  });
});

describe('migration 021: the attempts recorded before it are counted', () => {
  eachDatabase((kind) => {
    let testDatabase: TestDatabase;
    let database: Database;

    before(async () => {
      testDatabase = await createTestDatabase(kind);
      database = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      await migrateTo(database, '020_text_compared_bytewise');
      await seedTenant(database, ['est_a', 'est_b']);
      const ids = ['evt_1', 'evt_2', 'evt_3'];
      await database.db
        .insertInto('events')
        .values(
          ids.map((id) => ({
            id,
            tenant_id: 't1',
            type: 'user.created',
            time: T0,
            source: 'urn:t',
            data: '{}',
            purpose: null,
          })),
        )
        .execute();
      await database.db
        .insertInto('deliveries')
        .values(
          ['est_a', 'est_b'].flatMap((stream_id) =>
            ids.map((event_id) => ({
              stream_id,
              event_id,
              event_type: 'user.created',
              event_time: T0,
              status: 'failed' as const,
              attempt_count: 1,
              attempt_seq: 3,
              next_attempt_at: T0,
              claimed_until: null,
              updated_at: T0,
            })),
          ),
        )
        .execute();
      const attempt = (stream_id: string, event_id: string, seq: number, status: string, timestamp: string) => ({
        stream_id,
        event_id,
        seq,
        status: status as 'failed',
        timestamp,
        error_message: null,
        duration: null,
      });
      await database.db
        .insertInto('delivery_attempts')
        .values([
          attempt('est_a', 'evt_1', 1, 'failed', '2026-06-01T10:00:01.000Z'),
          attempt('est_a', 'evt_1', 2, 'retrying', '2026-06-01T10:00:02.000Z'),
          attempt('est_a', 'evt_1', 3, 'delivered', '2026-06-01T10:00:59.000Z'),
          attempt('est_a', 'evt_2', 1, 'failed', '2026-06-01T10:01:00.000Z'),
          attempt('est_b', 'evt_3', 1, 'delivered', '2026-06-01T10:00:00.000Z'),
        ])
        .execute();
      await migrate(database);
    });

    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    it('writes one row per stream and minute, retrying attempts left out', async () => {
      assert.deepEqual(await countRows(database), [
        'est_a 2026-06-01T10:00 1/1',
        'est_a 2026-06-01T10:01 0/1',
        'est_b 2026-06-01T10:00 1/0',
      ]);
    });

    it('goes with its stream', async () => {
      await database.db.deleteFrom('event_streams').where('id', '=', 'est_b').execute();
      assert.deepEqual(await countRows(database), ['est_a 2026-06-01T10:00 1/1', 'est_a 2026-06-01T10:01 0/1']);
    });
  });
});

describe('the stats window', () => {
  const NOW = Date.parse('2025-08-01T06:50:12.345Z');

  it('answers a Go SDK request as the original did: both bounds cut to the hour, one bucket', () => {
    // go-auth0's WithDateRange sends RFC 3339 with the caller's offset.
    const window = statsWindow({ date_from: '2025-08-01T12:08:29+05:30', date_to: '2025-08-01T12:28:29+05:30' }, NOW);
    assert.equal(window.dateFrom, '2025-08-01T06:00:00.000Z');
    assert.equal(window.dateTo, '2025-08-01T06:00:00.000Z');
    assert.equal(window.scaleFactor, 3600);
    assert.deepEqual(window.buckets, ['2025-08-01T06:00:00.000Z']);
    assert.equal(window.firstMinute, '2025-08-01T06:00');
    assert.equal(window.endMinute, '2025-08-01T07:00');
  });

  it('defaults to the 14 days up to the end of the current hour, in day buckets, as the original did', () => {
    const window = statsWindow({}, NOW);
    assert.equal(window.dateFrom, '2025-07-18T06:00:00.000Z');
    assert.equal(window.dateTo, '2025-08-01T07:00:00.000Z');
    assert.equal(window.scaleFactor, 86400);
    assert.equal(window.buckets.length, 15);
    assert.equal(window.buckets[0], '2025-07-18T00:00:00.000Z');
    assert.equal(window.buckets[14], '2025-08-01T00:00:00.000Z');
    assert.equal(window.endMinute, '2025-08-02T00:00');
  });

  it('takes minute buckets when asked, three hours by default', () => {
    const window = statsWindow({ scale_factor: 60 }, NOW);
    assert.equal(window.dateFrom, '2025-08-01T03:50:00.000Z');
    assert.equal(window.dateTo, '2025-08-01T06:51:00.000Z');
    assert.equal(window.buckets.length, 182);
    assert.equal(window.bucketKeyLength, 16);
  });

  it('switches from hours to days past 24 hours', () => {
    const day = statsWindow({ date_from: '2025-07-31T06:00:00Z', date_to: '2025-08-01T06:00:00Z' }, NOW);
    assert.equal(day.scaleFactor, 3600);
    assert.equal(day.buckets.length, 25);
    const more = statsWindow({ date_from: '2025-07-31T05:59:59Z', date_to: '2025-08-01T06:00:00Z' }, NOW);
    assert.equal(more.scaleFactor, 86400);
    assert.deepEqual(more.buckets, ['2025-07-31T00:00:00.000Z', '2025-08-01T00:00:00.000Z']);
  });

  it('refuses windows too long, backwards, or with times that are no RFC 3339 time', () => {
    const refused = (query: Parameters<typeof statsWindow>[0]) => {
      try {
        statsWindow(query, NOW);
      } catch (error) {
        return (error as { statusCode: number; message: string }).message;
      }
      return 'answered';
    };
    assert.equal(refused({ date_from: '2025-07-01T06:00:00Z', date_to: '2025-08-01T06:00:00Z' }), 'answered');
    assert.match(
      refused({ date_from: '2025-07-01T05:00:00Z', date_to: '2025-08-01T06:00:00Z' }),
      /longer than 31 days/,
    );
    assert.match(
      refused({ date_from: '2025-07-31T05:00:00Z', date_to: '2025-08-01T06:00:00Z', scale_factor: 60 }),
      /longer than 24 hours/,
    );
    assert.match(refused({ date_from: '2025-08-01T06:00:00Z', date_to: '2025-08-01T06:00:00Z' }), /before date_to/);
    assert.match(refused({ date_from: '2025-08-01T06:00:00+01' }), /date_from must be an RFC 3339 date-time/);
    // Without date_from, a date_to more than 14 days back still has its 14 days.
    assert.equal(refused({ date_to: '2020-01-01T00:00:00Z' }), 'answered');
    // Buckets must be times RFC 3339 can write: a window reaching before year 0 or past 9999 is refused.
    assert.match(refused({ date_to: '0000-01-01T00:00:00Z' }), /within the years 0000 to 9999/);
    assert.equal(refused({ date_from: '0000-01-01T00:00:00Z', date_to: '0000-01-01T01:00:00Z' }), 'answered');
    assert.match(
      refused({ date_from: '9999-12-31T00:00:00Z', date_to: '9999-12-31T01:00:00Z', scale_factor: 86400 }),
      /9999/,
    );
    assert.match(refused({ date_from: '9999-12-31T00:00:00Z', date_to: '9999-12-31T23:00:00Z' }), /9999/);
    assert.equal(refused({ date_from: '9999-12-31T00:00:00Z', date_to: '9999-12-31T22:59:59Z' }), 'answered');
    // A date_from after the default end (a future hour) is a window that ends before it begins.
    assert.match(refused({ date_from: '2025-08-01T09:00:00Z' }), /before date_to/);
  });
});

/**
 * PostgreSQL: a new minute's count row takes a KEY SHARE lock on its stream (the foreign key). The
 * recordings' own stream locks and those of the API's transactions (PATCH, redelivery, signing secrets)
 * must leave it free, or recording waits behind them and two recordings can wait on each other.
 */
describe(
  'stream statistics: recording beside stream locks (PostgreSQL)',
  { skip: !process.env.TEST_DATABASE_URL },
  () => {
    let testDatabase: TestDatabase;
    let nodeA: Database;
    let nodeB: Database;
    const circuit = { openAfter: 5, cooldownMs: 1000, disableAfter: 0, onDisabled: () => undefined };
    /** Settles with what happened, or 'waiting' when `ms` pass first. */
    const within = <T>(promise: Promise<T>, ms: number) =>
      Promise.race([
        promise.then(
          (value) => ({ value }),
          (error: { code?: string }) => ({ error: error.code ?? String(error) }),
        ),
        new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), ms).unref()),
      ]);

    before(async () => {
      testDatabase = await createTestDatabase('postgres');
      nodeA = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      nodeB = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      await migrate(nodeA);
      await seedTenant(nodeA, ['est_x', 'est_y']);
    });

    after(async () => {
      await nodeA.close();
      await nodeB.close();
      await testDatabase.drop();
    });

    /** A transaction of node A holding the stream as PATCH and redelivery do, through the store's own lock. */
    async function holdStream(streamId: string): Promise<{ release(): Promise<void> }> {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let held!: () => void;
      const holding = new Promise<void>((resolve) => (held = resolve));
      const transactionDone = transaction(nodeA, async (trx) => {
        assert.ok(await new StreamStore(nodeA).find('t1', streamId, { trx, lock: true }));
        held();
        await released;
      });
      await holding;
      return {
        release: async () => {
          release();
          await transactionDone;
        },
      };
    }
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    it("records a stream's new minute while an API transaction holds the stream", async () => {
      const [id] = await claimedDeliveries(nodeA, 'est_x', 1);
      const holder = await holdStream('est_x');
      try {
        const recorded = await within(
          recordOutcomes(nodeB, [outcome('est_x', id!, 'delivered', '2026-06-01T12:00:00.000Z')], circuit),
          3000,
        );
        assert.deepEqual(recorded, { value: 1 });
      } finally {
        await holder.release();
      }
    });

    it('records two nodes’ failures on the same streams, one of them counting a new minute, without a deadlock', async () => {
      const [x1, x2] = await claimedDeliveries(nodeA, 'est_x', 2);
      const [y1, y2] = await claimedDeliveries(nodeA, 'est_y', 2);
      // The first recording's failures lock est_x, then est_y; it waits on the holder for est_x while the
      // second, counting a new minute of est_x and failing on est_y, starts. Had the streams been locked FOR
      // UPDATE, the second would hold est_y waiting for est_x's key, and the first, let go, wait for est_y.
      const holder = await holdStream('est_x');
      const first = within(
        recordOutcomes(
          nodeB,
          [
            outcome('est_x', x1!, 'failed', '2026-06-01T13:00:01.000Z'),
            outcome('est_y', y1!, 'failed', '2026-06-01T13:00:02.000Z'),
          ],
          circuit,
        ),
        10_000,
      );
      await sleep(200);
      const second = within(
        recordOutcomes(
          nodeB,
          [
            outcome('est_x', x2!, 'delivered', '2026-06-01T13:05:00.000Z'),
            outcome('est_y', y2!, 'failed', '2026-06-01T13:05:00.000Z'),
          ],
          circuit,
        ),
        10_000,
      );
      await sleep(200);
      await holder.release();
      assert.deepEqual(await Promise.all([first, second]), [{ value: 2 }, { value: 2 }]);
      assert.deepEqual(await countRows(nodeA), await countedFromAttempts(nodeA));
    });
  },
);
