import type { Selectable } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { ConnectionsTable } from '../../db/schema.ts';

/** A connection as its services read it. */
type Connection = Pick<Selectable<ConnectionsTable>, 'id' | 'name' | 'strategy'>;

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

  /** Adds the connection unless the tenant has one of this name already (then nothing changes). */
  async insertUnlessNamed(tenantId: string, connection: Connection, createdAt: string): Promise<void> {
    await this.database.db
      .insertInto('connections')
      .values({ ...connection, tenant_id: tenantId, created_at: createdAt })
      .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing())
      .execute();
  }
}
