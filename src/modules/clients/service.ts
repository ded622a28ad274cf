import { BoundedCache } from '../../bounded-cache.ts';
import { hashSecret, secretMatches } from '../../secret-hash.ts';
import { now } from '../../db/database.ts';
import { newId } from '../../ids.ts';
import { isScope } from '../oauth/scopes.ts';
import type { ClientRow, ClientStore } from './store.ts';

export interface Client {
  clientId: string;
  tenantId: string;
  name: string;
  /** Shared by every read of the client while its stored list is the same (see scopesOf): never changed in place. */
  scopes: readonly string[];
}

export interface CreatedClient extends Client {
  /** Shown once, at creation; only its hash is stored. */
  clientSecret: string;
}

/**
 * Each client's scope list as last parsed, with the stored JSON text it came from. A grant reads its
 * client's row every time, so a changed or deleted client counts at once; but an admin client's list is
 * 6 KB of JSON, and parsing it took a tenth of a grant's own CPU (`npm run bench -- token-grants`).
 * Parsed once per client and text, frozen. Keyed by the client, its text only compared: keyed by the
 * text itself, every grant hashed the 6 KB string read from the row anew (7 µs in isolation, against
 * 0.2 µs for the comparison; within token-grants' spread of about ±5 µs a grant).
 */
const parsedScopes = new BoundedCache<{ text: string; scopes: readonly string[] }>({
  entries: 1000,
  bytes: 8 * 1024 * 1024,
});

function scopesOf(row: Pick<ClientRow, 'client_id' | 'tenant_id' | 'scopes'>): readonly string[] {
  const key = `${row.tenant_id} ${row.client_id}`;
  const cached = parsedScopes.get(key);
  if (cached?.text === row.scopes) return cached.scopes;
  const scopes = Object.freeze(JSON.parse(row.scopes) as string[]);
  parsedScopes.set(key, { text: row.scopes, scopes }, (key.length + row.scopes.length) * 2);
  return scopes;
}

const clientOf = (row: Pick<ClientRow, 'client_id' | 'tenant_id' | 'name' | 'scopes'>): Client => ({
  clientId: row.client_id,
  tenantId: row.tenant_id,
  name: row.name,
  scopes: scopesOf(row),
});

/** Machine-to-machine clients and their grants on the tenant's Management API. */
export class ClientService {
  constructor(private readonly store: ClientStore) {}

  async create(
    tenantId: string,
    input: { name: string; scopes: readonly string[]; clientId?: string; clientSecret?: string },
  ): Promise<CreatedClient> {
    const unknown = input.scopes.filter((s) => !isScope(s));
    if (unknown.length > 0) throw new Error(`unknown scopes: ${unknown.join(', ')}`);
    const clientId = input.clientId ?? newId.clientId();
    const clientSecret = input.clientSecret ?? newId.clientSecret();
    const scopes = [...new Set(input.scopes)];
    await this.store.insert({
      client_id: clientId,
      tenant_id: tenantId,
      name: input.name,
      secret_hash: hashSecret(clientSecret),
      scopes: JSON.stringify(scopes),
      created_at: now(),
    });
    return { clientId, tenantId, name: input.name, scopes, clientSecret };
  }

  async list(tenantId: string): Promise<Client[]> {
    return (await this.store.list(tenantId)).map(clientOf);
  }

  async get(tenantId: string, clientId: string): Promise<Client | undefined> {
    const row = await this.store.get(tenantId, clientId);
    return row && clientOf(row);
  }

  /** The client when the secret is right; undefined for an unknown client or a wrong secret alike. */
  async authenticate(tenantId: string, clientId: string, secret: string): Promise<Client | undefined> {
    // No client id holds NUL, and PostgreSQL refuses the character in a query's text.
    if (clientId.includes('\0')) return undefined;
    const row = await this.store.withSecret(tenantId, clientId);
    if (!row) return undefined;
    if (!secretMatches(row.secret_hash, secret)) return undefined;
    return clientOf(row);
  }
}
