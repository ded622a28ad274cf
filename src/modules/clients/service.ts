import { hashSecret, secretMatches } from '../../secret-hash.ts';
import type { Database } from '../../db/database.ts';
import { now } from '../../db/database.ts';
import { newId } from '../../ids.ts';
import { isScope } from '../oauth/scopes.ts';

export interface Client {
  clientId: string;
  tenantId: string;
  name: string;
  scopes: string[];
}

export interface CreatedClient extends Client {
  /** Shown once, at creation; only its hash is stored. */
  clientSecret: string;
}

/** Machine-to-machine clients and their grants on the tenant's Management API. */
export class ClientService {
  constructor(private readonly database: Database) {}

  async create(
    tenantId: string,
    input: { name: string; scopes: readonly string[]; clientId?: string; clientSecret?: string },
  ): Promise<CreatedClient> {
    const unknown = input.scopes.filter((s) => !isScope(s));
    if (unknown.length > 0) throw new Error(`unknown scopes: ${unknown.join(', ')}`);
    const clientId = input.clientId ?? newId.clientId();
    const clientSecret = input.clientSecret ?? newId.clientSecret();
    const scopes = [...new Set(input.scopes)];
    await this.database.db
      .insertInto('clients')
      .values({
        client_id: clientId,
        tenant_id: tenantId,
        name: input.name,
        secret_hash: hashSecret(clientSecret),
        scopes: JSON.stringify(scopes),
        created_at: now(),
      })
      .execute();
    return { clientId, tenantId, name: input.name, scopes, clientSecret };
  }

  async list(tenantId: string): Promise<Client[]> {
    const rows = await this.database.db
      .selectFrom('clients')
      .select(['client_id', 'tenant_id', 'name', 'scopes'])
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at')
      .execute();
    return rows.map((r) => ({ clientId: r.client_id, tenantId: r.tenant_id, name: r.name, scopes: JSON.parse(r.scopes) }));
  }

  async get(tenantId: string, clientId: string): Promise<Client | undefined> {
    const row = await this.database.db
      .selectFrom('clients')
      .select(['client_id', 'tenant_id', 'name', 'scopes'])
      .where('tenant_id', '=', tenantId)
      .where('client_id', '=', clientId)
      .executeTakeFirst();
    return row && { clientId: row.client_id, tenantId: row.tenant_id, name: row.name, scopes: JSON.parse(row.scopes) };
  }

  /** The client when the secret is right; undefined for an unknown client or a wrong secret alike. */
  async authenticate(tenantId: string, clientId: string, secret: string): Promise<Client | undefined> {
    // No client id holds NUL, and PostgreSQL refuses the character in a query's text.
    if (clientId.includes('\0')) return undefined;
    const row = await this.database.db
      .selectFrom('clients')
      .selectAll()
      .where('tenant_id', '=', tenantId)
      .where('client_id', '=', clientId)
      .executeTakeFirst();
    if (!row) return undefined;
    if (!secretMatches(row.secret_hash, secret)) return undefined;
    return { clientId: row.client_id, tenantId: row.tenant_id, name: row.name, scopes: JSON.parse(row.scopes) };
  }
}
