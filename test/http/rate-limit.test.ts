import { after, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { eventually } from '../helpers/eventually.ts';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import {
  memoryRateLimiter,
  rateLimitHeaders,
  redisRateLimiter,
  REDIS_KEY_PREFIX,
  type RateLimitState,
} from '../../src/http/rate-limit.ts';

/** A clock the tests move by hand. Deliberately not on a second boundary so ceil vs floor/round shows. */
function fakeClock(start = 1_700_000_000_250) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms), start };
}

describe('memoryRateLimiter', () => {
  test('takes one token per request, refuses when empty, refills over time', async () => {
    const clock = fakeClock();
    const limiter = memoryRateLimiter({ size: 3, refillPerSecond: 1 }, clock.now);
    const s0 = clock.start / 1000; // 1700000000.25

    assert.deepEqual(await limiter.take('t1'), {
      allowed: true,
      limit: 3,
      remaining: 2,
      reset: Math.ceil(s0 + 1),
      retryAfter: 0,
    });
    assert.deepEqual(await limiter.take('t1'), {
      allowed: true,
      limit: 3,
      remaining: 1,
      reset: Math.ceil(s0 + 2),
      retryAfter: 0,
    });
    assert.deepEqual(await limiter.take('t1'), {
      allowed: true,
      limit: 3,
      remaining: 0,
      reset: Math.ceil(s0 + 3),
      retryAfter: 0,
    });
    assert.deepEqual(await limiter.take('t1'), {
      allowed: false,
      limit: 3,
      remaining: 0,
      reset: Math.ceil(s0 + 3),
      retryAfter: 1,
    });

    clock.advance(500);
    // Half a token is not a token.
    assert.deepEqual(await limiter.take('t1'), {
      allowed: false,
      limit: 3,
      remaining: 0,
      reset: 1_700_000_004,
      retryAfter: 1,
    });

    clock.advance(500);
    assert.deepEqual(await limiter.take('t1'), {
      allowed: true,
      limit: 3,
      remaining: 0,
      reset: 1_700_000_005,
      retryAfter: 0,
    });
    assert.equal((await limiter.take('t1')).allowed, false);
    await limiter.close();
  });

  test('reset is the exact epoch second at which the bucket is full again', async () => {
    const clock = fakeClock();
    const limiter = memoryRateLimiter({ size: 3, refillPerSecond: 1 }, clock.now);
    assert.equal((await limiter.take('k')).reset, 1_700_000_002); // ceil(1700000000.25 + 1)
    clock.advance(250);
    assert.equal((await limiter.take('k')).reset, 1_700_000_003); // 2.25 tokens, 1.25 after the take: 1.75 s short → ceil(…0.5 + 1.75)
    clock.advance(10_000);
    // Long idle: the bucket is full before this take and one token short after it.
    const afterIdle = await limiter.take('k');
    assert.equal(afterIdle.remaining, 2);
    assert.equal(afterIdle.reset, Math.ceil((clock.now() + 1000) / 1000));

    // A fractional rate: one token takes 2 s.
    const slow = memoryRateLimiter({ size: 1, refillPerSecond: 0.5 }, clock.now);
    const first = await slow.take('x');
    assert.equal(first.reset, Math.ceil((clock.now() + 2000) / 1000));
  });

  test('partial refills that add up to a whole token yield one, despite floating point', async () => {
    const clock = fakeClock();
    const limiter = memoryRateLimiter({ size: 1, refillPerSecond: 1 }, clock.now);
    assert.equal((await limiter.take('k')).allowed, true);
    // 0.03 + 0.282 + 0.688 is 0.9999999999999999 in binary floating point.
    for (const ms of [30, 282]) {
      clock.advance(ms);
      assert.equal((await limiter.take('k')).allowed, false);
    }
    clock.advance(688);
    assert.equal((await limiter.take('k')).allowed, true);
  });

  test('giveBack returns a spent token, never beyond the size, and leaves unknown keys alone', async () => {
    const clock = fakeClock();
    const limiter = memoryRateLimiter({ size: 2, refillPerSecond: 1 }, clock.now);
    assert.equal((await limiter.take('k')).remaining, 1);
    assert.equal((await limiter.take('k')).remaining, 0);
    await limiter.giveBack('k');
    assert.equal((await limiter.take('k')).allowed, true);
    assert.equal((await limiter.take('k')).allowed, false);
    await limiter.giveBack('k');
    await limiter.giveBack('k');
    await limiter.giveBack('k');
    assert.equal((await limiter.take('k')).remaining, 1, 'given back up to the size only');
    await limiter.giveBack('unknown');
    assert.equal((await limiter.take('unknown')).remaining, 1);
  });

  test('keys have independent buckets', async () => {
    const clock = fakeClock();
    const limiter = memoryRateLimiter({ size: 2, refillPerSecond: 1 }, clock.now);
    assert.equal((await limiter.take('a')).allowed, true);
    assert.equal((await limiter.take('a')).allowed, true);
    assert.equal((await limiter.take('a')).allowed, false);
    const b = await limiter.take('b');
    assert.equal(b.allowed, true);
    assert.equal(b.remaining, 1);
    assert.equal((await limiter.take('a')).allowed, false);
  });

  test('the bucket map is bounded: full buckets are swept first, then the least recently used', async () => {
    const clock = fakeClock();
    const limiter = memoryRateLimiter({ size: 3, refillPerSecond: 1 }, clock.now, { maxBuckets: 2 });

    // 'b' drained (full again only after 3 s); 'a' one token short (full after 1 s) and more recent.
    for (let i = 0; i < 3; i++) await limiter.take('b');
    await limiter.take('a');
    clock.advance(1000);
    await limiter.take('c'); // map full: sweeping the refilled 'a' makes enough room
    // 'b' survived (plain LRU would have dropped it): its state carried over, 1 token refilled.
    assert.deepEqual(await limiter.take('b'), {
      allowed: true,
      limit: 3,
      remaining: 0,
      reset: 1_700_000_005,
      retryAfter: 0,
    });

    // Now both 'b' (drained) and 'c' are partial; 'c' is least recently used.
    await limiter.take('d');
    assert.equal((await limiter.take('b')).allowed, false, "'b' should still be remembered as empty");
    assert.equal((await limiter.take('c')).remaining, 2, "'c' should have been evicted and start over full");
  });

  test('rejects nonsensical settings', () => {
    assert.throws(() => memoryRateLimiter({ size: 0, refillPerSecond: 1 }), RangeError);
    assert.throws(() => memoryRateLimiter({ size: 2.5, refillPerSecond: 1 }), RangeError);
    assert.throws(() => memoryRateLimiter({ size: 1, refillPerSecond: 0 }), RangeError);
    assert.throws(() => memoryRateLimiter({ size: 1, refillPerSecond: 1 }, Date.now, { maxBuckets: 0 }), RangeError);
  });
});

test('rateLimitHeaders renders the three X-RateLimit-* headers as strings, and Retry-After on a refusal', () => {
  const state: RateLimitState = { allowed: false, limit: 50, remaining: 0, reset: 1_700_000_123, retryAfter: 3 };
  assert.deepEqual(rateLimitHeaders(state), {
    'X-RateLimit-Limit': '50',
    'X-RateLimit-Remaining': '0',
    'X-RateLimit-Reset': '1700000123',
    'Retry-After': '3',
  });
  assert.equal(rateLimitHeaders({ ...state, allowed: true, remaining: 1, retryAfter: 0 })['Retry-After'], undefined);
});

// ---------------------------------------------------------------------------------------------
// Redis: a real server. Skipped when none answers locally, but a failure when CI names one.

const explicitRedisUrl = process.env.TEST_REDIS_URL;
const redisUrl = explicitRedisUrl ?? 'redis://127.0.0.1:6379';

async function probeRedis(): Promise<string | undefined> {
  const probe = new Redis(redisUrl, {
    lazyConnect: true,
    connectTimeout: 2000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // connect() itself only says "Connection is closed."; the socket error says why.
  let cause: Error | undefined;
  probe.on('error', (err: Error) => void (cause = err));
  try {
    await probe.connect();
    await probe.ping();
    return undefined;
  } catch (err) {
    return `no Redis at ${redisUrl}: ${(cause ?? (err as Error)).message}`;
  } finally {
    probe.disconnect();
  }
}

const redisUnavailable = await probeRedis();

/** Returns true when the test may proceed. */
function requireRedis(t: TestContext): boolean {
  if (redisUnavailable === undefined) return true;
  if (explicitRedisUrl !== undefined) {
    assert.fail(`TEST_REDIS_URL is set but Redis is unreachable (${redisUnavailable})`);
  }
  t.skip(redisUnavailable);
  return false;
}

describe('redisRateLimiter', () => {
  const runId = `rltest-${randomUUID()}-`;
  const key = (name: string) => runId + name;

  after(async () => {
    if (redisUnavailable !== undefined) return;
    const admin = new Redis(redisUrl);
    try {
      const pattern = `${REDIS_KEY_PREFIX}${runId}*`;
      let cursor = '0';
      do {
        const [next, keys] = await admin.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        if (keys.length > 0) await admin.del(...keys);
        cursor = next;
      } while (cursor !== '0');
    } finally {
      await admin.quit();
    }
  });

  test('two nodes on one Redis share one bucket', async (t) => {
    if (!requireRedis(t)) return;
    // Refill slow enough (one token per 100 s) that test latency cannot top the bucket up.
    const settings = { size: 5, refillPerSecond: 0.01 };
    const errors: Error[] = [];
    const nodeA = redisRateLimiter(settings, redisUrl, { onError: (e) => errors.push(e) });
    const nodeB = redisRateLimiter(settings, redisUrl, { onError: (e) => errors.push(e) });
    try {
      const k = key('shared');
      const seen: Array<[string, boolean, number]> = [];
      for (const [name, node] of [
        ['A', nodeA],
        ['A', nodeA],
        ['A', nodeA],
        ['B', nodeB],
        ['B', nodeB],
      ] as const) {
        const s = await node.take(k);
        seen.push([name, s.allowed, s.remaining]);
        assert.equal(s.limit, 5);
      }
      assert.deepEqual(seen, [
        ['A', true, 4],
        ['A', true, 3],
        ['A', true, 2],
        ['B', true, 1],
        ['B', true, 0],
      ]);
      const refusedA = await nodeA.take(k);
      const refusedB = await nodeB.take(k);
      assert.equal(refusedA.allowed, false);
      assert.equal(refusedA.remaining, 0);
      assert.equal(refusedB.allowed, false);
      assert.equal(refusedB.remaining, 0);
      // Another key is untouched by all of this.
      assert.equal((await nodeB.take(key('other'))).remaining, 4);
      assert.deepEqual(errors, []);
    } finally {
      await nodeA.close();
      await nodeB.close();
    }
  });

  test('tokens refill over time', async (t) => {
    if (!requireRedis(t)) return;
    const limiter = redisRateLimiter({ size: 1, refillPerSecond: 4 }, redisUrl);
    try {
      const k = key('refill');
      assert.equal((await limiter.take(k)).allowed, true);
      assert.equal((await limiter.take(k)).allowed, false);
      await sleep(300); // one token takes 250 ms
      const refilled = await limiter.take(k);
      assert.equal(refilled.allowed, true);
      assert.equal(refilled.remaining, 0);
    } finally {
      await limiter.close();
    }
  });

  test('reset is integer epoch seconds when the bucket is full again; the key expires by then', async (t) => {
    if (!requireRedis(t)) return;
    const limiter = redisRateLimiter({ size: 5, refillPerSecond: 0.01 }, redisUrl);
    const admin = new Redis(redisUrl);
    try {
      const k = key('reset');
      const first = await limiter.take(k);
      const second = await limiter.take(k);
      const nowS = Date.now() / 1000;
      for (const [s, tokensShort] of [
        [first, 1],
        [second, 2],
      ] as const) {
        assert.ok(Number.isInteger(s.reset), `reset ${s.reset} should be an integer`);
        // One token takes 100 s; allow a few seconds for clock differences with the server.
        const expected = nowS + tokensShort * 100;
        assert.ok(Math.abs(s.reset - expected) <= 3, `reset ${s.reset} should be about ${expected}`);
      }
      const pttl = await admin.pttl(REDIS_KEY_PREFIX + k);
      assert.ok(pttl > 190_000 && pttl <= 202_000, `bucket TTL ${pttl} ms should be about 200 s`);
    } finally {
      await limiter.close();
      await admin.quit();
    }
  });

  test('a Redis command error at request time fails open and is reported', async (t) => {
    if (!requireRedis(t)) return;
    const errors: Error[] = [];
    const limiter = redisRateLimiter({ size: 2, refillPerSecond: 0.01 }, redisUrl, {
      onError: (e) => errors.push(e),
      probeIntervalMs: 60_000,
    });
    const admin = new Redis(redisUrl);
    try {
      const k = key('wrongtype');
      await admin.set(REDIS_KEY_PREFIX + k, 'not a hash'); // makes the script fail with WRONGTYPE
      for (let i = 0; i < 3; i++) {
        const s = await limiter.take(k);
        assert.equal(s.allowed, true);
        assert.equal(s.limit, 2);
      }
      // The first failure starts an outage; the next request probes at once, in the background, and fails
      // the same way; the third waits for the probe interval, deciding without Redis.
      await eventually('the probe reported', async () => (errors.length === 2 ? true : undefined));
      for (const error of errors) assert.match(error.message, /WRONGTYPE/);
    } finally {
      await limiter.close();
      await admin.quit();
    }
  });
});

test('redisRateLimiter fails open when Redis is unreachable', async () => {
  const errors: Error[] = [];
  const limiter = redisRateLimiter({ size: 7, refillPerSecond: 1 }, 'redis://127.0.0.1:1', {
    onError: (e) => errors.push(e),
  });
  try {
    const started = Date.now();
    const s = await limiter.take('anyone');
    assert.equal(s.allowed, true);
    assert.equal(s.limit, 7);
    assert.equal(s.remaining, 6);
    assert.ok(Number.isInteger(s.reset));
    assert.ok(errors.length >= 1, 'onError should have been called');
    assert.ok(errors.every((e) => e instanceof Error));
    // Connection failures are reported too, not only the failed command.
    assert.ok(
      errors.some((e) => /ECONNREFUSED/.test(e.message)),
      errors.map((e) => e.message).join('; '),
    );
    assert.ok(Date.now() - started < 5000, 'failing open should not wait long');
  } finally {
    await limiter.close();
  }
});
