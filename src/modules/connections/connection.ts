/** A connection as the API returns it, before `fields` projection. */
export interface ConnectionRecord {
  id: string;
  name: string;
  strategy: string;
  options: Record<string, unknown>;
  realms: string[];
  is_domain_connection: boolean;
}

/** The server's own username/password strategy; `auth0` is the original's word for it. */
export const OWN_STRATEGY = 'svc';
const OWN_STRATEGY_ALIASES: ReadonlySet<string> = new Set([OWN_STRATEGY, 'auth0']);

/**
 * The original's members for a connection. No options are stored (a database connection's password
 * policy and the like are the server's own), and no connection is promoted to domain level; the realm
 * is the connection's name, as the original's when none was given.
 */
export function present(connection: { id: string; name: string; strategy: string }): ConnectionRecord {
  return {
    id: connection.id,
    options: {},
    strategy: connection.strategy,
    name: connection.name,
    is_domain_connection: false,
    realms: [connection.name],
  };
}

/** The stored strategies a `strategy` filter asks for: `auth0` finds the server's own connections. */
export function storedStrategies(wanted: readonly string[]): string[] {
  return [...new Set(wanted.map((s) => (OWN_STRATEGY_ALIASES.has(s) ? OWN_STRATEGY : s)))];
}
