import { isIP } from 'node:net';
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
  /** Event delivery: the outbox worker runs unless DELIVERY_WORKER=false. */
  deliveryWorker: boolean;
  /** Development only: webhook endpoints may be http:// and loopback. */
  deliveryAllowHttp: boolean;
  deliveryTimeoutMs: number;
  /** Delays before the retries of a failed attempt; attempts = retries + 1. */
  deliveryRetryScheduleMs: number[];
  deliveryPollMs: number;
  deliveryLeaseMs: number;
  deliveryConcurrency: number;
  deliveryPerStreamConcurrency: number;
  /** Suffix of the CNAME targets handed out for svc-managed custom domains. */
  customDomainEdgeDomain: string;
  /** Most custom domains one tenant may have. */
  customDomainsMax: number;
  /** Resolvers asked when verifying custom domains (`ip` or `ip:port`); empty: the system's. */
  dnsServers: string[];
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

/** `DNS_SERVERS`: a comma list of `ip`, `ip:port` or `[ipv6]:port`. */
function dnsServers(raw: string | undefined): string[] {
  if (raw === undefined) return [];
  const servers = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
  for (const server of servers) {
    const match = /^(?:\[([^\]]+)\]|([^:]+)|([0-9a-fA-F:]+))(?::(\d{1,5}))?$/.exec(server);
    const ip = match?.[1] ?? match?.[2] ?? match?.[3];
    const port = match?.[4] === undefined ? 53 : Number(match[4]);
    if (!ip || isIP(ip) === 0 || port < 1 || port > 65535) throw new ConfigError(`DNS_SERVERS entry "${server}" must be ip or ip:port`);
  }
  return servers;
}

function flag(env: Env, name: string, fallback: boolean): boolean {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function integerList(env: Env, name: string, fallback: number[]): number[] {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  const values = raw.split(',').map((v) => Number(v.trim()));
  if (values.some((v) => !Number.isInteger(v) || v < 0)) throw new ConfigError(`${name} must be a comma-separated list of integers >= 0, got "${raw}"`);
  return values;
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
    deliveryWorker: flag(env, 'DELIVERY_WORKER', true),
    deliveryAllowHttp: flag(env, 'DELIVERY_ALLOW_HTTP', false),
    deliveryTimeoutMs: integer(env, 'DELIVERY_TIMEOUT_MS', 10000, 1),
    deliveryRetryScheduleMs: integerList(env, 'DELIVERY_RETRY_SCHEDULE_MS', [1000, 2000, 4000]),
    deliveryPollMs: integer(env, 'DELIVERY_POLL_MS', 250, 1),
    deliveryLeaseMs: integer(env, 'DELIVERY_LEASE_MS', 60000, 1),
    deliveryConcurrency: integer(env, 'DELIVERY_CONCURRENCY', 32, 1),
    deliveryPerStreamConcurrency: integer(env, 'DELIVERY_PER_STREAM_CONCURRENCY', 4, 1),
    customDomainEdgeDomain: (text(env, 'CUSTOM_DOMAIN_EDGE_DOMAIN') ?? 'edge.tenantry.local').toLowerCase(),
    customDomainsMax: integer(env, 'CUSTOM_DOMAINS_MAX', 20, 0),
    dnsServers: dnsServers(text(env, 'DNS_SERVERS')),
  };
}
