import type { Selectable } from 'kysely';
import type { Database, Tx } from '../../../db/database.ts';
import { uniqueOr } from '../../../db/database.ts';
import type { EventStreamsTable } from '../../../db/schema.ts';
import { eventStreamErrors } from '../../../http/errors.ts';

/** A stream's status as the API knows it: a stream being deleted is no stream at all. */
export type LiveStatus = Exclude<EventStreamsTable['status'], 'deleting'>;

/** A stored stream: its destination as the API shows it, its sealed secrets, and its run of failures. */
export type StreamRow = Omit<Selectable<EventStreamsTable>, 'status'> & { status: LiveStatus };

/**
 * Every read and write here leaves out streams being deleted (see deletions.ts): from the moment the
 * DELETE commits they are gone from the API, the count toward the tenant's limit and the CLI.
 */
const DELETING = 'deleting';

/** Where a read runs: inside `trx` when given, and with `lock` holding the row until it ends (PostgreSQL). */
export interface StreamRead {
  trx?: Tx;
  lock?: boolean;
}

/** Every query on `event_streams` but the delivery worker's (see claim.ts and outcomes.ts). */
export class StreamStore {
  constructor(private readonly database: Database) {}

  /** A name the tenant's streams already use: the original's 409. */
  async insert(row: StreamRow, trx?: Tx): Promise<void> {
    await uniqueOr(
      (trx ?? this.database.db).insertInto('event_streams').values(row).execute(),
      eventStreamErrors.nameTaken,
    );
  }

  /** How many streams the tenant has. */
  async count(trx: Tx, tenantId: string): Promise<number> {
    const row = await trx
      .selectFrom('event_streams')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('tenant_id', '=', tenantId)
      .where('status', '!=', DELETING)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /**
   * SQLite needs no lock: a transaction there holds the whole database. PostgreSQL: FOR NO KEY UPDATE,
   * as nothing that locks a stream changes its id; FOR UPDATE would also hold off the KEY SHARE lock the
   * foreign keys to the stream take, and with it the recording of every node's attempts of the stream
   * (a new minute's count row) for as long as, say, a redelivery of a million takes.
   */
  find(tenantId: string, id: string, { trx, lock = false }: StreamRead = {}): Promise<StreamRow | undefined> {
    return (trx ?? this.database.db)
      .selectFrom('event_streams')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .where('status', '!=', DELETING)
      .$narrowType<{ status: LiveStatus }>()
      .$if(lock && this.database.dialect === 'postgres', (q) => q.forNoKeyUpdate())
      .executeTakeFirst();
  }

  /** The tenant's streams in id order, after `afterId` when given, `limit` at most. */
  page(tenantId: string, afterId: string | undefined, limit: number): Promise<StreamRow[]> {
    let query = this.database.db
      .selectFrom('event_streams')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('status', '!=', DELETING)
      .$narrowType<{ status: LiveStatus }>();
    if (afterId !== undefined) query = query.where('id', '>', afterId);
    return query.orderBy('id').limit(limit).execute();
  }

  /** Writes what a PATCH may change; a name the tenant's streams already use: the original's 409. */
  async update(trx: Tx, changed: StreamRow): Promise<void> {
    const update = trx
      .updateTable('event_streams')
      .set({
        name: changed.name,
        status: changed.status,
        subscriptions: changed.subscriptions,
        destination: changed.destination,
        secret: changed.secret,
        updated_at: changed.updated_at,
        consecutive_failures: changed.consecutive_failures,
        circuit_open_until: changed.circuit_open_until,
        status_reason: changed.status_reason,
      })
      .where('tenant_id', '=', changed.tenant_id)
      .where('id', '=', changed.id)
      .where('status', '!=', DELETING)
      .execute();
    await uniqueOr(update, eventStreamErrors.nameTaken);
  }

  /**
   * Marks the stream deleted, in one statement: no read shows it from then on, its name is free, the
   * outbox and the delivery worker pass it by (both take enabled streams only), and its sealed secrets,
   * which nothing will use again, are dropped at once. Its rows are removed later, in chunks (deletions.ts),
   * due from `at`. False when there was no such stream (or it was being deleted already).
   */
  async markDeleting(tenantId: string, id: string, at: string): Promise<boolean> {
    const marked = await this.database.db
      .updateTable('event_streams')
      .set({
        status: DELETING,
        name: null,
        secret: null,
        signing_secrets: null,
        updated_at: at,
        deletion_next_at: at,
        deletion_claimed_until: null,
      })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .where('status', '!=', DELETING)
      .executeTakeFirst();
    return marked.numUpdatedRows !== 0n;
  }

  async setSigningSecrets(trx: Tx, tenantId: string, id: string, sealed: string | null): Promise<void> {
    await trx
      .updateTable('event_streams')
      .set({ signing_secrets: sealed })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .where('status', '!=', DELETING)
      .execute();
  }

  /** False when there is no such stream. */
  async clearSigningSecrets(tenantId: string, id: string): Promise<boolean> {
    const updated = await this.database.db
      .updateTable('event_streams')
      .set({ signing_secrets: null })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .where('status', '!=', DELETING)
      .executeTakeFirst();
    return updated.numUpdatedRows !== 0n;
  }

  /** The tenant's enabled streams and what they subscribe to (JSON): where its events go; in `trx` when given. */
  subscribers(trx: Tx | undefined, tenantId: string): Promise<Array<Pick<StreamRow, 'id' | 'subscriptions'>>> {
    return (trx ?? this.database.db)
      .selectFrom('event_streams')
      .select(['id', 'subscriptions'])
      .where('tenant_id', '=', tenantId)
      .where('status', '=', 'enabled')
      .execute();
  }

  /** Whether the stream exists, on the tenant when one is given. */
  async exists(id: string, tenantId?: string): Promise<boolean> {
    const stream = await this.database.db
      .selectFrom('event_streams')
      .select('id')
      .where('id', '=', id)
      .where('status', '!=', DELETING)
      .$if(tenantId !== undefined, (q) => q.where('tenant_id', '=', tenantId!))
      .executeTakeFirst();
    return stream !== undefined;
  }
}
