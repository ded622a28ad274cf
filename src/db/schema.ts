/**
 * Row types of every table, declared once; Kysely derives query types from them.
 * Timestamps are ISO-8601 UTC strings and JSON members are text, so one code path runs unchanged
 * on SQLite and PostgreSQL (ISO strings sort in time order in both).
 */
export interface TenantsTable {
  id: string;
  domain: string;
  created_at: string;
}

export interface SigningKeysTable {
  kid: string;
  tenant_id: string;
  /** PKCS#8 PEM sealed with the SecretBox. */
  private_key: string;
  public_jwk: string;
  /** 'current' signs new tokens; 'previous' still verifies them; 'revoked' is gone from JWKS. */
  status: 'current' | 'previous' | 'revoked';
  created_at: string;
}

export interface ClientsTable {
  client_id: string;
  tenant_id: string;
  name: string;
  /** SHA-256 of the secret: secrets are 384-bit random, so a slow password hash adds nothing. */
  secret_hash: string;
  /** JSON array of the scopes granted for the tenant's Management API audience. */
  scopes: string;
  created_at: string;
}

export interface ConnectionsTable {
  id: string;
  tenant_id: string;
  name: string;
  strategy: string;
  created_at: string;
}

export interface UsersTable {
  tenant_id: string;
  user_id: string;
  connection: string;
  email: string | null;
  /** The user object as the API returns it, without identity-provider tokens. */
  document: string;
  /** JSON array, one entry per identity, of {access_token, access_token_secret, refresh_token}; null when none. */
  idp_tokens: string | null;
  password_hash: string | null;
  created_at: string;
  updated_at: string;
}

export interface Schema {
  tenants: TenantsTable;
  signing_keys: SigningKeysTable;
  clients: ClientsTable;
  connections: ConnectionsTable;
  users: UsersTable;
}
