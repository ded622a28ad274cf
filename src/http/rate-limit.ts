import type { Redis } from 'ioredis';
import { lazyModule } from '../lazy-module.ts';
import type { Logger } from '../logger.ts';
import { RedisOutage, type RedisFailurePolicy } from './redis-outage.ts';

/** Loaded by the first Redis limiter: without REDIS_URL there is none. */
const ioredis = lazyModule<typeof import('ioredis')>('ioredis');

export type { RedisFailurePolicy } from './redis-outage.ts';

/** Bucket capacity and continuous refill rate (tokens per second). */
export interface RateLimitSettings {
  size: number;
  refillPerSecond: number;
}

export interface RateLimitState {
  allowed: boolean;
  /** Bucket size → X-RateLimit-Limit. */
  limit: number;
  /** Whole tokens left after this request → X-RateLimit-Remaining. */
  remaining: number;
  /** Absolute UNIX epoch seconds (integer) when the bucket is full again → X-RateLimit-Reset. */
  reset: number;
  /** Whole seconds until the bucket holds a token again → Retry-After on a refusal; 0 while allowed. */
  retryAfter: number;
}

export interface RateLimiter {
  /** Spends one token of the key's bucket, if it has one. */
  take(key: string): Promise<RateLimitState>;
  /**
   * take(), answered at once: only limiters whose buckets live in this process have it (the request
   * pipeline then spends no promise on the hot path); those that ask Redis do not.
   */
  takeNow?(key: string): RateLimitState;
  /**
   * Returns the token a take spent (never beyond the bucket's size): limits that count only failures take
   * before the attempt, so that attempts made at once cannot all pass, and give back on success.
   */
  giveBack(key: string): Promise<void>;
  /**
   * Every bucket full again (after the database was restored from a snapshot). Buckets shared through
   * Redis belong to every node and are left alone; only this node's own are refilled.
   */
  reset(): Promise<void>;
  close(): Promise<void>;
}

export interface MemoryRateLimiterOptions {
  /** Most buckets kept at once; beyond it full buckets are swept, then the least recently used evicted. */
  maxBuckets?: number;
}

export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  const headers: Record<string, string> = {
    'X-RateLimit-Limit': String(state.limit),
    'X-RateLimit-Remaining': String(state.remaining),
    'X-RateLimit-Reset': String(state.reset),
  };
  // The official SDK waits for Retry-After before it retries a 429.
  if (!state.allowed) headers['Retry-After'] = String(state.retryAfter);
  return headers;
}

/**
 * Refills arrive as sums of fractions like 0.333 + 0.333 + 0.334, which in binary floating point can
 * land a hair under a whole token; without this slack such a request would be refused.
 */
const EPSILON = 1e-9;

const DEFAULT_MAX_BUCKETS = 100_000;

/** Redis is on the request path of every API call; a hung server must not hang the API with it. */
const REDIS_COMMAND_TIMEOUT_MS = 1000;
/** During an outage on a connection that looks ready, how long after a failure Redis is asked again. */
const REDIS_PROBE_MS = 1000;

export const REDIS_KEY_PREFIX = 'tenantry:rl:';

function validate(settings: RateLimitSettings): void {
  if (!Number.isInteger(settings.size) || settings.size < 1) {
    throw new RangeError(`rate limit size must be a positive integer, got ${settings.size}`);
  }
  if (!Number.isFinite(settings.refillPerSecond) || settings.refillPerSecond <= 0) {
    throw new RangeError(`rate limit refillPerSecond must be a positive number, got ${settings.refillPerSecond}`);
  }
}

function resetSeconds(nowMs: number, tokens: number, settings: RateLimitSettings): number {
  const msUntilFull = (Math.max(0, settings.size - tokens) * 1000) / settings.refillPerSecond;
  return Math.ceil((nowMs + msUntilFull) / 1000);
}

/** The state of a bucket holding `tokens` at `nowMs`; `allowed` says whether a request got (or would get) a token. */
function stateOf(allowed: boolean, tokens: number, nowMs: number, settings: RateLimitSettings): RateLimitState {
  const missing = Math.max(0, 1 - tokens - EPSILON);
  return {
    allowed,
    limit: settings.size,
    remaining: Math.floor(tokens + EPSILON),
    reset: resetSeconds(nowMs, tokens, settings),
    retryAfter: allowed ? 0 : Math.max(1, Math.ceil(missing / settings.refillPerSecond)),
  };
}

interface Bucket {
  tokens: number;
  /** Time (ms) at which `tokens` was last brought up to date. */
  at: number;
}

export function memoryRateLimiter(
  settings: RateLimitSettings,
  now: () => number = Date.now,
  options: MemoryRateLimiterOptions = {},
): RateLimiter {
  validate(settings);
  const { size, refillPerSecond } = settings;
  const maxBuckets = options.maxBuckets ?? DEFAULT_MAX_BUCKETS;
  if (!Number.isInteger(maxBuckets) || maxBuckets < 1) {
    throw new RangeError(`maxBuckets must be a positive integer, got ${maxBuckets}`);
  }
  // Evicting down to a low-water mark rather than to just under the cap means the O(n) sweep runs
  // at most once per ~10% of the cap in new keys, instead of on every new key once the map is full.
  const lowWater = Math.floor(maxBuckets * 0.9);

  // Map iteration order is insertion order; re-inserting on every touch makes it LRU order.
  const buckets = new Map<string, Bucket>();

  const refilled = (b: Bucket, t: number): number =>
    Math.min(size, b.tokens + (Math.max(0, t - b.at) * refillPerSecond) / 1000);

  function makeRoom(t: number): void {
    // A full bucket is indistinguishable from a missing one, so dropping it changes nothing.
    for (const [key, b] of buckets) {
      if (refilled(b, t) >= size - EPSILON) buckets.delete(key);
    }
    // Still crowded: forget the least recently used. That hands them a fresh bucket, a leniency
    // preferred over unbounded memory.
    for (const key of buckets.keys()) {
      if (buckets.size <= lowWater) break;
      buckets.delete(key);
    }
  }

  function takeNow(key: string): RateLimitState {
    const t = now();
    let bucket = buckets.get(key);
    if (bucket) {
      buckets.delete(key);
      bucket.tokens = refilled(bucket, t);
      // Never move `at` backwards: a clock step back must not credit the same interval twice.
      bucket.at = Math.max(bucket.at, t);
    } else {
      if (buckets.size >= maxBuckets) makeRoom(t);
      bucket = { tokens: size, at: t };
    }
    buckets.set(key, bucket);

    let allowed = false;
    if (bucket.tokens >= 1 - EPSILON) {
      bucket.tokens = Math.max(0, bucket.tokens - 1);
      allowed = true;
    }
    return stateOf(allowed, bucket.tokens, t, settings);
  }

  return {
    takeNow,
    async take(key) {
      return takeNow(key);
    },
    async giveBack(key) {
      const t = now();
      const bucket = buckets.get(key);
      if (!bucket) return;
      bucket.tokens = Math.min(size, refilled(bucket, t) + 1);
      bucket.at = Math.max(bucket.at, t);
    },
    async reset() {
      buckets.clear();
    },
    async close() {
      buckets.clear();
    },
  };
}

/**
 * KEYS[1] = bucket hash {t: tokens, ts: ms of last update}; ARGV = size, refill per second.
 * Returns {allowed (0|1), whole tokens remaining, reset epoch seconds}.
 *
 * The clock is Redis's own TIME so that nodes with skewed clocks still agree on one bucket.
 */
/** The bucket brought up to Redis's TIME: `tokens` and `at` (ms), from KEYS[1] and ARGV = size, refill per second. */
const REFILL = `
if redis.replicate_commands then pcall(redis.replicate_commands) end -- Redis < 5: allow writes after TIME
local size = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local state = redis.call('HMGET', KEYS[1], 't', 'ts')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = size
  at = now
end
if now > at then
  tokens = math.min(size, tokens + (now - at) * rate / 1000)
  at = now
end
`;

const TAKE_SCRIPT = `
${REFILL}
local eps = 1e-9
local allowed = 0
if tokens >= 1 - eps then
  tokens = math.max(0, tokens - 1)
  allowed = 1
end
local msUntilFull = math.max(0, size - tokens) * 1000 / rate
-- %.17g round-trips a double exactly; Lua's default tostring keeps only 14 digits.
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'ts', string.format('%.17g', at))
-- Once full the bucket equals an absent one, so let it expire then; the extra second absorbs rounding.
redis.call('PEXPIRE', KEYS[1], math.ceil(msUntilFull) + 1000)
return {allowed, string.format('%.17g', tokens), string.format('%.17g', now)}
`;

/** One token back into KEYS[1], up to the size. */
const GIVE_BACK_SCRIPT = `
${REFILL}
tokens = math.min(size, tokens + 1)
local msUntilFull = math.max(0, size - tokens) * 1000 / rate
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'ts', string.format('%.17g', at))
redis.call('PEXPIRE', KEYS[1], math.ceil(msUntilFull) + 1000)
return 1
`;

/** {allowed (0|1), tokens left and Redis's time in ms, both as exact decimal strings}. */
type TakeReply = [number, string, string];
type ScriptedRedis = Redis & {
  tenantryRateLimitTake(key: string, size: number, refillPerSecond: number): Promise<TakeReply>;
  tenantryRateLimitGiveBack(key: string, size: number, refillPerSecond: number): Promise<number>;
};

export interface RedisRateLimitOptions {
  /** The server's logger: a Redis outage is logged once when it starts and once when it ends. */
  logger?: Logger;
  /** What decides while Redis cannot (see RedisFailurePolicy); `allow` unless told. */
  whenUnavailable?: RedisFailurePolicy;
  /** Every Redis failure as it happens, connection errors too (for tests and metrics); never throws back. */
  onError?: (err: Error) => void;
  /** After a failed probe of an outage, how long until Redis is asked again; REDIS_PROBE_MS unless told (tests). */
  probeIntervalMs?: number;
}

/**
 * Token buckets shared by every node using the same Redis: each call makes one limit (its own bucket
 * sizes), and all of them share one connection and one outage log. An unavailable Redis does not take
 * the API down with it: meanwhile the policy decides (see RedisFailurePolicy). The connection closes
 * when the last limit made here is closed.
 */
export function redisRateLimiters(
  redisUrl: string,
  options: RedisRateLimitOptions = {},
): (settings: RateLimitSettings) => RateLimiter {
  const policy = options.whenUnavailable ?? 'allow';
  const outage = new RedisOutage(redisUrl, policy, options.logger);
  let redis: ScriptedRedis | undefined;
  let open = 0;

  // While an outage lasts on a connection that still looks ready (Redis stalled, or answering with
  // errors), requests are decided without it at once: waiting out the command timeout on every request
  // would add a second to each. One request at a time also sends its command in the background (a
  // probe): at once when the outage starts, then a probe interval after each probe that failed. Redis
  // answering one ends the outage; a connection that was down ends it by becoming ready again.
  const probeIntervalMs = options.probeIntervalMs ?? REDIS_PROBE_MS;
  let probing = false;
  /** On performance.now()'s clock, which no step of the wall clock moves: no probe before it. */
  let probeAfter = 0;
  /** Failures so far: an answer ends the outage only when nothing failed after its command was sent. */
  let failures = 0;

  const failed = (err: unknown): void => {
    const error = err instanceof Error ? err : new Error(String(err));
    probeAfter = outage.ongoing ? performance.now() + probeIntervalMs : 0;
    failures++;
    outage.failed(error);
    try {
      options.onError?.(error);
    } catch {
      // A throwing observer must not undo the policy.
    }
  };

  const connect = (): ScriptedRedis => {
    const client = new (ioredis().Redis)(redisUrl, {
      lazyConnect: false,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: true,
      commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    }) as ScriptedRedis;
    // Without a listener ioredis prints every connection error to the console itself.
    client.on('error', failed);
    client.on('ready', () => outage.recovered());
    // defineCommand sends EVALSHA and falls back to EVAL only when the server lacks the script.
    client.defineCommand('tenantryRateLimitTake', { numberOfKeys: 1, lua: TAKE_SCRIPT });
    client.defineCommand('tenantryRateLimitGiveBack', { numberOfKeys: 1, lua: GIVE_BACK_SCRIPT });
    return client;
  };

  return (settings) => {
    validate(settings);
    const { size, refillPerSecond } = settings;
    const client = (redis ??= connect());
    open++;
    // Only `local` needs buckets of its own; they are used while Redis is out, and idle otherwise.
    const local = policy === 'local' ? memoryRateLimiter(settings) : undefined;
    /** The decision while Redis cannot make it. */
    const withoutRedis = async (key: string): Promise<RateLimitState> => {
      outage.decidedWithoutRedis();
      if (local !== undefined) return local.take(key);
      // The real bucket is unknown: allowed as a fresh bucket would be after this one request, or refused.
      const now = Date.now();
      return policy === 'deny' ? stateOf(false, 0, now, settings) : stateOf(true, size - 1, now, settings);
    };
    /** The script's reply as a state, or an error when it is not what the script returns. */
    const stateOfReply = (reply: unknown): RateLimitState => {
      const [allowed, tokens, at] = Array.isArray(reply) && reply.length === 3 ? reply : [];
      const left = Number(tokens);
      const now = Number(at);
      if (
        (allowed !== 0 && allowed !== 1) ||
        typeof tokens !== 'string' ||
        typeof at !== 'string' ||
        !(Number.isFinite(left) && left >= 0) ||
        !(Number.isFinite(now) && now > 0)
      )
        throw new Error(
          `Redis answered the rate-limit script with an unexpected reply (${Array.isArray(reply) ? `an array of ${reply.length}` : typeof reply})`,
        );
      // At most the size here, whatever another node's settings left in the bucket.
      return stateOf(allowed === 1, Math.min(left, size), now, settings);
    };
    /** Redis's decision for `key`: what Redis threw, or an error for a reply not of the script's shape. */
    const ask = async (key: string): Promise<RateLimitState> => {
      const sent = failures;
      const state = stateOfReply(await client.tenantryRateLimitTake(REDIS_KEY_PREFIX + key, size, refillPerSecond));
      if (sent === failures) outage.recovered();
      return state;
    };
    const probe = (key: string): void => {
      if (probing || client.status !== 'ready' || performance.now() < probeAfter) return;
      probing = true;
      ask(key).then(
        () => (probing = false),
        (err: unknown) => {
          probing = false;
          failed(err);
        },
      );
    };
    let closed = false;

    return {
      async take(key) {
        if (outage.ongoing) {
          probe(key);
          return withoutRedis(key);
        }
        try {
          return await ask(key);
        } catch (err) {
          failed(err);
          return withoutRedis(key);
        }
      },
      async giveBack(key) {
        if (outage.ongoing) return local?.giveBack(key);
        const sent = failures;
        try {
          await client.tenantryRateLimitGiveBack(REDIS_KEY_PREFIX + key, size, refillPerSecond);
          if (sent === failures) outage.recovered();
        } catch (err) {
          failed(err);
          await local?.giveBack(key);
        }
      },
      async reset() {
        await local?.reset();
      },
      async close() {
        if (closed) return;
        closed = true;
        await local?.close();
        if (--open > 0) return;
        redis = undefined;
        try {
          await client.quit();
        } catch {
          // quit can fail on a broken connection; the socket still has to go.
          client.disconnect();
        }
      },
    };
  };
}

/** One limit on its own connection; see redisRateLimiters. */
export function redisRateLimiter(
  settings: RateLimitSettings,
  redisUrl: string,
  options: RedisRateLimitOptions = {},
): RateLimiter {
  return redisRateLimiters(redisUrl, options)(settings);
}
