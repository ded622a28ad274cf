import { isIP } from 'node:net';
import path from 'node:path';
import { allowListEntryError } from './modules/event-streams/delivery/endpoint-guard.ts';
import { certificateAuthorityFiles } from './tls/dev-ca-files.ts';

/**
 * Every environment variable the server reads, parsed and typed in one place.
 * The README's configuration table lists the same names; keep the two together.
 */
export interface Config {
  port: number;
  host: string;
  /**
   * Where `/metrics` (Prometheus) and `/health/ready` are served, on HOST, apart from the API; unset:
   * no metrics are kept and nothing more listens. 0: a port the system chooses (tests).
   */
  metricsPort: number | undefined;
  dataDir: string;
  databaseUrl: string | undefined;
  /**
   * SQLite's `synchronous` in WAL mode. `full`: a commit is on disk before it is acknowledged, so it
   * survives power loss. `normal`: faster, and safe against a crash of the process, but the last
   * commits before a power loss or OS crash may be lost.
   */
  sqliteSynchronous: 'full' | 'normal';
  /** The embedded database in memory only (SQLITE_MEMORY): nothing survives the process; for tests. */
  sqliteMemory: boolean;
  /** Development only: POST /_tenantry/reset, /snapshot and /restore, for test suites in any language. */
  devEndpoints: boolean;
  /** The bearer token those endpoints require (TENANTRY_OPERATOR_TOKEN, at least 32 characters). */
  operatorToken: string | undefined;
  redisUrl: string | undefined;
  tenantDomain: string;
  bootstrapClientId: string | undefined;
  bootstrapClientSecret: string | undefined;
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
  /** Who issues the certificates of ready svc-managed custom domains served over HTTPS; none: the default certificate. */
  customDomainCertSource: 'dev-ca' | 'none';
  /** The development CA the dev-ca source signs with (PEM files, as `tenantry dev-cert` writes them). */
  devCaCertFile: string;
  devCaKeyFile: string;
  /** How long a node serves a custom domain's certificate from memory before looking for a newer one. */
  customDomainCertRefreshMs: number;
  encryptionKey: string | undefined;
  tokenLifetimeSeconds: number;
  rateLimitSize: number;
  rateLimitPerSecond: number;
  /**
   * What the rate limits decide while REDIS_URL's Redis cannot: `allow` every request, `deny` every
   * request (429), or count in each node's `local` memory. The outage is logged when it starts and ends.
   */
  rateLimitRedisFailure: 'allow' | 'deny' | 'local';
  /** Requests without a valid token draw on a bucket per client address, never on the tenant's. */
  anonymousRateLimitSize: number;
  anonymousRateLimitPerSecond: number;
  /** Failed client authentications at /oauth/token allowed per minute, per client id and address. */
  tokenFailuresPerClientPerMinute: number;
  /** Failed client authentications at /oauth/token allowed per minute from one address to one tenant, whatever the client id. */
  tokenFailuresPerAddressPerMinute: number;
  /** Which proxies' X-Forwarded-For is believed for the client address (Fastify's trustProxy); false: none. */
  trustProxy: boolean | number | string;
  bodyLimitBytes: number;
  /** A connection whose response makes no progress this long (its client stopped reading) is closed. */
  responseStallTimeoutMs: number;
  /** A request must have arrived whole (headers and body) this long after it began; else 408 (requestTimeouts). */
  requestTimeoutMs: number;
  /** Largest users file POST /jobs/users-imports accepts (it streams to the database, not to memory). */
  usersImportMaxBytes: number;
  /** How long a node holds a users-import job between two batches; after a crash another node resumes it then. */
  usersImportLeaseMs: number;
  logLevel: string;
  /** Event delivery: the outbox worker runs unless DELIVERY_WORKER=false. */
  deliveryWorker: boolean;
  /** Development only: webhook endpoints may be http:// and at any address (loopback, private networks). */
  deliveryAllowHttp: boolean;
  /** Hostnames, `*.domain`s, IPs and CIDRs webhooks may reach although they are not public addresses. */
  deliveryAllowedHosts: string[];
  deliveryTimeoutMs: number;
  /** Delays before the retries of a failed attempt; attempts = retries + 1. */
  deliveryRetryScheduleMs: number[];
  /** Longest wait an endpoint's Retry-After can ask for before a retry (a shorter schedule step is waited out anyway). */
  deliveryRetryAfterMaxMs: number;
  /** The worker's fallback poll: commits that queue deliveries, and retries falling due, wake it sooner. */
  deliveryPollMs: number;
  /** How long a claimed delivery is reserved; always longer than deliveryTimeoutMs. */
  deliveryLeaseMs: number;
  deliveryConcurrency: number;
  deliveryPerStreamConcurrency: number;
  /** Consecutive failed attempts that open a stream's circuit (its deliveries wait, then one probe goes). */
  deliveryBreakerFailures: number;
  /** The first wait of an open circuit; it doubles with each failed probe, up to 64 times. */
  deliveryBreakerCooldownMs: number;
  /** Consecutive failed attempts that disable a stream; 0: never. */
  deliveryDisableAfterFailures: number;
  /** Suffix of the CNAME targets handed out for svc-managed custom domains. */
  customDomainEdgeDomain: string;
  /** Most custom domains one tenant may have. */
  customDomainsMax: number;
  /** Most event streams one tenant may have: each is a POST per event it subscribes to, queued with every user write. */
  eventStreamsMax: number;
  /** Most rows one transaction of a deleted stream's background removal deletes (its per-minute counts, attempts, deliveries); at most 100,000. */
  eventStreamDeletionChunkRows: number;
  /** Most failed deliveries one step of a redelivery walks (the request's, then each background chunk's): 2,000 on SQLite, 10,000 on PostgreSQL unless set. */
  eventStreamRedeliveryChunkRows: number;
  /** Lanes (event id ranges of as many failed deliveries each) a redelivery's background walk is cut into, and that a node works on at once: 2 on PostgreSQL, 1 on SQLite unless set; at most 4. */
  eventStreamRedeliveryLanes: number;
  /** How long after creation a pending custom domain is re-checked in the background before it is failed. */
  customDomainVerifyWindowSeconds: number;
  /** Delay before the first background re-check; each further one waits twice as long, up to the cap. */
  customDomainRecheckInitialMs: number;
  customDomainRecheckMaxMs: number;
  /** Resolvers asked when verifying custom domains and resolving webhook endpoints (`ip` or `ip:port`); empty: the system's. */
  dnsServers: string[];
  /** smtp:// or smtps:// URL of the mail server; unset: emails go to the development mailbox in DATA_DIR. */
  smtpUrl: string | undefined;
  /** From address of emails whose template names none; unset: no-reply@<the email's domain>. */
  mailFrom: string | undefined;
  /** The mail outbox worker runs unless MAIL_WORKER=false. */
  mailWorker: boolean;
  /** Longest wait for the mail server at each step of one send (connect, greeting, each reply). */
  mailTimeoutMs: number;
  /** Delays before the retries of an email the mail server refused for now; attempts = retries + 1. */
  mailRetryScheduleMs: number[];
  mailPollMs: number;
  /** How long a claimed email is reserved; always longer than mailTimeoutMs. */
  mailLeaseMs: number;
  /** Emails in flight per node. */
  mailConcurrency: number;
  /** Threads email templates render on, off the event loop. */
  templateRenderThreads: number;
  /** Wall-clock limit of one template render; over it the render's thread is terminated. */
  templateRenderTimeoutMs: number;
  /** A render thread idle this long is ended; the next render starts one. */
  templateRenderIdleMs: number;
}

type Env = Record<string, string | undefined>;

export class ConfigError extends Error {}

/**
 * Digits only (`1e20` and `0x10` are numbers to `Number`, not settings anyone meant), at least `min`, and
 * at most `max`: past it a setting stops meaning what it says (a chunk of 10^20 rows is no chunk).
 */
function integer(env: Env, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value < min || value > max)
    throw new ConfigError(
      `${name} must be an integer >= ${min}${max === Number.MAX_SAFE_INTEGER ? '' : ` and <= ${max}`}, got "${raw}"`,
    );
  return value;
}

function redisFailure(env: Env): Config['rateLimitRedisFailure'] {
  const value = text(env, 'RATE_LIMIT_REDIS_FAILURE') ?? 'allow';
  if (value !== 'allow' && value !== 'deny' && value !== 'local') {
    throw new ConfigError(`RATE_LIMIT_REDIS_FAILURE must be allow, deny or local, got "${value}"`);
  }
  return value;
}

function text(env: Env, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw === '' ? undefined : raw;
}

/** `DNS_SERVERS`: a comma list of `ip`, `ip:port` or `[ipv6]:port`. */
function dnsServers(raw: string | undefined): string[] {
  if (raw === undefined) return [];
  const servers = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const server of servers) {
    const match = /^(?:\[([^\]]+)\]|([^:]+)|([0-9a-fA-F:]+))(?::(\d{1,5}))?$/.exec(server);
    const ip = match?.[1] ?? match?.[2] ?? match?.[3];
    const port = match?.[4] === undefined ? 53 : Number(match[4]);
    if (!ip || isIP(ip) === 0 || port < 1 || port > 65535)
      throw new ConfigError(`DNS_SERVERS entry "${server}" must be ip or ip:port`);
  }
  return servers;
}

/** `DELIVERY_ALLOWED_HOSTS`: a comma list of hostnames, `*.domain`s, IP addresses and CIDRs. */
function allowedHosts(raw: string | undefined): string[] {
  if (raw === undefined) return [];
  const entries = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const entry of entries) {
    const error = allowListEntryError(entry);
    if (error !== undefined) throw new ConfigError(`DELIVERY_ALLOWED_HOSTS: ${error}`);
  }
  return entries;
}

/** `TRUST_PROXY`: unset or false, true (any proxy), a hop count, or a comma list of proxy addresses and CIDRs. */
function trustProxy(raw: string | undefined): boolean | number | string {
  if (raw === undefined || raw === 'false' || raw === '0') return false;
  if (raw === 'true') return true;
  if (/^\d+$/.test(raw)) return Number(raw);
  const entries = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const entry of entries) {
    const [address, bits, extra] = entry.split('/');
    const family = isIP(address ?? '');
    const maxBits = family === 6 ? 128 : 32;
    if (
      family === 0 ||
      extra !== undefined ||
      (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= maxBits))
    ) {
      throw new ConfigError(
        `TRUST_PROXY entry "${entry}" must be an IP address or CIDR (or set TRUST_PROXY to true, false or a hop count)`,
      );
    }
  }
  return entries.join(',');
}

/** The bootstrap admin client holds every scope: a short secret could be guessed. */
const MIN_BOOTSTRAP_SECRET_LENGTH = 32;

function bootstrapSecret(env: Env): string | undefined {
  const secret = text(env, 'BOOTSTRAP_CLIENT_SECRET');
  if (secret !== undefined && secret.length < MIN_BOOTSTRAP_SECRET_LENGTH) {
    throw new ConfigError(
      `BOOTSTRAP_CLIENT_SECRET must be at least ${MIN_BOOTSTRAP_SECRET_LENGTH} characters (it has ${secret.length}); ` +
        'leave it unset to have a strong one generated',
    );
  }
  return secret;
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
  if (values.some((v) => !Number.isInteger(v) || v < 0))
    throw new ConfigError(`${name} must be a comma-separated list of integers >= 0, got "${raw}"`);
  return values;
}

type MailConfig = Pick<
  Config,
  | 'smtpUrl'
  | 'mailFrom'
  | 'mailWorker'
  | 'mailTimeoutMs'
  | 'mailRetryScheduleMs'
  | 'mailPollMs'
  | 'mailLeaseMs'
  | 'mailConcurrency'
>;

function mailSettings(env: Env): MailConfig {
  const smtpUrl = text(env, 'SMTP_URL');
  // The URL may hold a password: messages name the variable, never its value.
  if (smtpUrl !== undefined && !/^smtps?:\/\/[^/]/.test(smtpUrl))
    throw new ConfigError('SMTP_URL must be an smtp:// or smtps:// URL');
  const mailTimeoutMs = integer(env, 'MAIL_TIMEOUT_MS', 30000, 1);
  const mailLeaseMs = integer(env, 'MAIL_LEASE_MS', 120000, 1);
  // A lease that runs out while its send is still running lets another worker send the same email again.
  if (mailLeaseMs <= mailTimeoutMs * 3) {
    throw new ConfigError(
      `MAIL_LEASE_MS (${mailLeaseMs}) must be greater than three times MAIL_TIMEOUT_MS (${mailTimeoutMs})`,
    );
  }
  return {
    smtpUrl,
    mailFrom: text(env, 'MAIL_FROM'),
    mailWorker: flag(env, 'MAIL_WORKER', true),
    mailTimeoutMs,
    mailRetryScheduleMs: integerList(env, 'MAIL_RETRY_SCHEDULE_MS', [30000, 120000, 600000, 1800000, 3600000, 7200000]),
    mailPollMs: integer(env, 'MAIL_POLL_MS', 500, 1),
    mailLeaseMs,
    mailConcurrency: integer(env, 'MAIL_CONCURRENCY', 4, 1),
  };
}

export function loadConfig(env: Env = process.env): Config {
  const port = integer(env, 'PORT', 8080);
  const databaseUrl = text(env, 'DATABASE_URL');
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// URL (leave it unset for the embedded SQLite database)');
  }
  const sqliteSynchronous = text(env, 'SQLITE_SYNCHRONOUS') ?? 'full';
  if (sqliteSynchronous !== 'full' && sqliteSynchronous !== 'normal') {
    throw new ConfigError(`SQLITE_SYNCHRONOUS must be full or normal, got "${sqliteSynchronous}"`);
  }
  const tlsCertFile = text(env, 'TLS_CERT_FILE');
  const tlsKeyFile = text(env, 'TLS_KEY_FILE');
  if ((tlsCertFile === undefined) !== (tlsKeyFile === undefined)) {
    throw new ConfigError('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  }
  const dataDir = path.resolve(text(env, 'DATA_DIR') ?? './data');
  const certSource = text(env, 'CUSTOM_DOMAIN_CERT_SOURCE') ?? 'none';
  if (certSource !== 'dev-ca' && certSource !== 'none') {
    throw new ConfigError(`CUSTOM_DOMAIN_CERT_SOURCE must be dev-ca or none, got "${certSource}"`);
  }
  const devCaCertFile = text(env, 'DEV_CA_CERT_FILE');
  const devCaKeyFile = text(env, 'DEV_CA_KEY_FILE');
  if ((devCaCertFile === undefined) !== (devCaKeyFile === undefined)) {
    throw new ConfigError('DEV_CA_CERT_FILE and DEV_CA_KEY_FILE must be set together');
  }
  const deliveryTimeoutMs = integer(env, 'DELIVERY_TIMEOUT_MS', 10000, 1);
  const deliveryLeaseMs = integer(env, 'DELIVERY_LEASE_MS', 60000, 1);
  // A lease that runs out while its send is still running lets another worker claim the delivery and
  // send the same event again at the same time.
  if (deliveryLeaseMs <= deliveryTimeoutMs) {
    throw new ConfigError(
      `DELIVERY_LEASE_MS (${deliveryLeaseMs}) must be greater than DELIVERY_TIMEOUT_MS (${deliveryTimeoutMs})`,
    );
  }
  const devEndpoints = flag(env, 'TENANTRY_DEV_ENDPOINTS', false);
  const operatorToken = text(env, 'TENANTRY_OPERATOR_TOKEN');
  // The endpoints throw the whole database away: never open without a token that cannot be guessed.
  if (devEndpoints && (operatorToken === undefined || operatorToken.length < 32))
    throw new ConfigError('TENANTRY_DEV_ENDPOINTS=true needs TENANTRY_OPERATOR_TOKEN of at least 32 characters');
  const metricsPort = text(env, 'METRICS_PORT') === undefined ? undefined : integer(env, 'METRICS_PORT', 0);
  if (metricsPort !== undefined && (metricsPort > 65535 || (metricsPort === port && port !== 0))) {
    throw new ConfigError(`METRICS_PORT must be a TCP port other than PORT (${port}), got "${metricsPort}"`);
  }
  return {
    port,
    host: text(env, 'HOST') ?? '127.0.0.1',
    metricsPort,
    dataDir,
    databaseUrl,
    sqliteSynchronous,
    sqliteMemory: flag(env, 'SQLITE_MEMORY', false) && databaseUrl === undefined,
    devEndpoints,
    operatorToken,
    redisUrl: text(env, 'REDIS_URL'),
    tenantDomain: (text(env, 'TENANT_DOMAIN') ?? `localhost:${port}`).toLowerCase(),
    bootstrapClientId: text(env, 'BOOTSTRAP_CLIENT_ID'),
    bootstrapClientSecret: bootstrapSecret(env),
    tlsCertFile,
    tlsKeyFile,
    customDomainCertSource: certSource,
    // The files `tenantry dev-cert` writes when not told otherwise.
    devCaCertFile: path.resolve(devCaCertFile ?? certificateAuthorityFiles(path.join(dataDir, 'tls')).certFile),
    devCaKeyFile: path.resolve(devCaKeyFile ?? certificateAuthorityFiles(path.join(dataDir, 'tls')).keyFile),
    customDomainCertRefreshMs: integer(env, 'CUSTOM_DOMAIN_CERT_REFRESH_MS', 30000, 1),
    encryptionKey: text(env, 'ENCRYPTION_KEY'),
    tokenLifetimeSeconds: integer(env, 'TOKEN_LIFETIME_SECONDS', 86400, 1),
    rateLimitSize: integer(env, 'RATE_LIMIT_SIZE', 1000, 1),
    rateLimitPerSecond: integer(env, 'RATE_LIMIT_PER_SECOND', 500, 1),
    rateLimitRedisFailure: redisFailure(env),
    anonymousRateLimitSize: integer(env, 'ANONYMOUS_RATE_LIMIT_SIZE', 100, 1),
    anonymousRateLimitPerSecond: integer(env, 'ANONYMOUS_RATE_LIMIT_PER_SECOND', 10, 1),
    tokenFailuresPerClientPerMinute: integer(env, 'TOKEN_FAILURES_PER_CLIENT_PER_MINUTE', 10, 1),
    tokenFailuresPerAddressPerMinute: integer(env, 'TOKEN_FAILURES_PER_ADDRESS_PER_MINUTE', 60, 1),
    trustProxy: trustProxy(text(env, 'TRUST_PROXY')),
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1024),
    responseStallTimeoutMs: integer(env, 'RESPONSE_STALL_TIMEOUT_MS', 30_000, 100),
    requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', 300_000, 100),
    usersImportMaxBytes: integer(env, 'USERS_IMPORT_MAX_BYTES', 512 * 1024 * 1024, 1024),
    usersImportLeaseMs: integer(env, 'USERS_IMPORT_LEASE_MS', 60_000, 1000),
    logLevel: text(env, 'LOG_LEVEL') ?? 'info',
    deliveryWorker: flag(env, 'DELIVERY_WORKER', true),
    deliveryAllowHttp: flag(env, 'DELIVERY_ALLOW_HTTP', false),
    deliveryAllowedHosts: allowedHosts(text(env, 'DELIVERY_ALLOWED_HOSTS')),
    deliveryTimeoutMs,
    deliveryRetryScheduleMs: integerList(env, 'DELIVERY_RETRY_SCHEDULE_MS', [1000, 2000, 4000]),
    deliveryRetryAfterMaxMs: integer(env, 'DELIVERY_RETRY_AFTER_MAX_MS', 3_600_000),
    deliveryPollMs: integer(env, 'DELIVERY_POLL_MS', 250, 1),
    deliveryLeaseMs,
    deliveryConcurrency: integer(env, 'DELIVERY_CONCURRENCY', 32, 1),
    deliveryPerStreamConcurrency: integer(env, 'DELIVERY_PER_STREAM_CONCURRENCY', 4, 1),
    deliveryBreakerFailures: integer(env, 'DELIVERY_BREAKER_FAILURES', 5, 1),
    deliveryBreakerCooldownMs: integer(env, 'DELIVERY_BREAKER_COOLDOWN_MS', 5000, 1),
    deliveryDisableAfterFailures: integer(env, 'DELIVERY_DISABLE_AFTER_CONSECUTIVE_FAILURES', 500, 0),
    customDomainEdgeDomain: (text(env, 'CUSTOM_DOMAIN_EDGE_DOMAIN') ?? 'edge.tenantry.local').toLowerCase(),
    customDomainsMax: integer(env, 'CUSTOM_DOMAINS_MAX', 20, 0),
    eventStreamsMax: integer(env, 'EVENT_STREAMS_MAX', 100, 0),
    eventStreamDeletionChunkRows: integer(env, 'EVENT_STREAM_DELETION_CHUNK_ROWS', 1000, 1, 100_000),
    // SQLite: a chunk holds the event loop, every tenant's requests (about 10 ms a chunk of 2,000);
    // PostgreSQL: it holds only its rows' locks, and each transaction's own cost (its commit, the
    // walk's first read) is paid less often: 1.3× a single UPDATE's time in all, against 1.6× by 2,000.
    eventStreamRedeliveryChunkRows: integer(
      env,
      'EVENT_STREAM_REDELIVERY_CHUNK_ROWS',
      databaseUrl === undefined ? 2_000 : 10_000,
      1,
      100_000,
    ),
    // PostgreSQL updates two lanes' chunks side by side (see migrations 024, 025); SQLite has one writer, so
    // lanes there would only take turns. At most 4: each lane at work holds one of a node's 10
    // PostgreSQL connections.
    eventStreamRedeliveryLanes: integer(env, 'EVENT_STREAM_REDELIVERY_LANES', databaseUrl === undefined ? 1 : 2, 1, 4),
    customDomainVerifyWindowSeconds: integer(env, 'CUSTOM_DOMAIN_VERIFY_WINDOW_S', 48 * 3600, 1),
    customDomainRecheckInitialMs: integer(env, 'CUSTOM_DOMAIN_RECHECK_INITIAL_MS', 60_000, 1),
    customDomainRecheckMaxMs: integer(env, 'CUSTOM_DOMAIN_RECHECK_MAX_MS', 3_600_000, 1),
    dnsServers: dnsServers(text(env, 'DNS_SERVERS')),
    ...mailSettings(env),
    templateRenderThreads: integer(env, 'TEMPLATE_RENDER_THREADS', 2, 1),
    templateRenderTimeoutMs: integer(env, 'TEMPLATE_RENDER_TIMEOUT_MS', 1000, 1),
    templateRenderIdleMs: integer(env, 'TEMPLATE_RENDER_IDLE_MS', 60_000, 1),
  };
}
