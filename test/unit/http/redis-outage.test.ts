import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../../../src/logger.ts';
import { RedisOutage } from '../../../src/http/redis-outage.ts';

/** The server's logger writing JSON lines into an array. */
function capturedLogger() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n')) {
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  // pino writes synchronously to a plain stream, so lines are there as soon as the call returns.
  return { logger: createLogger({ logLevel: 'info' }, { stream }), lines };
}

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

describe('RedisOutage', () => {
  it('logs an outage once when it starts and once when it ends, whatever the failures and decisions between', () => {
    const { logger, lines } = capturedLogger();
    const time = clock();
    const outage = new RedisOutage('redis://127.0.0.1:6379', 'local', logger, time.now);
    assert.equal(outage.ongoing, false);
    outage.recovered(); // Redis answering while nothing was wrong: nothing to say
    assert.equal(lines.length, 0);

    outage.failed(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    for (let i = 0; i < 5; i++) {
      outage.failed(new Error('Connection is closed.'));
      outage.decidedWithoutRedis();
      time.advance(500);
    }
    assert.equal(outage.ongoing, true);
    outage.recovered();
    outage.recovered();
    assert.equal(outage.ongoing, false);

    assert.equal(lines.length, 2);
    const [start, end] = lines as [Record<string, unknown>, Record<string, unknown>];
    assert.equal(start.level, 40); // warn
    assert.equal(start.error, 'connect ECONNREFUSED 127.0.0.1:6379');
    assert.equal(start.redis, 'redis://127.0.0.1:6379');
    assert.equal(start.whenUnavailable, 'local');
    assert.match(String(start.msg), /Redis is unavailable; until it answers again each node limits requests/);
    assert.equal(end.level, 30); // info
    assert.equal(end.outageMs, 2500);
    assert.equal(end.decisionsWithoutRedis, 5);
    assert.match(String(end.msg), /Redis answers again after 2\.5 s; 5 requests were decided without it/);
  });

  it('counts each outage on its own', () => {
    const { logger, lines } = capturedLogger();
    const time = clock();
    const outage = new RedisOutage('redis://127.0.0.1:6379', 'allow', logger, time.now);
    outage.failed(new Error('first'));
    outage.decidedWithoutRedis();
    outage.decidedWithoutRedis();
    outage.recovered();
    outage.failed(new Error('second'));
    time.advance(100);
    outage.decidedWithoutRedis();
    outage.recovered();
    assert.deepEqual(
      lines.map((line) => [line.level, line.error ?? line.decisionsWithoutRedis]),
      [
        [40, 'first'],
        [30, 2],
        [40, 'second'],
        [30, 1],
      ],
    );
    assert.match(String(lines[0]!.msg), /requests are let through unlimited/);
  });

  it('never logs the password of the Redis URL, from the URL or an error echoing it', () => {
    const { logger, lines } = capturedLogger();
    for (const url of ['redis://:s3cr%40t@cache.internal:6380/2', 'redis://cache.internal:6380?password=s3cr%40t']) {
      const outage = new RedisOutage(url, 'deny', logger);
      outage.failed(new Error('WRONGPASS s3cr@t and s3cr%40t are not it'));
      outage.recovered();
    }
    const text = lines.map((line) => JSON.stringify(line)).join('\n');
    assert.doesNotMatch(text, /s3cr/);
    assert.equal(lines[0]!.redis, 'redis://[redacted]@cache.internal:6380/2');
    assert.equal(lines[0]!.error, 'WRONGPASS [redacted] and [redacted] are not it');
    assert.match(String(lines[0]!.msg), /requests are refused with 429/);
  });

  it('works without a logger', () => {
    const outage = new RedisOutage('redis://127.0.0.1:6379', 'allow', undefined);
    outage.failed(new Error('down'));
    assert.equal(outage.ongoing, true);
    outage.recovered();
    assert.equal(outage.ongoing, false);
  });
});
