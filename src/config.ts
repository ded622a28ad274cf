import path from 'node:path';

/**
 * Every environment variable the server reads, parsed and typed in one place.
 * The README's configuration table lists the same names; keep the two together.
 */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  tenantDomain: string;
  bootstrapClientId: string | undefined;
  bootstrapClientSecret: string | undefined;
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
  encryptionKey: string | undefined;
  tokenLifetimeSeconds: number;
  rateLimitSize: number;
  rateLimitPerSecond: number;
  bodyLimitBytes: number;
  logLevel: string;
}

type Env = Record<string, string | undefined>;

export class ConfigError extends Error {}

function integer(env: Env, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new ConfigError(`${name} must be an integer >= ${min}, got "${raw}"`);
  return value;
}

function text(env: Env, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw === '' ? undefined : raw;
}

export function loadConfig(env: Env = process.env): Config {
  const port = integer(env, 'PORT', 8080);
  const databaseUrl = text(env, 'DATABASE_URL');
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// URL (leave it unset for the embedded SQLite database)');
  }
  const tlsCertFile = text(env, 'TLS_CERT_FILE');
  const tlsKeyFile = text(env, 'TLS_KEY_FILE');
  if ((tlsCertFile === undefined) !== (tlsKeyFile === undefined)) {
    throw new ConfigError('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  }
  return {
    port,
    host: text(env, 'HOST') ?? '127.0.0.1',
    dataDir: path.resolve(text(env, 'DATA_DIR') ?? './data'),
    databaseUrl,
    redisUrl: text(env, 'REDIS_URL'),
    tenantDomain: (text(env, 'TENANT_DOMAIN') ?? `localhost:${port}`).toLowerCase(),
    bootstrapClientId: text(env, 'BOOTSTRAP_CLIENT_ID'),
    bootstrapClientSecret: text(env, 'BOOTSTRAP_CLIENT_SECRET'),
    tlsCertFile,
    tlsKeyFile,
    encryptionKey: text(env, 'ENCRYPTION_KEY'),
    tokenLifetimeSeconds: integer(env, 'TOKEN_LIFETIME_SECONDS', 86400, 1),
    rateLimitSize: integer(env, 'RATE_LIMIT_SIZE', 1000, 1),
    rateLimitPerSecond: integer(env, 'RATE_LIMIT_PER_SECOND', 500, 1),
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1024),
    logLevel: text(env, 'LOG_LEVEL') ?? 'info',
  };
}
