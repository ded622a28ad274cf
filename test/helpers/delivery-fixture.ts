import { setImmediate as nextTurn } from 'node:timers/promises';
import { newId } from '../../src/ids.ts';
import type { Database } from '../../src/db/database.ts';

/**
 * Writes `count` user.created events for one stream whose deliveries already failed (one failed
 * attempt each), straight into the database, in one transaction of batched INSERTs. Producing them
 * through the API would take `count` user creations and four refused webhook POSTs each; what is under
 * test is what happens to failed deliveries afterwards, not how they came to fail.
 */
export async function insertFailedDeliveries(
  database: Database,
  options: { tenantId: string; streamId: string; source: string; count: number; batch?: number },
): Promise<string[]> {
  const ids: string[] = [];
  const batch = options.batch ?? 1000;
  const time = new Date(Date.now() - 60_000).toISOString();
  await database.db.transaction().execute(async (trx) => {
    for (let done = 0; done < options.count; done += batch) {
      const chunk = Array.from({ length: Math.min(batch, options.count - done) }, () => newId.event());
      ids.push(...chunk);
      await trx
        .insertInto('events')
        .values(
          chunk.map((id, i) => ({
            id,
            tenant_id: options.tenantId,
            type: 'user.created',
            time,
            source: options.source,
            data: JSON.stringify({ object: { user_id: `svc|fixture${done + i}` } }),
            purpose: null,
          })),
        )
        .execute();
      await trx
        .insertInto('deliveries')
        .values(
          chunk.map((id) => ({
            stream_id: options.streamId,
            event_id: id,
            event_type: 'user.created',
            event_time: time,
            status: 'failed' as const,
            attempt_count: 1,
            attempt_seq: 1,
            next_attempt_at: time,
            claimed_until: null,
            updated_at: time,
          })),
        )
        .execute();
      await trx
        .insertInto('delivery_attempts')
        .values(
          chunk.map((id) => ({
            stream_id: options.streamId,
            event_id: id,
            seq: 1,
            status: 'failed' as const,
            timestamp: time,
            error_message: 'Unexpected status code 400 from POST http://127 ...',
            duration: 1.5,
          })),
        )
        .execute();
      // SQLite's statements run synchronously: without a turn of the event loop between batches, a
      // suite running beside this one in the process (the other database's) would wait for all of them.
      await nextTurn();
    }
  });
  return ids;
}

/** `count` due deliveries to `streamId`, written directly, one user.created event each; the worker finds them by its poll. */
export async function insertDueDeliveries(
  database: Database,
  options: { tenantId: string; streamId: string; source: string; count: number },
): Promise<string[]> {
  const at = new Date(Date.now() - 1000).toISOString();
  const ids = Array.from({ length: options.count }, () => newId.event());
  await database.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('events')
      .values(
        ids.map((id) => ({
          id,
          tenant_id: options.tenantId,
          type: 'user.created',
          time: at,
          source: options.source,
          data: JSON.stringify({ object: { id } }),
          purpose: null,
        })),
      )
      .execute();
    await trx
      .insertInto('deliveries')
      .values(
        ids.map((id) => ({
          stream_id: options.streamId,
          event_id: id,
          event_type: 'user.created',
          event_time: at,
          status: 'pending' as const,
          attempt_count: 0,
          attempt_seq: 0,
          next_attempt_at: at,
          claimed_until: null,
          updated_at: at,
        })),
      )
      .execute();
  });
  return ids;
}
