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
  const settings = {
    REDIS_URL: redisUrl,
    RATE_LIMIT_SIZE: '4',
    RATE_LIMIT_PER_SECOND: '1',
    ANONYMOUS_RATE_LIMIT_SIZE: '3',
    ANONYMOUS_RATE_LIMIT_PER_SECOND: '1',
  };

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
    // Each node's grant of the tenant's token spent one of the shared bucket: refilled (1 a second) first.
    await new Promise((resolve) => setTimeout(resolve, 2_100));
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

  it("draws a tenant's public routes from both nodes on one bucket per address (the pipeline's asynchronous path)", async (t) => {
    if (!available) {
      if (process.env.TEST_REDIS_URL) assert.fail(`TEST_REDIS_URL=${redisUrl} does not answer`);
      return t.skip(`no Redis at ${redisUrl}`);
    }
    const publicTenant = `pub-${randomBytes(4).toString('hex')}`;
    await nodeA.addTenant(publicTenant, 'public.test');
    await nodeB.addTenant(publicTenant, 'public.test');
    const statuses = [];
    for (const node of [nodeA, nodeB, nodeA, nodeB, nodeA]) {
      const response = await node.app.inject({
        url: '/.well-known/jwks.json',
        remoteAddress: '198.51.100.20',
        headers: { host: 'public.test' },
      });
      statuses.push(response.statusCode);
    }
    assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
  });
});
