import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { migrate, openDatabase, type Database } from '../../../../src/db/database.ts';
import { claimDue, type ClaimLimits } from '../../../../src/modules/event-streams/store/claim.ts';
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
