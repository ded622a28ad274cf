import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { migrate, openDatabase, type Database } from '../../../../src/db/database.ts';
import { outcomeOf } from '../../../../src/modules/event-streams/delivery/outcome.ts';
import { claimDue, type Claimed, type ClaimLimits } from '../../../../src/modules/event-streams/store/claim.ts';
import { recordOutcomes } from '../../../../src/modules/event-streams/store/outcomes.ts';
import { createTestDatabase, eachDatabase, type TestDatabase } from '../../../helpers/databases.ts';

const AT = '2026-06-01T00:00:00.000Z';
/** More than the window's first read takes (at least 64, at most 4 × limit + in flight): the stream behind it is found by the walk. */
const BACKLOG = 600;

/**
 * The claim finds a stream with room behind another stream's backlog: stream A has BACKLOG due deliveries,
 * all older than stream B's one, and is at its cap. The window (the oldest due deliveries) then holds only
 * A's, and only the walk of the streams reaches B.
 */
describe('delivery claim behind a backlog', () => {
  eachDatabase((kind) => {
    let testDatabase: TestDatabase;
    let database: Database;
    const limits = (running: ReadonlyMap<string, number>, reserve = 0): ClaimLimits => ({
      limit: 4,
      perStream: 4,
      reserve,
      breakerFailures: 10,
      running,
    });

    before(async () => {
      testDatabase = await createTestDatabase(kind);
      database = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      await migrate(database);
      const n = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${BACKLOG})`;
      await database.db.transaction().execute(async (trx) => {
        for (const statement of [
          `INSERT INTO tenants (id, domain, created_at) VALUES ('t', 't.example', '${AT}')`,
          `INSERT INTO event_streams (id, tenant_id, name, status, subscriptions, destination, secret, created_at, updated_at)
           SELECT id, 't', NULL, 'enabled', '[]', '{"type":"webhook"}', NULL, '${AT}', '${AT}'
           FROM (SELECT 'est_a' AS id UNION ALL SELECT 'est_b') s`,
          `INSERT INTO events (id, tenant_id, type, time, source, data, purpose)
           ${n} SELECT 'evt_' || (1000 + i), 't', 'user.created', '${AT}', 'urn:t', '{}', NULL FROM n`,
          // A's deliveries fall due a millisecond apart, all before B's.
          `INSERT INTO deliveries (stream_id, event_id, event_type, event_time, status, attempt_count, attempt_seq,
             next_attempt_at, claimed_until, updated_at)
           ${n} SELECT 'est_a', 'evt_' || (1000 + i), 'user.created', '${AT}', 'pending', 0, 0,
             '2026-05-01T00:00:00.' || substr(CAST(1000 + i AS TEXT), 2, 3) || 'Z', NULL, '${AT}' FROM n`,
          `INSERT INTO deliveries (stream_id, event_id, event_type, event_time, status, attempt_count, attempt_seq,
             next_attempt_at, claimed_until, updated_at)
           VALUES ('est_b', 'evt_1001', 'user.created', '${AT}', 'pending', 0, 0, '2026-05-02T00:00:00.000Z', NULL, '${AT}')`,
        ])
          await sql.raw(statement).execute(trx);
      });
    });

    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    it('gives the slot to the stream with room, not to the one at its cap', async () => {
      const claimed = await claimDue(database, { leaseMs: 60_000, at: AT }, limits(new Map([['est_a', 4]])));
      assert.deepEqual(
        claimed.map((c) => [c.stream_id, c.event_id]),
        [['est_b', 'evt_1001']],
      );
    });

    it('leaves the reserved slots to streams with nothing in flight, found behind the backlog too', async () => {
      // B's delivery is leased now; A has one in flight and the one free slot is reserved: nothing to claim.
      assert.deepEqual(await claimDue(database, { leaseMs: 60_000, at: AT }, limits(new Map([['est_a', 1]]), 4)), []);
      // With A at rest it takes the slot, its oldest first.
      const claimed = await claimDue(database, { leaseMs: 60_000, at: AT }, { ...limits(new Map(), 4), limit: 1 });
      assert.deepEqual(
        claimed.map((c) => c.event_id),
        ['evt_1001'],
      );
      assert.equal(claimed[0]!.stream_id, 'est_a');
    });
  });
});

/**
 * SQLite: the commits of a claim and of the record of its attempts do not wait for the disk (lost to a
 * power cut, their deliveries are sent again: at-least-once), and every other commit still does. A
 * trigger records the connection's synchronous setting as each leased row is written (claimed, then
 * recorded, which clears the lease).
 */
describe('delivery claims and records commit without waiting for the disk (SQLite)', () => {
  const FULL = 2;
  const NORMAL = 1;
  const limits: ClaimLimits = { limit: 4, perStream: 4, reserve: 0, breakerFailures: 10, running: new Map() };
  /** Records the claimed delivery's attempt as delivered, as the worker does once its send succeeded. */
  const recordDelivered = (database: Database, claimed: Claimed) =>
    recordOutcomes(database, [
      outcomeOf(
        claimed,
        { kind: 'delivered', durationMs: 1 },
        { deliveryRetryScheduleMs: [1000], deliveryRetryAfterMaxMs: 1000 },
        AT,
      ),
    ]);

  const setUp = async (sqliteSynchronous: 'full' | 'normal') => {
    const testDatabase = await createTestDatabase('sqlite');
    const database = openDatabase({ databaseUrl: undefined, dataDir: testDatabase.dataDir, sqliteSynchronous });
    await migrate(database);
    for (const statement of [
      `INSERT INTO tenants (id, domain, created_at) VALUES ('t', 't.example', '${AT}')`,
      `INSERT INTO event_streams (id, tenant_id, name, status, subscriptions, destination, secret, created_at, updated_at)
       VALUES ('est_a', 't', NULL, 'enabled', '[]', '{"type":"webhook"}', NULL, '${AT}', '${AT}')`,
      `INSERT INTO events (id, tenant_id, type, time, source, data, purpose)
       VALUES ('evt_1', 't', 'user.created', '${AT}', 'urn:t', '{}', NULL), ('evt_2', 't', 'user.created', '${AT}', 'urn:t', '{}', NULL)`,
      `INSERT INTO deliveries (stream_id, event_id, event_type, event_time, status, attempt_count, attempt_seq,
         next_attempt_at, claimed_until, updated_at)
       VALUES ('est_a', 'evt_1', 'user.created', '${AT}', 'pending', 0, 0, '2026-05-01T00:00:00.000Z', NULL, '${AT}'),
              ('est_a', 'evt_2', 'user.created', '${AT}', 'pending', 0, 0, '2026-05-01T00:00:00.001Z', NULL, '${AT}')`,
      `CREATE TABLE probe (synchronous INTEGER)`,
      `CREATE TABLE refuse (x INTEGER)`,
      `CREATE TRIGGER probe_lease AFTER UPDATE OF claimed_until ON deliveries BEGIN
         INSERT INTO probe SELECT synchronous FROM pragma_synchronous;
         SELECT RAISE(ABORT, 'refused') WHERE EXISTS (SELECT 1 FROM refuse);
       END`,
    ])
      await sql.raw(statement).execute(database.db);
    const probed = async () =>
      (await sql<{ synchronous: number }>`SELECT synchronous FROM probe`.execute(database.db)).rows.map(
        (r) => r.synchronous,
      );
    const setting = () => database.sqlite!.pragma('synchronous', { simple: true });
    return { testDatabase, database, probed, setting };
  };

  it('claims and records under synchronous NORMAL, then syncs every other commit again, also after a claim that failed', async () => {
    const { testDatabase, database, probed, setting } = await setUp('full');
    try {
      assert.equal(setting(), FULL);
      await sql.raw(`INSERT INTO refuse VALUES (1)`).execute(database.db);
      await assert.rejects(claimDue(database, { leaseMs: 60_000, at: AT }, limits), /refused/);
      assert.equal(setting(), FULL, 'restored after the failed claim');
      await sql.raw(`DELETE FROM refuse`).execute(database.db);
      await sql.raw(`DELETE FROM probe`).execute(database.db);

      const claimed = await claimDue(database, { leaseMs: 60_000, at: AT }, limits);
      assert.deepEqual(
        claimed.map((c) => c.event_id),
        ['evt_1', 'evt_2'],
      );
      assert.deepEqual(await probed(), [NORMAL, NORMAL]);
      assert.equal(setting(), FULL);
      assert.equal(await recordDelivered(database, claimed[0]!), 1);
      assert.deepEqual(await probed(), [NORMAL, NORMAL, NORMAL]);
      assert.equal(setting(), FULL, 'restored after the record');
      // Any other write on the same connection (an API write) syncs.
      await database.db
        .updateTable('deliveries')
        .set({ claimed_until: null })
        .where('event_id', '=', 'evt_2')
        .execute();
      assert.deepEqual(await probed(), [NORMAL, NORMAL, NORMAL, FULL]);
    } finally {
      await database.close();
      await testDatabase.drop();
    }
  });

  it('relaxes the very first claim of a connection too, and its record', async () => {
    const { testDatabase, database, probed, setting } = await setUp('full');
    try {
      const claimed = await claimDue(database, { leaseMs: 60_000, at: AT }, limits);
      assert.deepEqual(await probed(), [NORMAL, NORMAL]);
      assert.equal(setting(), FULL);
      assert.equal(await recordDelivered(database, claimed[1]!), 1);
      assert.deepEqual(await probed(), [NORMAL, NORMAL, NORMAL]);
      assert.equal(setting(), FULL);
    } finally {
      await database.close();
      await testDatabase.drop();
    }
  });

  it('leaves SQLITE_SYNCHRONOUS=normal as it is', async () => {
    const { testDatabase, database, probed, setting } = await setUp('normal');
    try {
      assert.equal((await claimDue(database, { leaseMs: 60_000, at: AT }, limits)).length, 2);
      assert.deepEqual(await probed(), [NORMAL, NORMAL]);
      assert.equal(setting(), NORMAL);
    } finally {
      await database.close();
      await testDatabase.drop();
    }
  });
});
