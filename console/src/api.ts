// The console's only way to the server: the public Management API, with the bearer token of the client
// that signed in. The token lives in this module's memory: it is gone when the tab closes or reloads.

/** A refusal of the API: its status, and its error body's message and errorCode. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errorCode?: string,
  ) {
    super(message);
  }
}

export interface Session {
  clientId: string;
  token: string;
  scopes: ReadonlySet<string>;
  expiresAt: number;
}

let session: Session | undefined;
let onExpired: (() => void) | undefined;

export const currentSession = (): Session | undefined => session;

export function whenSessionEnds(callback: () => void): void {
  onExpired = callback;
}

/** True when the signed-in client holds any of `scopes`: what decides which views and actions show. */
export function can(...scopes: string[]): boolean {
  return session !== undefined && scopes.some((scope) => session!.scopes.has(scope));
}

async function failure(response: Response): Promise<ApiFailure> {
  let message = `${response.status} ${response.statusText}`;
  let errorCode: string | undefined;
  try {
    const body = (await response.json()) as { message?: string; error_description?: string; errorCode?: string };
    message = body.message ?? body.error_description ?? message;
    errorCode = body.errorCode;
  } catch {
    // Not JSON: the status line says enough.
  }
  return new ApiFailure(response.status, message, errorCode);
}

/**
 * The Management API's audience on this host: `https://<domain>/api/v2/` for the tenant's domain as the
 * server names it (with the port when it was configured with one), read from its discovery document.
 */
async function audience(): Promise<string> {
  const response = await fetch('/.well-known/openid-configuration', { credentials: 'omit' });
  if (!response.ok) throw await failure(response);
  const { issuer } = (await response.json()) as { issuer: string };
  return `${issuer.replace(/\/$/, '')}/api/v2/`;
}

/** POST /oauth/token (client credentials) for the Management API of the host serving the console. */
export async function signIn(clientId: string, clientSecret: string): Promise<Session> {
  const response = await fetch('/oauth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
      audience: await audience(),
    }),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (!response.ok) throw await failure(response);
  const body = (await response.json()) as { access_token: string; scope?: string; expires_in: number };
  session = {
    clientId,
    token: body.access_token,
    scopes: new Set((body.scope ?? '').split(' ').filter(Boolean)),
    expiresAt: Date.now() + body.expires_in * 1000,
  };
  return session;
}

export function signOut(): void {
  session = undefined;
}

type Query = Record<string, string | number | undefined>;

/** One Management API call; a 401 (token expired or revoked) ends the session. */
export async function api<T>(
  method: string,
  path: string,
  options: { query?: Query; body?: unknown; headers?: Record<string, string> } = {},
): Promise<T> {
  if (!session) throw new ApiFailure(401, 'Not signed in');
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(options.query ?? {}))
    if (value !== undefined && value !== '') url.searchParams.set(name, String(value));
  const response = await fetch(url, {
    method,
    headers: {
      ...options.headers,
      authorization: `Bearer ${session.token}`,
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: options.body === undefined ? null : JSON.stringify(options.body),
    credentials: 'omit',
    cache: 'no-store',
  });
  if (response.status === 401) {
    session = undefined;
    onExpired?.();
  }
  if (!response.ok) throw await failure(response);
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}
