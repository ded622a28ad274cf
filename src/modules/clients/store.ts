import type { Statement } from 'better-sqlite3';
import type { Selectable } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { ClientsTable } from '../../db/schema.ts';

export type ClientRow = Selectable<ClientsTable>;

/** Every query on `clients`. */
export class ClientStore {
  private withSecretStatement: Statement<[string, string], ClientRow> | undefined;

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

  /**
   * The client with its secret's hash, for authenticating it: every token grant asks, so through a
   * cached prepared statement (better-sqlite3's, or a named PostgreSQL statement), not SQL built and
   * prepared anew per grant.
   */
  async withSecret(tenantId: string, clientId: string): Promise<ClientRow | undefined> {
    if (this.database.sqlite) {
      this.withSecretStatement ??= this.database.sqlite.prepare<[string, string], ClientRow>(
        'SELECT * FROM clients WHERE tenant_id = ? AND client_id = ?',
      );
      return this.withSecretStatement.get(tenantId, clientId);
    }
    const result = await this.database.pool!.query<ClientRow>({
      name: 'client_with_secret',
      text: 'SELECT * FROM clients WHERE tenant_id = $1 AND client_id = $2',
      values: [tenantId, clientId],
    });
    return result.rows[0];
  }
}
