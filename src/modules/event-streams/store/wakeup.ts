import { sql } from 'kysely';
import type pg from 'pg';
import { pgDriver, type Database, type Tx } from '../../../db/database.ts';

const CHANNEL = 'tenantry_deliveries_queued';
/** After a lost LISTEN connection: the poll carries on meanwhile. */
const RECONNECT_MS = 1000;

/**
 * Wakes the delivery workers as soon as a transaction that queued deliveries commits, rather than at
 * their next poll (DELIVERY_POLL_MS), which stays as the fallback.
 *
 * PostgreSQL: NOTIFY, which the server hands out at commit (never on rollback) to the LISTEN
 * connection of every node's worker. SQLite: one process, with one connection that Kysely holds for
 * the whole of a transaction, so a worker woken from inside one gets its claim in only once it ended.
 */
export class DeliveryWakeup {
  private readonly listeners = new Set<() => void>();

  constructor(private readonly database: Database) {}

  /** Called inside the transaction that queued deliveries. */
  async queued(trx: Tx): Promise<void> {
    if (this.database.dialect === 'postgres') {
      await sql`SELECT pg_notify(${CHANNEL}, '')`.execute(trx);
      return;
    }
    for (const listener of this.listeners) listener();
  }

  /** Calls `onWake` after each commit that queued deliveries, on any node; returns the way to stop. */
  listen(onWake: () => void, onError: (error: unknown) => void): () => Promise<void> {
    if (this.database.pool) return listenToPostgres(this.database.pool.options, onWake, onError);
    this.listeners.add(onWake);
    return async () => void this.listeners.delete(onWake);
  }
}

/** A LISTEN connection of its own (a pooled one would be lent out), opened again when it is lost. */
function listenToPostgres(
  options: pg.PoolConfig,
  onWake: () => void,
  onError: (error: unknown) => void,
): () => Promise<void> {
  let closed = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  const lost = (lostClient: pg.Client) => {
    if (closed || client !== lostClient) return;
    client = undefined;
    lostClient.end().catch(() => undefined);
    retry = setTimeout(connect, RECONNECT_MS);
    retry.unref();
  };
  function connect(): void {
    const fresh = new (pgDriver().Client)(options);
    client = fresh;
    fresh.on('notification', onWake);
    fresh.on('error', (error) => {
      onError(error);
      lost(fresh);
    });
    fresh.on('end', () => lost(fresh));
    fresh
      .connect()
      .then(() => fresh.query(`LISTEN ${CHANNEL}`))
      // Deliveries queued while nobody listened.
      .then(() => onWake())
      .catch((error: unknown) => {
        if (closed) return;
        onError(error);
        lost(fresh);
      });
  }
  connect();
  return async () => {
    closed = true;
    clearTimeout(retry);
    const open = client;
    client = undefined;
    await open?.end().catch(() => undefined);
  };
}
