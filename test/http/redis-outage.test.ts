import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, it, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/logger.ts';
import {
  redisRateLimiters,
  REDIS_KEY_PREFIX,
  type RateLimitState,
  type RedisFailurePolicy,
} from '../../src/http/rate-limit.ts';
import { eventually } from '../helpers/eventually.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { startTestServer } from '../helpers/server.ts';

// A real Redis behind a TCP proxy the tests take down and bring back. Skipped when no Redis answers
// locally, but a failure when CI names one.
const explicitRedisUrl = process.env.TEST_REDIS_URL;
const redisUrl = new URL(explicitRedisUrl ?? 'redis://127.0.0.1:6379');

async function redisAnswers(): Promise<boolean> {
  const probe = new Redis(redisUrl.href, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

const available = await redisAnswers();

function requireRedis(t: TestContext): boolean {
  if (available) return true;
  if (explicitRedisUrl !== undefined) assert.fail(`TEST_REDIS_URL=${explicitRedisUrl} does not answer`);
  t.skip(`no Redis at ${redisUrl.href}`);
  return false;
}

/** JSON log lines written by the server's logger. */
function logCapture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) {
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  const about = (pattern: RegExp) => () => lines.filter((line) => pattern.test(String(line.msg)));
  return {
    stream,
    lines,
    starts: about(/^Rate limiter: Redis is unavailable/),
    ends: about(/^Rate limiter: Redis answers again/),
  };
}

/** The Redis URL reaching Redis through `proxy`. */
function throughProxy(proxy: TcpProxy): string {
  const url = new URL(redisUrl.href);
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  return url.href;
}

const runId = `rloutage-${randomBytes(4).toString('hex')}-`;

after(async () => {
  if (!available) return;
  const admin = new Redis(redisUrl.href);
  try {
    const keys = await admin.keys(`${REDIS_KEY_PREFIX}*${runId}*`);
    if (keys.length > 0) await admin.del(...keys);
  } finally {
    await admin.quit();
  }
});

/** What each setting decides for 5 requests on a bucket of 3, and 1 on another limit, while Redis is out. */
const EXPECTED: Record<RedisFailurePolicy, (a: RateLimitState[], b: RateLimitState) => void> = {
  allow(a, b) {
    assert.deepEqual(
      a.map((s) => [s.allowed, s.remaining]),
      Array(5).fill([true, 2]),
    );
    assert.equal(b.allowed, true);
  },
  deny(a, b) {
    assert.deepEqual(
      a.map((s) => [s.allowed, s.remaining]),
      Array(5).fill([false, 0]),
    );
    assert.ok(
      a.every((s) => s.retryAfter >= 1),
      'a refusal says when to retry',
    );
    assert.equal(b.allowed, false);
  },
  local(a, b) {
    // A bucket of this node's own: full at the start of the outage, spent, then refusing.
    assert.deepEqual(
      a.map((s) => [s.allowed, s.remaining]),
      [
        [true, 2],
        [true, 1],
        [true, 0],
        [false, 0],
        [false, 0],
      ],
    );
    assert.equal(b.allowed, true);
  },
};

describe('a Redis outage under the shared rate limits', () => {
  for (const policy of ['allow', 'deny', 'local'] as const) {
    it(`RATE_LIMIT_REDIS_FAILURE=${policy}: logged once when it starts and once when it ends`, async (t) => {
      if (!requireRedis(t)) return;
      const proxy = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
      const log = logCapture();
      const limits = redisRateLimiters(throughProxy(proxy), {
        logger: createLogger({ logLevel: 'info' }, { stream: log.stream }),
        whenUnavailable: policy,
      });
      // Two limits on one connection, as a server has: one outage, one pair of lines.
      const a = limits({ size: 3, refillPerSecond: 0.01 });
      const b = limits({ size: 1, refillPerSecond: 0.01 });
      const key = `${runId}${policy}`;
      try {
        assert.deepEqual([(await a.take(key)).remaining, (await b.take(`${key}-b`)).remaining], [2, 0]);

        await proxy.stop();
        // Noticed from the connection itself, before any request fails.
        await eventually('the start of the outage logged', async () => (log.starts().length > 0 ? true : undefined));
        const during: RateLimitState[] = [];
        for (let i = 0; i < 5; i++) during.push(await a.take(key));
        const other = await b.take(`${key}-other`);
        EXPECTED[policy](during, other);

        await proxy.start();
        await eventually('the end of the outage logged', async () => (log.ends().length > 0 ? true : undefined));
        // Back on the shared bucket, as Redis left it: 2 tokens before the outage, 1 after this take.
        const back = await a.take(key);
        assert.deepEqual([back.allowed, back.remaining], [true, 1]);

        assert.equal(log.starts().length, 1, JSON.stringify(log.lines));
        assert.equal(log.ends().length, 1, JSON.stringify(log.lines));
        const [start] = log.starts();
        const [end] = log.ends();
        assert.equal(start!.level, 40);
        assert.equal(start!.whenUnavailable, policy);
        assert.equal(typeof start!.error, 'string');
        assert.equal(start!.redis, throughProxy(proxy));
        assert.equal(end!.level, 30);
        assert.equal(end!.decisionsWithoutRedis, 6);
        assert.ok(typeof end!.outageMs === 'number' && end!.outageMs > 0, `outageMs ${String(end!.outageMs)}`);
      } finally {
        await a.close();
        await b.close();
        await proxy.stop();
      }
    });
  }
});

describe('a server whose Redis goes away', () => {
  let proxy: TcpProxy;
  before(async () => {
    if (available) proxy = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
  });
  after(async () => {
    await proxy?.stop();
  });

  it('logs the outage through its logger and meanwhile limits each node on its own (local)', async (t) => {
    if (!requireRedis(t)) return;
    const log = logCapture();
    const server = await startTestServer(
      'sqlite',
      {
        REDIS_URL: throughProxy(proxy),
        RATE_LIMIT_REDIS_FAILURE: 'local',
        RATE_LIMIT_SIZE: '4',
        RATE_LIMIT_PER_SECOND: '1',
        LOG_LEVEL: 'info',
      },
      { logStream: log.stream },
    );
    try {
      const domain = 'outage.test';
      const { token } = await server.addTenant(`${runId}tenant`, domain);
      const call = async () =>
        (await server.request({ url: '/api/v2/users-by-email?email=a%40b.co', token, headers: { host: domain } }))
          .statusCode;
      assert.equal(await call(), 200);

      // A loaded machine can make a command time out before this (a real outage, logged as one): only
      // what follows the proxy's stop is this test's outage.
      await eventually('no outage under way', async () =>
        log.starts().length === log.ends().length ? true : undefined,
      );
      const earlier = log.starts().length;
      await proxy.stop();
      await eventually('the start of the outage logged', async () =>
        log.starts().length > earlier ? true : undefined,
      );
      const during: number[] = [];
      for (let i = 0; i < 6; i++) during.push(await call());
      assert.deepEqual(during.slice(0, 4), [200, 200, 200, 200]);
      assert.ok(during.slice(4).includes(429), `the node's own bucket of 4 ran out: ${during.join(',')}`);

      await proxy.start();
      await eventually('the end of the outage logged', async () => (log.ends().length > earlier ? true : undefined));
      assert.equal(log.starts().length, earlier + 1, JSON.stringify(log.lines));
      assert.equal(log.ends().length, earlier + 1, JSON.stringify(log.lines));
      assert.equal(log.ends()[earlier]!.decisionsWithoutRedis, 6);
    } finally {
      await server.close();
    }
  });
});

describe('a Redis that hangs with its connection open', () => {
  it('costs the requests in flight one command timeout; meanwhile requests are decided at once, and probes end the outage', async (t) => {
    if (!requireRedis(t)) return;
    const proxy = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
    const log = logCapture();
    const errors: Error[] = [];
    const limits = redisRateLimiters(throughProxy(proxy), {
      logger: createLogger({ logLevel: 'info' }, { stream: log.stream }),
      whenUnavailable: 'allow',
      onError: (error) => errors.push(error),
      probeIntervalMs: 200,
    });
    const limit = limits({ size: 20, refillPerSecond: 0.001 });
    const key = `${runId}hang`;
    const admin = new Redis(redisUrl.href);
    /** Whole tokens the shared bucket holds: each command that reached Redis spent one. */
    const tokensInRedis = async () => Math.floor(Number(await admin.hget(REDIS_KEY_PREFIX + key, 't')));
    try {
      assert.equal((await limit.take(key)).remaining, 19);

      proxy.stall();
      // The connection stays ready: this command reaches Redis, and its answer never comes back in time.
      const first = await limit.take(key);
      assert.deepEqual([first.allowed, first.remaining], [true, 19]);
      assert.equal(log.starts().length, 1, JSON.stringify(log.lines));
      // Decided at once without Redis; the first of them also probes, in the background, at once.
      const during = await Promise.all(Array.from({ length: 5 }, () => limit.take(key)));
      assert.ok(during.every((state) => state.allowed && state.remaining === 19));
      await eventually('the probe timed out', async () => (errors.length === 2 ? true : undefined));
      assert.equal(await tokensInRedis(), 17, 'the first command and one probe reached Redis, nothing else');

      proxy.release();
      // A probe interval after the failed probe, a request probes again; the answer ends the outage.
      await eventually('the end of the outage logged', async () => {
        if (log.ends().length > 0) return true;
        await limit.take(key);
        return undefined;
      });
      assert.equal(await tokensInRedis(), 16, 'one more probe reached Redis');
      const back = await limit.take(key);
      assert.deepEqual([back.allowed, back.remaining], [true, 15], 'back on the shared bucket');
      assert.equal(log.starts().length, 1, JSON.stringify(log.lines));
      assert.equal(errors.length, 2);
    } finally {
      proxy.release();
      await limit.close();
      await admin.quit();
      await proxy.stop();
    }
  });
});

const bulk = (value: string) => `$${value.length}\r\n${value}\r\n`;

/**
 * A server speaking Redis's protocol that answers the rate-limit script with `reply` (RESP text): what
 * a broken or impersonating Redis could send.
 */
async function fakeRedis(reply: () => string): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let pending = '';
    socket.on('data', (chunk: Buffer) => {
      pending += chunk.toString('latin1');
      // Each command is an array of bulk strings: `*N`, then `$len` and the argument, N times.
      for (;;) {
        const command = parseCommand(pending);
        if (!command) return;
        pending = pending.slice(command.length);
        const name = command.args[0]!.toUpperCase();
        if (name === 'INFO') socket.write(bulk('# Server\r\nloading:0\r\n'));
        else if (name === 'EVALSHA' || name === 'EVAL') socket.write(reply());
        else socket.write('+OK\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `redis://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function parseCommand(text: string): { args: string[]; length: number } | undefined {
  const head = /^\*(\d+)\r\n/.exec(text);
  if (!head) return undefined;
  let at = head[0].length;
  const args: string[] = [];
  for (let i = 0; i < Number(head[1]); i++) {
    const bulk = /^\$(\d+)\r\n/.exec(text.slice(at));
    if (!bulk) return undefined;
    const start = at + bulk[0].length;
    const end = start + Number(bulk[1]);
    if (text.length < end + 2) return undefined;
    args.push(text.slice(start, end));
    at = end + 2;
  }
  return { args, length: at };
}

/** A limit of 10 on a fake Redis answering `reply`, refusing while Redis cannot decide (deny); its failures. */
async function deniedWithout(reply: string) {
  const redis = await fakeRedis(() => reply);
  const errors: Error[] = [];
  const limit = redisRateLimiters(redis.url, { whenUnavailable: 'deny', onError: (e) => errors.push(e) })({
    size: 10,
    refillPerSecond: 1,
  });
  return { redis, limit, errors };
}

describe('a Redis that answers the script with something else', () => {
  const replies: Record<string, string> = {
    'tokens and time not numbers': `*3\r\n:1\r\n${bulk('nan')}${bulk('nan')}`,
    'negative tokens': `*3\r\n:1\r\n${bulk('-1')}${bulk('1700000000000')}`,
    'infinite tokens': `*3\r\n:1\r\n${bulk('1e400')}${bulk('1700000000000')}`,
    'allowed as a string': `*3\r\n${bulk('1')}${bulk('5')}${bulk('1700000000000')}`,
    'a nil reply': '$-1\r\n',
    'a number': ':5\r\n',
    'two members': `*2\r\n:1\r\n${bulk('5')}`,
  };
  for (const [what, reply] of Object.entries(replies)) {
    it(`${what}: a failure, decided by the policy (deny), with finite headers`, async () => {
      const { redis, limit, errors } = await deniedWithout(reply);
      try {
        const state = await limit.take(`${runId}odd`);
        assert.equal(state.allowed, false);
        assert.ok([state.remaining, state.reset, state.retryAfter].every(Number.isFinite), JSON.stringify(state));
        assert.equal(errors.length, 1);
      } finally {
        await limit.close();
        await redis.close();
      }
    });
  }

  it("the script's own reply shape is taken as it is (the fake answers as Redis would)", async () => {
    const { redis, limit, errors } = await deniedWithout(`*3\r\n:1\r\n${bulk('7')}${bulk(String(Date.now()))}`);
    try {
      const state = await limit.take(`${runId}odd`);
      assert.deepEqual([state.allowed, state.remaining, errors.length], [true, 7, 0]);
    } finally {
      await limit.close();
      await redis.close();
    }
  });
});
