import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { migrate, openDatabase, type Database } from '../../src/db/database.ts';
import { DeliveryStore } from '../../src/modules/event-streams/store/deliveries.ts';
import { createTestDatabase, eachDatabase, migrateTo, type TestDatabase } from '../helpers/databases.ts';

const T0 = '2026-06-01T00:00:00.000Z';
// Bytewise, upper case sorts before lower case; a linguistic collation compares the letters first.
const BYTEWISE = ['evt_1Ab', 'evt_1B', 'evt_1aa'];
const LINGUISTIC = ['evt_1aa', 'evt_1Ab', 'evt_1B'];

/**
 * Migration 020: on PostgreSQL, text is compared bytewise whatever the database's own collation, so ids are
 * ordered as on SQLite. The PostgreSQL database here is made with an English ICU collation, as an
 * operator's may be.
 */
describe('migration 020: text compared bytewise', () => {
  eachDatabase((kind) => {
    let testDatabase: TestDatabase;
    let database: Database;
    let orderBefore: string[];

    const failedIds = async () =>
      (await new DeliveryStore(database).failedPage({ streamId: 'est_1' }, undefined, 10)).map((d) => d.event_id);

    before(async () => {
      testDatabase = await createTestDatabase(kind, { icuLocale: 'en-US' });
      database = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      await migrateTo(database, '019_deliveries_requeued');
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
      await db
        .insertInto('events')
        .values(
          LINGUISTIC.map((id) => ({
            id,
            tenant_id: 't1',
            type: 'user.created',
            time: T0,
            source: 'urn:test',
            data: JSON.stringify({ id }),
            purpose: null,
          })),
        )
        .execute();
      await db
        .insertInto('deliveries')
        .values(
          LINGUISTIC.map((event_id) => ({
            stream_id: 'est_1',
            event_id,
            event_type: 'user.created',
            event_time: T0,
            status: 'failed' as const,
            attempt_count: 3,
            attempt_seq: 3,
            next_attempt_at: T0,
            claimed_until: null,
            updated_at: T0,
          })),
        )
        .execute();
      orderBefore = await failedIds();
      await migrate(database);
    });

    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    it('lists failed deliveries by event id bytewise, as SQLite does, keyset pages included', async () => {
      // The database's own collation was in force before: the test's premise.
      assert.deepEqual(orderBefore, kind === 'postgres' ? LINGUISTIC : BYTEWISE);
      assert.deepEqual(await failedIds(), BYTEWISE);
      const after1B = await new DeliveryStore(database).failedPage({ streamId: 'est_1' }, 'evt_1B', 10);
      assert.deepEqual(
        after1B.map((d) => d.event_id),
        ['evt_1aa'],
      );
    });

    it('keeps every row and its data, and each id still finds only its own row', async () => {
      const events = await database.db.selectFrom('events').select(['id', 'data']).orderBy('id').execute();
      assert.deepEqual(
        events,
        BYTEWISE.map((id) => ({ id, data: JSON.stringify({ id }) })),
      );
      for (const id of BYTEWISE) {
        const found = await database.db
          .selectFrom('deliveries')
          .select('event_id')
          .where('event_id', '=', id)
          .execute();
        assert.deepEqual(found, [{ event_id: id }]);
      }
      // The primary key still refuses a second row for the same ids.
      await assert.rejects(
        database.db
          .insertInto('events')
          .values({ id: 'evt_1B', tenant_id: 't1', type: 'x', time: T0, source: 'urn:test', data: '{}', purpose: null })
          .execute(),
      );
    });

    if (kind === 'postgres') {
      it('leaves no text column of the schema under another collation (a new table declares COLLATE "C")', async () => {
        const { rows } = await sql<{ column: string; collation: string }>`
          SELECT c.relname || '.' || a.attname AS column, co.collname AS collation
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_collation co ON co.oid = a.attcollation
          WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
            AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped AND a.atttypid = 'text'::regtype
            AND c.relname NOT IN ('tenantry_migrations', 'tenantry_migrations_lock')`.execute(database.db);
        assert.ok(rows.some((r) => r.column === 'deliveries.event_id'));
        assert.deepEqual(
          rows.filter((r) => r.collation !== 'C'),
          [],
        );
      });
    }
  });
});
