import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

async function redisAnswers(): Promise<boolean> {
  const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

describe('rate limits shared by two nodes through REDIS_URL', () => {
  let nodeA: TestServer;
  let nodeB: TestServer;
  let available = false;
  // A tenant id of this run only, so its bucket key is not shared with anything else on the Redis server.
  const tenantId = `rl-${randomBytes(4).toString('hex')}`;
  // 6: the tenant's token on each node, granted through /oauth/token, spends one of the shared bucket.
  const settings = { REDIS_URL: redisUrl, RATE_LIMIT_SIZE: '6', RATE_LIMIT_PER_SECOND: '1' };

  before(async () => {
    available = await redisAnswers();
    if (!available) return;
    nodeA = await startTestServer('sqlite', settings);
    nodeB = await startTestServer('sqlite', settings);
  });
  after(async () => {
    await nodeA?.close();
    await nodeB?.close();
  });

  it('draws both nodes from one bucket', async (t) => {
    if (!available) {
      if (process.env.TEST_REDIS_URL) assert.fail(`TEST_REDIS_URL=${redisUrl} does not answer`);
      return t.skip(`no Redis at ${redisUrl}`);
    }
    const a = await nodeA.addTenant(tenantId, 'shared.test');
    const b = await nodeB.addTenant(tenantId, 'shared.test');
    const call = (node: TestServer, token: string) =>
      node.request({ url: '/api/v2/users-by-email?email=a%40b.co', token, headers: { host: 'shared.test' } });
    const results = [];
    for (const [node, token] of [
      [nodeA, a.token],
      [nodeB, b.token],
      [nodeA, a.token],
      [nodeB, b.token],
      [nodeA, a.token],
      [nodeB, b.token],
    ] as const) {
      const response = await call(node, token);
      results.push([response.statusCode, response.headers['x-ratelimit-remaining']]);
    }
    assert.deepEqual(results.slice(0, 4), [
      [200, '3'],
      [200, '2'],
      [200, '1'],
      [200, '0'],
    ]);
    assert.equal(results[4]![0], 429);
    assert.equal(results[5]![0], 429);
  });
});
