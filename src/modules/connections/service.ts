import type { Database } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import { newId } from '../../ids.ts';

export interface Connection {
  id: string;
  name: string;
  /** `svc` for the server's own username/password database; otherwise the upstream provider's name. */
  strategy: string;
}

/** The tenant's connections: where its users' identities live. */
export class ConnectionService {
  constructor(private readonly database: Database) {}

  async byName(tenantId: string, name: string): Promise<Connection | undefined> {
    return this.database.db
      .selectFrom('connections')
      .select(['id', 'name', 'strategy'])
      .where('tenant_id', '=', tenantId)
      .where('name', '=', name)
      .executeTakeFirst();
  }

  /** Returns the named connection, creating it with the strategy given when it does not exist yet. */
  async ensure(tenantId: string, name: string, strategy: string): Promise<Connection> {
    const existing = await this.byName(tenantId, name);
    if (existing) return existing;
    const connection = { id: newId.connection(), name, strategy };
    await this.database.db
      .insertInto('connections')
      .values({ ...connection, tenant_id: tenantId, created_at: now() })
      .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing())
      .execute();
    return (await this.byName(tenantId, name)) ?? connection;
  }
}
