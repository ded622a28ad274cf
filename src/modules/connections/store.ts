import type { Selectable } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { ConnectionsTable } from '../../db/schema.ts';

/** A connection as its services read it. */
type Connection = Pick<Selectable<ConnectionsTable>, 'id' | 'name' | 'strategy'>;

/** What a list is narrowed to: exact name, any of the strategies (an empty list matches none). */
export interface ConnectionFilter {
  name?: string;
  strategies?: readonly string[];
}

/** Every query on `connections`. */
export class ConnectionStore {
  constructor(private readonly database: Database) {}

  async byName(tenantId: string, name: string): Promise<Connection | undefined> {
    return this.database.db
      .selectFrom('connections')
      .select(['id', 'name', 'strategy'])
      .where('tenant_id', '=', tenantId)
      .where('name', '=', name)
      .executeTakeFirst();
  }

  async byId(tenantId: string, id: string): Promise<Connection | undefined> {
    return this.database.db
      .selectFrom('connections')
      .select(['id', 'name', 'strategy'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
  }

  /** Up to `limit` of the tenant's connections matching the filter, in id order: after `afterId`, or from `offset`. */
  async list(
    tenantId: string,
    filter: ConnectionFilter,
    page: { afterId?: string; offset?: number; limit: number },
  ): Promise<Connection[]> {
    let query = this.filtered(tenantId, filter).select(['id', 'name', 'strategy']);
    if (page.afterId !== undefined) query = query.where('id', '>', page.afterId);
    query = query.orderBy('id').limit(page.limit);
    if (page.offset) query = query.offset(page.offset);
    return query.execute();
  }

  async count(tenantId: string, filter: ConnectionFilter): Promise<number> {
    const row = await this.filtered(tenantId, filter)
      .select((eb) => eb.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Adds the connection unless the tenant has one of this name already (then nothing changes). */
  async insertUnlessNamed(tenantId: string, connection: Connection, createdAt: string): Promise<void> {
    await this.database.db
      .insertInto('connections')
      .values({ ...connection, tenant_id: tenantId, created_at: createdAt })
      .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing())
      .execute();
  }

  private filtered(tenantId: string, filter: ConnectionFilter) {
    let query = this.database.db.selectFrom('connections').where('tenant_id', '=', tenantId);
    if (filter.name !== undefined) query = query.where('name', '=', filter.name);
    if (filter.strategies !== undefined) {
      // `in ()` is not SQL: no strategy asked for matches nothing.
      query =
        filter.strategies.length === 0
          ? query.where((eb) => eb.lit(false))
          : query.where('strategy', 'in', [...filter.strategies]);
    }
    return query;
  }
}
