import type { Logger } from '../logger.ts';
import { CENSOR, redactUrl } from './log-redaction.ts';

/**
 * What the Redis rate limiter decides while Redis cannot (RATE_LIMIT_REDIS_FAILURE):
 * - `allow`: every request is let through, unlimited (the API stays up; nothing is counted);
 * - `deny`: every request is refused with 429 and Retry-After (no request goes unlimited);
 * - `local`: each node counts in its own memory bucket, as without REDIS_URL (the limit holds per node).
 */
export type RedisFailurePolicy = 'allow' | 'deny' | 'local';

const MEANWHILE: Record<RedisFailurePolicy, string> = {
  allow: 'requests are let through unlimited',
  deny: 'requests are refused with 429',
  local: 'each node limits requests in its own memory',
};

/**
 * A Redis outage as the rate limiter sees it, logged once when it starts (warn, with the error) and
 * once when it ends (info, with how long it lasted and how many requests were decided without Redis),
 * never per request: during an outage every request fails the same way.
 *
 * Any failure starts an outage: refused connections and timeouts, and also errors Redis replies with
 * (OOM, READONLY after a failover), which stop every decision just the same. Redis answering a
 * command, or the connection becoming ready again, ends it.
 */
export class RedisOutage {
  private since: number | undefined;
  private decisions = 0;
  private readonly target: string;
  private readonly secrets: string[];

  constructor(
    redisUrl: string,
    private readonly policy: RedisFailurePolicy,
    private readonly logger: Logger | undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.target = redactUrl(redisUrl);
    this.secrets = secretsOf(redisUrl);
  }

  get ongoing(): boolean {
    return this.since !== undefined;
  }

  /** A command or the connection failed. */
  failed(error: Error): void {
    if (this.since !== undefined) return;
    this.since = this.now();
    this.decisions = 0;
    this.logger?.warn(
      { redis: this.target, error: this.scrub(error.message), whenUnavailable: this.policy },
      `Rate limiter: Redis is unavailable; until it answers again ${MEANWHILE[this.policy]}`,
    );
  }

  /** A request decided without Redis (by the policy) during the outage. */
  decidedWithoutRedis(): void {
    this.decisions++;
  }

  /** Redis answered a command, or the connection is ready again. */
  recovered(): void {
    if (this.since === undefined) return;
    const outageMs = Math.max(0, this.now() - this.since);
    this.since = undefined;
    this.logger?.info(
      { redis: this.target, outageMs, decisionsWithoutRedis: this.decisions, whenUnavailable: this.policy },
      `Rate limiter: Redis answers again after ${(outageMs / 1000).toFixed(1)} s; ` +
        `${this.decisions} requests were decided without it`,
    );
  }

  /** Errors name hosts and ports, never (today) the password; should one ever echo it, it is not logged. */
  private scrub(message: string): string {
    let out = message;
    for (const secret of this.secrets) out = out.split(secret).join(CENSOR);
    return out;
  }
}

/** The password of a Redis URL, from its user-info or a `password` query parameter, encoded and decoded. */
function secretsOf(redisUrl: string): string[] {
  let url: URL;
  try {
    url = new URL(redisUrl);
  } catch {
    return [];
  }
  const secrets = new Set<string>();
  for (const value of [url.password, url.searchParams.get('password') ?? '']) {
    if (value === '') continue;
    secrets.add(value);
    secrets.add(encodeURIComponent(value));
    try {
      secrets.add(decodeURIComponent(value));
    } catch {
      // Not valid percent-encoding: only the forms above can appear.
    }
  }
  // Longest first, so that no part of a longer form is left behind by a shorter one replaced inside it.
  return [...secrets].filter((secret) => secret !== '').sort((a, b) => b.length - a.length);
}
