import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../../src/app.ts';
import { bootstrap } from '../../../src/bootstrap.ts';
import { loadConfig } from '../../../src/config.ts';
import { createServices, type Services } from '../../../src/services.ts';
import { createTestDatabase, databaseKinds, type TestDatabase } from '../../helpers/databases.ts';
import { insertFailedDeliveries } from '../../helpers/delivery-fixture.ts';
import { logLines } from '../../helpers/log-lines.ts';
import { PROCESS_CLIENT_ID, PROCESS_CLIENT_SECRET, PROCESS_ENCRYPTION_KEY } from '../../helpers/server-process.ts';
import { startWebhookReceiver, waitUntil, type WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/**
 * Two nodes on one PostgreSQL database, each running the delivery workers and the background queuing of
 * redeliveries, while redeliveries of one stream are asked of both, over and over, and its endpoint
 * fails some sends: the chunks, the requests, the claims and the recording of attempts lock the same
 * rows. Nothing may deadlock or fail (no error logged, no 5xx), and every event ends delivered.
 */

const FAILED = 600;
const DOMAIN = 'nodes.test';

describe('redeliveries asked of two nodes while both deliver', { skip: !databaseKinds().includes('postgres') }, () => {
  let database: TestDatabase;
  let receiver: WebhookReceiver;
  const nodes: Array<{ services: Services; app: FastifyInstance; logs: ReturnType<typeof logLines> }> = [];

  before(async () => {
    database = await createTestDatabase('postgres');
    receiver = await startWebhookReceiver({ keep: false });
    for (let i = 0; i < 2; i++) {
      const logs = logLines();
      const services = await createServices(
        loadConfig({
          DATA_DIR: database.dataDir,
          DATABASE_URL: database.databaseUrl,
          TENANT_DOMAIN: DOMAIN,
          BOOTSTRAP_CLIENT_ID: PROCESS_CLIENT_ID,
          BOOTSTRAP_CLIENT_SECRET: PROCESS_CLIENT_SECRET,
          ENCRYPTION_KEY: PROCESS_ENCRYPTION_KEY,
          LOG_LEVEL: 'info',
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_POLL_MS: '50',
          DELIVERY_RETRY_SCHEDULE_MS: '20,20,20',
          // Many chunks a redelivery, so that chunks, requests and recordings overlap.
          EVENT_STREAM_REDELIVERY_CHUNK_ROWS: '25',
          RATE_LIMIT_SIZE: '1000000',
          RATE_LIMIT_PER_SECOND: '1000000',
        }),
        { logStream: logs.stream },
      );
      nodes.push({ services, app: await buildApp(services), logs });
    }
  });
  after(async () => {
    for (const node of nodes) {
      await node.app.close();
      await node.services.close();
    }
    await receiver.close();
    await database.drop();
  });

  it('nothing deadlocks or fails, and every event ends delivered', async (t) => {
    const { tenant } = await bootstrap(nodes[0]!.services);
    const tokens = await Promise.all(
      nodes.map(async ({ app }) => {
        const response = await app.inject({
          method: 'POST',
          url: '/oauth/token',
          headers: { host: DOMAIN },
          payload: {
            grant_type: 'client_credentials',
            client_id: PROCESS_CLIENT_ID,
            client_secret: PROCESS_CLIENT_SECRET,
            audience: `https://${DOMAIN}/api/v2/`,
          },
        });
        assert.equal(response.statusCode, 200, response.body);
        return response.json().access_token as string;
      }),
    );
    const request = (n: number, method: 'GET' | 'POST', url: string, payload?: object) =>
      nodes[n]!.app.inject({
        method,
        url,
        headers: { host: DOMAIN, authorization: `Bearer ${tokens[n]}` },
        ...(payload ? { payload } : {}),
      });
    const created = await request(0, 'POST', '/api/v2/event-streams', {
      name: 'two nodes',
      subscriptions: [{ event_type: 'user.created' }],
      destination: {
        type: 'webhook',
        configuration: { webhook_endpoint: receiver.url, webhook_authorization: { method: 'bearer', token: 't' } },
      },
    });
    assert.equal(created.statusCode, 201, created.body);
    const streamId = created.json().id as string;
    const events = new Set(
      await insertFailedDeliveries(nodes[0]!.services.database, {
        tenantId: tenant.id,
        streamId,
        source: `urn:svc:${DOMAIN}`,
        count: FAILED,
      }),
    );

    // While the storm lasts, two sends in three fail (a 500: retried, and failed again after four).
    const received = new Map<string, number>();
    receiver.beforeAnswer((req) => {
      const id = req.json().id as string;
      received.set(id, (received.get(id) ?? 0) + 1);
    });
    receiver.program(
      Array.from({ length: 100_000 }, (_, i) => (i % 3 === 0 ? 204 : 500)),
      204,
    );

    const answers = new Map<number, number>();
    // Four seconds, and on a loaded machine (where the background queues slowly, so more are refused
    // while 10 are under way) on until more than 10 were accepted, for at most 30 s.
    const until = Date.now() + 4_000;
    const longest = Date.now() + 30_000;
    const accepted = () => answers.get(202) ?? 0;
    for (let i = 0; (Date.now() < until || accepted() <= 10) && Date.now() < longest; i++) {
      const half = new Date(Date.now() - 30_000).toISOString().slice(0, 19) + 'Z';
      const body = i % 3 === 0 ? { date_to: half } : i % 3 === 1 ? { date_from: half } : {};
      const answered = await Promise.all([
        request(i % 2, 'POST', `/api/v2/event-streams/${streamId}/redeliver`, body),
        request((i + 1) % 2, 'POST', `/api/v2/event-streams/${streamId}/redeliver`, {}),
      ]);
      for (const a of answered) answers.set(a.statusCode, (answers.get(a.statusCode) ?? 0) + 1);
      await sleep(20);
    }
    receiver.program([], 204);
    const sent = [...received.values()].reduce((sum, n) => sum + n, 0);
    const background = nodes.map(
      ({ logs }) => logs.lines.filter((line) => line.msg === 'event stream redelivery queued').length,
    );
    t.diagnostic(
      `answers during the storm: ${JSON.stringify([...answers])}; ${sent} sends of ${received.size} events; redeliveries queued in the background by each node: ${background.join(', ')}`,
    );
    assert.ok(
      background.every((n) => n > 0),
      'both nodes queued redeliveries in the background',
    );
    assert.deepEqual(
      [...answers.keys()].filter((status) => status !== 202 && status !== 409),
      [],
      'every redelivery was accepted, or refused while 10 were under way',
    );
    assert.ok((answers.get(202) ?? 0) > 10, 'redeliveries were accepted');

    // Once the storm is over, what is left failed is asked for once more, until nothing is.
    const db = nodes[0]!.services.database.db;
    const left = async () =>
      (
        await db
          .selectFrom('deliveries')
          .select(['status'])
          .where('stream_id', '=', streamId)
          .where('status', '!=', 'delivered')
          .execute()
      ).map((r) => r.status);
    await waitUntil(
      async () => {
        const statuses = await left();
        if (statuses.length > 0 && statuses.every((s) => s === 'failed')) {
          const again = await request(0, 'POST', `/api/v2/event-streams/${streamId}/redeliver`, {});
          assert.ok([202, 409].includes(again.statusCode), again.body);
        }
        return statuses.length === 0;
      },
      60_000,
      () => 'every delivery delivered',
    );
    assert.deepEqual(
      [...events].filter((id) => !received.has(id)),
      [],
      'every event arrived',
    );
    for (const [n, { logs }] of nodes.entries()) {
      const errors = logs.lines.filter((line) => Number(line.level) >= 50);
      assert.deepEqual(
        errors.map((line) => `${line.msg}: ${JSON.stringify(line.err ?? '')}`),
        [],
        `node ${n} logged no error (a deadlock, a failed chunk or record)`,
      );
    }
  });
});
