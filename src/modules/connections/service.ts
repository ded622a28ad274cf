import { now } from '../../db/database.ts';
import { newId } from '../../ids.ts';
import type { ConnectionStore } from './store.ts';

export interface Connection {
  id: string;
  name: string;
  /** `svc` for the server's own username/password database; otherwise the upstream provider's name. */
  strategy: string;
}

/** The tenant's connections: where its users' identities live. */
export class ConnectionService {
  constructor(private readonly store: ConnectionStore) {}

  async byName(tenantId: string, name: string): Promise<Connection | undefined> {
    return this.store.byName(tenantId, name);
  }

  /** Returns the named connection, creating it with the strategy given when it does not exist yet. */
  async ensure(tenantId: string, name: string, strategy: string): Promise<Connection> {
    const existing = await this.byName(tenantId, name);
    if (existing) return existing;
    const connection = { id: newId.connection(), name, strategy };
    await this.store.insertUnlessNamed(tenantId, connection, now());
    return (await this.byName(tenantId, name)) ?? connection;
  }
}
