import type { Selectable } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { ClientsTable } from '../../db/schema.ts';

export type ClientRow = Selectable<ClientsTable>;

/** Every query on `clients`. */
export class ClientStore {
  constructor(private readonly database: Database) {}

  async insert(row: ClientRow): Promise<void> {
    await this.database.db.insertInto('clients').values(row).execute();
  }

  async list(tenantId: string): Promise<Array<Omit<ClientRow, 'secret_hash' | 'created_at'>>> {
    return this.database.db
      .selectFrom('clients')
      .select(['client_id', 'tenant_id', 'name', 'scopes'])
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at')
      .execute();
  }

  async get(tenantId: string, clientId: string): Promise<Omit<ClientRow, 'secret_hash' | 'created_at'> | undefined> {
    return this.database.db
      .selectFrom('clients')
      .select(['client_id', 'tenant_id', 'name', 'scopes'])
      .where('tenant_id', '=', tenantId)
      .where('client_id', '=', clientId)
      .executeTakeFirst();
  }

  /** The client with its secret's hash, for authenticating it. */
  async withSecret(tenantId: string, clientId: string): Promise<ClientRow | undefined> {
    return this.database.db
      .selectFrom('clients')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('client_id', '=', clientId)
      .executeTakeFirst();
  }
}
