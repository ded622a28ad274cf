import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { claimDue } from '../../../../src/modules/event-streams/store/claim.ts';
import { DeliveryWorker } from '../../../../src/modules/event-streams/delivery/worker.ts';
import type { Logger } from '../../../../src/logger.ts';
import { databaseKinds } from '../../../helpers/databases.ts';
import { insertDueDeliveries } from '../../../helpers/delivery-fixture.ts';
import { startTestServer, type TestServer } from '../../../helpers/server.ts';
import { startWebhookReceiver, waitUntil, type WebhookReceiver } from '../../../helpers/webhook-receiver.ts';

const webhook = (url: string) => ({
  type: 'webhook',
  configuration: { webhook_endpoint: url, webhook_authorization: { method: 'bearer', token: 'fairness-token' } },
});

const PASSWORD = 'correct horse battery';

async function createStream(
  server: TestServer,
  name: string,
  url: string,
  eventType = 'user.created',
): Promise<string> {
  const response = await server.request({
    method: 'POST',
    url: '/api/v2/event-streams',
    payload: { name, subscriptions: [{ event_type: eventType }], destination: webhook(url) },
  });
  assert.equal(response.statusCode, 201, response.body);
  return response.json().id as string;
}

/** `count` due deliveries to `streamId`, one event each; the worker finds them by its poll. */
const queue = (server: TestServer, streamId: string, count: number) =>
  insertDueDeliveries(server.services.database, {
    tenantId: server.tenant.id,
    streamId,
    source: `urn:svc:${server.domain}`,
    count,
  });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const kind of databaseKinds()) {
  describe(`endpoints that never answer beside a healthy one (${kind})`, () => {
    let server: TestServer;
    let healthy: WebhookReceiver;
    const hung: WebhookReceiver[] = [];
    before(async () => {
      healthy = await startWebhookReceiver();
      for (let i = 0; i < 8; i++) {
        const receiver = await startWebhookReceiver();
        // The connection is taken and the request read; no answer ever comes.
        receiver.beforeAnswer(() => new Promise(() => {}));
        hung.push(receiver);
      }
      // The default concurrency (32 slots, 4 per stream) and a long timeout: a hung send holds its slot 10 s.
      server = await startTestServer(kind, { DELIVERY_ALLOW_HTTP: 'true', DELIVERY_TIMEOUT_MS: '10000' });
    });
    after(async () => {
      // Closing the receivers cuts the hung connections, so the worker stops without waiting out its timeouts.
      for (const receiver of [...hung, healthy]) await receiver.close();
      await server.close();
    });

    it("delivers the healthy stream's events within its own send time", async () => {
      for (let i = 0; i < hung.length; i++)
        await queue(server, await createStream(server, `hung-${i}`, hung[i]!.url), 20);
      await createStream(server, 'healthy', healthy.url, 'user.updated');
      // The hung streams hold what they can take: 24 sends (the old claim let them take all 32).
      await waitUntil(
        () => hung.reduce((n, r) => n + r.requests.length, 0) >= 24,
        10_000,
        () => 'the hung endpoints to be sent to',
      );

      const user = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: { connection: 'Username-Password-Authentication', email: 'fair@example.com', password: PASSWORD },
      });
      assert.equal(user.statusCode, 201, user.body);
      const userId = user.json().user_id as string;
      for (let i = 1; i <= 3; i++) {
        const sent = Date.now();
        const updated = await server.request({
          method: 'PATCH',
          url: `/api/v2/users/${encodeURIComponent(userId)}`,
          payload: { name: `fair ${i}` },
        });
        assert.equal(updated.statusCode, 200, updated.body);
        const [received] = (await healthy.waitFor((r) => r.length >= i, 9_000)).slice(i - 1);
        assert.equal(received!.json().data.object.name, `fair ${i}`);
        assert.ok(
          received!.at - sent < 2_000,
          `event ${i} arrived ${received!.at - sent} ms after its change (the hung sends time out only after 10 s)`,
        );
      }
      assert.ok(
        hung.every((r) => r.requests.length <= 4),
        'no hung stream got more than its cap',
      );
    });
  });

  describe(`a failing endpoint's circuit (${kind})`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await startWebhookReceiver();
      server = await startTestServer(kind, {
        // Retries come due only after the window watched: what it sees is the breaker's doing.
        DELIVERY_ALLOW_HTTP: 'true',
        DELIVERY_RETRY_SCHEDULE_MS: '3000,3000,3000',
        DELIVERY_POLL_MS: '50',
        DELIVERY_BREAKER_FAILURES: '3',
        DELIVERY_BREAKER_COOLDOWN_MS: '200',
      });
    });
    after(async () => {
      await server.close();
      await receiver.close();
    });

    it('backs off after a run of failures, probes one at a time, and resumes once the endpoint recovers', async () => {
      receiver.program([], 503);
      const streamId = await createStream(server, 'breaker', receiver.url);
      const ids = await queue(server, streamId, 20);
      // Without a breaker, each of the 20 deliveries is attempted at once: 20 attempts within this window.
      await sleep(2_000);
      const attempts = receiver.requests.length;
      assert.ok(attempts >= 3, `the run that opens the circuit was sent (${attempts})`);
      assert.ok(attempts <= 12, `the open circuit holds the stream's deliveries back: ${attempts} attempts in 2 s`);
      const stream = await server.services.database.db
        .selectFrom('event_streams')
        .selectAll()
        .where('id', '=', streamId)
        .executeTakeFirstOrThrow();
      assert.ok(stream.consecutive_failures >= 3);
      assert.ok(stream.circuit_open_until !== null);
      // Probes go one at a time: after the first burst, no two attempts overlap closer than the cool-down.
      // The run that opened it came in one burst; after it, probes go one at a time, a cool-down apart.
      const times = receiver.requests.map((r) => r.at - receiver.requests[0]!.at);
      // The burst ends at the first pause of a cool-down: sends claimed before the failures were recorded
      // still arrive, later on a loaded machine. Every attempt after it is a probe.
      const pause = times.findIndex((t, i) => i > 0 && t - times[i - 1]! >= 200);
      const probes = pause < 0 ? [] : times.slice(pause);
      // How many go before the first failures are recorded depends on the machine's speed; the bound is the window's.
      assert.ok(times.length - probes.length <= 12, `the burst before the circuit opened: ${times.join(' ')} ms`);
      for (let i = 1; i < probes.length; i++)
        assert.ok(probes[i]! - probes[i - 1]! >= 200, `probes at ${times.join(' ')} ms`);

      receiver.program([], 204);
      await waitUntil(
        async () => {
          const rows = await server.services.database.db
            .selectFrom('deliveries')
            .select('status')
            .where('stream_id', '=', streamId)
            .execute();
          return rows.filter((r) => r.status === 'delivered').length === ids.length;
        },
        20_000,
        () => 'every delivery to go once the endpoint answers',
      );
      const closed = await server.services.database.db
        .selectFrom('event_streams')
        .selectAll()
        .where('id', '=', streamId)
        .executeTakeFirstOrThrow();
      assert.deepEqual([closed.consecutive_failures, closed.circuit_open_until, closed.status], [0, null, 'enabled']);
    });
  });

  describe(`a stream disabled after a run of failures (${kind})`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    let worker: DeliveryWorker;
    const warnings: string[] = [];
    before(async () => {
      receiver = await startWebhookReceiver();
      // The test runs the worker itself, to read what it logs.
      server = await startTestServer(kind, { DELIVERY_ALLOW_HTTP: 'true', DELIVERY_WORKER: 'false' });
      const settings = {
        ...server.services.config,
        deliveryRetryScheduleMs: [20, 20, 20],
        deliveryPollMs: 50,
        deliveryBreakerFailures: 1000,
        deliveryDisableAfterFailures: 4,
      };
      // Warnings kept; an error fails the test.
      const logger = {
        warn: (_fields: unknown, message: string) => void warnings.push(message),
        error: (fields: { err: unknown }) => {
          throw fields.err;
        },
      } as unknown as Logger;
      worker = new DeliveryWorker(
        server.services.database,
        server.services.secretBox,
        settings,
        undefined,
        undefined,
        logger,
      );
      worker.start();
    });
    after(async () => {
      await worker.stop();
      await server.close();
      await receiver.close();
    });

    it('shows the stream disabled with its reason, logs it, sends nothing more, and resumes on PATCH', async () => {
      receiver.program([], 503);
      const streamId = await createStream(server, 'auto-disable', receiver.url);
      const ids = await queue(server, streamId, 3);
      const get = async () => {
        const response = await server.request({ method: 'GET', url: `/api/v2/event-streams/${streamId}` });
        assert.equal(response.statusCode, 200, response.body);
        return response.json();
      };
      await waitUntil(
        async () => (await get()).status === 'disabled',
        10_000,
        () => 'the stream to be disabled',
      );
      const disabled = await get();
      assert.equal(disabled.status_reason, 'Disabled after 4 consecutive failed delivery attempts.');
      assert.deepEqual(warnings, [
        `event stream ${streamId} disabled: Disabled after 4 consecutive failed delivery attempts. PATCH {"status":"enabled"} enables it again.`,
      ]);
      // Deliveries with attempts left wait while the stream is disabled.
      await sleep(300);
      const sent = receiver.requests.length;
      await sleep(500);
      assert.equal(receiver.requests.length, sent, 'nothing is sent to a disabled stream');
      const pending = await server.services.database.db
        .selectFrom('deliveries')
        .select('event_id')
        .where('stream_id', '=', streamId)
        .where('status', '=', 'pending')
        .execute();
      assert.ok(pending.length > 0, 'some deliveries are left to send');

      receiver.program([], 204);
      const enabled = await server.request({
        method: 'PATCH',
        url: `/api/v2/event-streams/${streamId}`,
        payload: { status: 'enabled' },
      });
      assert.equal(enabled.statusCode, 200, enabled.body);
      assert.equal(enabled.json().status, 'enabled');
      assert.equal('status_reason' in enabled.json(), false);
      assert.equal('status_reason' in (await get()), false);
      await waitUntil(
        async () => {
          const rows = await server.services.database.db
            .selectFrom('deliveries')
            .select('status')
            .where('stream_id', '=', streamId)
            .where(
              'event_id',
              'in',
              pending.map((p) => p.event_id),
            )
            .execute();
          return rows.every((r) => r.status === 'delivered');
        },
        10_000,
        () => 'the waiting deliveries to go once the stream is enabled',
      );
      assert.ok(ids.length === 3);
      const row = await server.services.database.db
        .selectFrom('event_streams')
        .selectAll()
        .where('id', '=', streamId)
        .executeTakeFirstOrThrow();
      assert.deepEqual([row.consecutive_failures, row.circuit_open_until, row.status_reason], [0, null, null]);
      assert.equal(warnings.length, 1);
    });
  });
}

describe(
  "PostgreSQL leases use the database's clock",
  { skip: !databaseKinds().includes('postgres') && 'PostgreSQL only' },
  () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer('postgres', { DELIVERY_ALLOW_HTTP: 'true', DELIVERY_WORKER: 'false' });
    });
    after(() => server.close());

    it("claims what is due by the database's now() and leases until its now() plus the lease, whatever this process's clock says", async () => {
      const streamId = await createStream(server, 'clock', 'http://127.0.0.1:9/hook');
      await queue(server, streamId, 2);
      const db = server.services.database.db;
      const databaseNow = async () =>
        Date.parse((await sql<{ now: Date }>`select now() as now`.execute(db)).rows[0]!.now.toISOString());
      const RealDate = Date;
      const limits = { limit: 10, perStream: 10, reserve: 0, breakerFailures: 1000, running: new Map() };
      /** This process's clock, `offset` ms off the real one. */
      const skewed = (offset: number) =>
        class extends RealDate {
          constructor(...args: unknown[]) {
            if (args.length === 0) super(RealDate.now() + offset);
            else super(...(args as [string]));
          }
          static override now() {
            return RealDate.now() + offset;
          }
        } as DateConstructor;
      // An hour behind the database's: by this clock, nothing would be due.
      globalThis.Date = skewed(-3_600_000);
      try {
        const before = await databaseNow();
        const claimed = await claimDue(server.services.database, { leaseMs: 60_000 }, limits);
        const afterClaim = await databaseNow();
        assert.equal(claimed.length, 2, "due by the database's clock");
        for (const claim of claimed) {
          const lease = RealDate.parse(claim.claimed_until);
          assert.ok(
            lease >= before + 60_000 - 1 && lease <= afterClaim + 60_000,
            `lease ${claim.claimed_until} is the database's now() plus 60 s`,
          );
        }
        // And the leases hold by the database's clock, however far this process's clock runs ahead.
        globalThis.Date = skewed(3_600_000);
        assert.deepEqual(await claimDue(server.services.database, { leaseMs: 60_000 }, limits), []);
      } finally {
        globalThis.Date = RealDate;
      }
    });
  },
);
