import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { migrate, openDatabase, transaction, type Database } from '../../../src/db/database.ts';
import { StreamDeletionStore, type RemovalCursor } from '../../../src/modules/event-streams/store/deletions.ts';
import { createTestDatabase, eachDatabase, type TestDatabase } from '../../helpers/databases.ts';

const T0 = '2026-03-01T10:00:00.000Z';
const PAST = '2026-01-01T00:00:00.000Z';
let made = 0;

/** A stream being deleted, due now, with `minutes` counts and `deliveries` failed deliveries of `attempts` each. */
async function doomedStream(database: Database, minutes: number, deliveries: number, attempts: number) {
  const id = `est_${String(made++).padStart(22, '0')}`;
  await database.db
    .insertInto('event_streams')
    .values({
      id,
      tenant_id: 't1',
      name: null,
      status: 'deleting',
      subscriptions: '[]',
      destination: '{"type":"webhook"}',
      secret: null,
      consecutive_failures: 0,
      created_at: T0,
      updated_at: T0,
      deletion_next_at: PAST,
      deletion_claimed_until: null,
    })
    .execute();
  if (minutes > 0)
    await database.db
      .insertInto('delivery_counts')
      .values(
        Array.from({ length: minutes }, (_, i) => ({
          stream_id: id,
          minute: new Date(Date.parse(T0) + i * 60_000).toISOString().slice(0, 16),
          delivered: 1,
          failed: 1,
        })),
      )
      .execute();
  const events = Array.from({ length: deliveries }, () => `evt_${String(made++).padStart(22, '0')}`);
  for (let i = 0; i < events.length; i += 200) {
    const slice = events.slice(i, i + 200);
    await database.db
      .insertInto('events')
      .values(
        slice.map((e) => ({
          id: e,
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
        slice.map((event_id) => ({
          stream_id: id,
          event_id,
          event_type: 'user.created',
          event_time: T0,
          status: 'failed' as const,
          attempt_count: attempts,
          attempt_seq: attempts,
          next_attempt_at: T0,
          claimed_until: null,
          updated_at: T0,
        })),
      )
      .execute();
    if (attempts > 0)
      await database.db
        .insertInto('delivery_attempts')
        .values(
          slice.flatMap((event_id) =>
            Array.from({ length: attempts }, (_, seq) => ({
              stream_id: id,
              event_id,
              seq: seq + 1,
              status: 'failed' as const,
              timestamp: T0,
              error_message: null,
              duration: 1,
            })),
          ),
        )
        .execute();
  }
  return { id, events, rows: minutes + deliveries + deliveries * attempts };
}

describe('a deleted stream removed chunk by chunk', () => {
  eachDatabase((kind) => {
    let testDatabase: TestDatabase;
    let database: Database;
    let store: StreamDeletionStore;
    const lease = () => new Date(Date.now() + 60_000).toISOString();

    before(async () => {
      testDatabase = await createTestDatabase(kind);
      database = openDatabase({ databaseUrl: testDatabase.databaseUrl, dataDir: testDatabase.dataDir });
      await migrate(database);
      await database.db.insertInto('tenants').values({ id: 't1', domain: 't1.test', created_at: T0 }).execute();
      store = new StreamDeletionStore(database);
    });

    after(async () => {
      await database.close();
      await testDatabase.drop();
    });

    /** Every chunk's rows until the stream is gone, the stages (counts, attempts, deliveries) ending inside chunks. */
    async function removeAll(streamId: string, rows: number): Promise<number[]> {
      const [claimed] = (await store.claimDue(60_000, 10)).filter((c) => c.id === streamId);
      assert.ok(claimed, 'claimed');
      let deletion = claimed;
      let cursor: RemovalCursor = { countsDone: false, attemptsDone: false };
      const chunks: number[] = [];
      for (let i = 0; i < 10_000; i++) {
        const next = lease();
        const result = await store.removeChunk(deletion, next, cursor, rows);
        assert.ok(result, 'the lease held');
        chunks.push(result.rows);
        if (result.finished) return chunks;
        cursor = result.cursor;
        deletion = { ...deletion, lease: next };
      }
      throw new Error('never finished');
    }

    it('removes at most the chunk size in every chunk, when counts and attempts end inside one chunk', async () => {
      // 3 counts and 5 attempts end in the first chunk of 7 (8 rows): the attempts take what it has left.
      const small = await doomedStream(database, 3, 5, 1);
      const smallChunks = await removeAll(small.id, 7);
      assert.ok(
        smallChunks.every((n) => n <= 7),
        String(smallChunks),
      );
      assert.equal(
        smallChunks.reduce((a, b) => a + b, 0),
        small.rows,
      );
      // 400 counts and 700 attempts together pass 1,000 in the first chunk.
      const larger = await doomedStream(database, 400, 350, 2);
      const largerChunks = await removeAll(larger.id, 1000);
      assert.ok(
        largerChunks.every((n) => n <= 1000),
        String(largerChunks),
      );
      assert.equal(
        largerChunks.reduce((a, b) => a + b, 0),
        larger.rows,
      );
      for (const table of ['delivery_counts', 'delivery_attempts', 'deliveries'] as const) {
        const left = await database.db
          .selectFrom(table)
          .select('stream_id')
          .where('stream_id', 'in', [small.id, larger.id])
          .execute();
        assert.deepEqual(left, [], table);
      }
      assert.deepEqual(
        await database.db.selectFrom('event_streams').select('id').where('id', 'in', [small.id, larger.id]).execute(),
        [],
      );
    });

    it('locks the stream after the rows it removes, as the recording of an attempt does (PostgreSQL)', async (t) => {
      if (kind !== 'postgres') return t.skip('SQLite runs one transaction at a time');
      const doomed = await doomedStream(database, 0, 1, 1);
      const [claimed] = (await store.claimDue(60_000, 10)).filter((c) => c.id === doomed.id);
      assert.ok(claimed);
      // A recording holds the delivery (its first statement) and then asks for the stream (its circuit),
      // while a chunk is removing that delivery. Had the chunk locked the stream first: a deadlock (40P01).
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let holding!: () => void;
      const held = new Promise<void>((resolve) => (holding = resolve));
      const recording = transaction(database, async (trx) => {
        await trx
          .updateTable('deliveries')
          .set({ updated_at: T0 })
          .where('stream_id', '=', doomed.id)
          .where('event_id', '=', doomed.events[0]!)
          .execute();
        holding();
        await released;
        await trx.selectFrom('event_streams').select('id').where('id', '=', doomed.id).forNoKeyUpdate().execute();
        return 'recorded';
      }).catch((error: { code?: string }) => `recording failed: ${error.code}`);
      await held;
      const chunk = store
        .removeChunk(claimed, lease(), { countsDone: false, attemptsDone: false }, 100)
        .then((result) => (result?.finished ? 'removed' : String(result)))
        .catch((error: { code?: string }) => `chunk failed: ${error.code}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      release();
      assert.deepEqual(await Promise.all([recording, chunk]), ['recorded', 'removed']);
    });
  });
});
