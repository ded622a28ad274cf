import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import fs from 'node:fs';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Kysely, PostgresDialect, SqliteDialect, sql, type CompiledQuery } from 'kysely';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { Readiness } from '../../src/observability/readiness.ts';
import type { Schema } from '../../src/db/schema.ts';
import { OutboxStore } from '../../src/mail/store.ts';
import { DeliveryStore } from '../../src/modules/event-streams/store/deliveries.ts';
import { createTestDatabase, eachDatabase, type TestDatabase } from '../helpers/databases.ts';
import { startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { eventually } from '../helpers/eventually.ts';
import { ADMIN_ID, ADMIN_SECRET, startTestServer, type TestServer } from '../helpers/server.ts';
import { freePort, startServerProcess } from '../helpers/server-process.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/** One request over a real socket, with any Host header (fetch would not send a made-up one). */
function call(
  port: number,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: unknown },
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path,
        headers: {
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            headers: response.headers,
          }),
        );
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

/** A scrape, as Prometheus reads it: each sample line `name{labels} value` → value. */
type Samples = Map<string, number>;

async function scrape(port: number): Promise<{ samples: Samples; text: string }> {
  const response = await call(port, { path: '/metrics' });
  assert.equal(response.status, 200, response.body);
  assert.match(String(response.headers['content-type']), /^text\/plain/);
  const samples: Samples = new Map();
  for (const line of response.body.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return { samples, text: response.body };
}

const value = (samples: Samples, series: string) => samples.get(series) ?? 0;

/** Label values of every sample: `{a="x",b="y"}` → ['x', 'y']. */
function labelValues(samples: Samples): string[] {
  return [...samples.keys()].flatMap((series) => [...series.matchAll(/="((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!));
}

describe('metrics and readiness', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`the metrics endpoint (${kind})`, () => {
      let server: TestServer;
      let apiPort: number;
      let metricsPort: number;
      let delivered: WebhookReceiver;
      let failing: WebhookReceiver;
      let dns: TestDnsServer;
      before(async () => {
        dns = await startDnsServer();
        server = await startTestServer(kind, {
          DNS_SERVERS: dns.address,
          CUSTOM_DOMAIN_RECHECK_INITIAL_MS: '100',
          CUSTOM_DOMAIN_RECHECK_MAX_MS: '200',
          METRICS_PORT: '0',
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_RETRY_SCHEDULE_MS: '50',
          DELIVERY_POLL_MS: '20',
          MAIL_POLL_MS: '20',
          TOKEN_FAILURES_PER_CLIENT_PER_MINUTE: '2',
          ANONYMOUS_RATE_LIMIT_SIZE: '5',
          ANONYMOUS_RATE_LIMIT_PER_SECOND: '1',
        });
        await server.app.listen({ port: 0, host: '127.0.0.1' });
        apiPort = (server.app.server.address() as AddressInfo).port;
        metricsPort = server.metricsPort!;
        assert.ok(metricsPort > 0 && metricsPort !== apiPort);
        delivered = await startWebhookReceiver();
        delivered.program([500], 204);
        failing = await startWebhookReceiver();
        failing.program([], 500);
      });
      after(async () => {
        await server.close();
        await delivered.close();
        await failing.close();
        await dns.close();
      });

      const api = (options: Parameters<typeof call>[1], token: string | null = server.adminToken) =>
        call(apiPort, {
          ...options,
          headers: {
            host: server.domain,
            ...(token === null ? {} : { authorization: `Bearer ${token}` }),
            ...options.headers,
          },
        });
      const grant = (secret: string) =>
        api(
          {
            method: 'POST',
            path: '/oauth/token',
            body: {
              grant_type: 'client_credentials',
              client_id: ADMIN_ID,
              client_secret: secret,
              audience: `https://${server.domain}/api/v2/`,
            },
          },
          null,
        );

      it('counts requests by route template, token grants and refusals, and rate-limit refusals', async () => {
        const { samples: before } = await scrape(metricsPort);
        const userId = `svc|${randomBytes(12).toString('hex')}`;

        assert.equal((await grant(ADMIN_SECRET)).status, 200);
        // Two wrong secrets spend the client's two failures; the third attempt is refused before comparing.
        assert.equal((await grant('wrong-secret-1')).status, 401);
        assert.equal((await grant('wrong-secret-2')).status, 401);
        assert.equal((await grant('wrong-secret-3')).status, 429);

        for (let i = 0; i < 2; i++)
          assert.equal((await api({ path: `/api/v2/users/${encodeURIComponent(userId)}` })).status, 404);
        assert.equal((await api({ path: `/no/such/${userId}` })).status, 404);

        // The scrape is not served by the API, with or without a token: no route.
        assert.equal((await api({ path: '/metrics' }, null)).status, 404);
        assert.equal((await api({ path: '/metrics' })).status, 404);

        // Anonymous requests draw on the address's bucket of 5: some of these 9 are refused.
        let tooMany = 0;
        for (let i = 0; i < 9; i++)
          if ((await api({ path: '/api/v2/users-by-email?email=a%40example.com' }, null)).status === 429) tooMany++;
        assert.ok(tooMany >= 3, `the anonymous bucket refused ${tooMany}`);

        const now = (await scrape(metricsPort)).samples;
        const moved = (series: string) => value(now, series) - value(before, series);
        assert.equal(moved('tenantry_token_requests_total{outcome="granted"}'), 1);
        assert.equal(moved('tenantry_token_requests_total{outcome="invalid_client"}'), 2);
        assert.equal(moved('tenantry_token_requests_total{outcome="too_many_attempts"}'), 1);
        assert.equal(moved('tenantry_rate_limit_refusals_total{bucket="token_failures"}'), 1);
        assert.equal(moved('tenantry_rate_limit_refusals_total{bucket="anonymous"}'), tooMany);
        assert.equal(moved('tenantry_rate_limit_refusals_total{bucket="tenant"}'), 0);
        assert.equal(
          moved('tenantry_http_requests_total{route="/api/v2/users/:id",method="GET",status="404"}'),
          2,
          'by the matched template, never the URL',
        );
        assert.equal(moved('tenantry_http_requests_total{route="unmatched",method="GET",status="404"}'), 3);
        assert.equal(moved('tenantry_http_requests_total{route="/oauth/token",method="POST",status="401"}'), 2);
        assert.equal(
          moved('tenantry_http_requests_total{route="/api/v2/users-by-email",method="GET",status="429"}'),
          tooMany,
        );
        assert.equal(
          moved('tenantry_http_requests_total{route="/api/v2/users-by-email",method="GET",status="401"}'),
          9 - tooMany,
        );
        assert.equal(
          moved('tenantry_http_request_duration_seconds_count{route="/api/v2/users/:id",method="GET"}'),
          2,
          'the latency histogram saw them too',
        );
        assert.ok(value(now, 'nodejs_eventloop_lag_seconds') >= 0, 'the default metrics are there');
        assert.ok(now.has('nodejs_eventloop_lag_seconds'));
        if (kind === 'postgres') assert.ok(value(now, 'tenantry_db_pool_connections{state="total"}') >= 1);
        else assert.ok(!now.has('tenantry_db_pool_connections{state="total"}'), 'SQLite has no pool');
      });

      it('keeps ids, emails, tenants and hosts out of labels, and the series bounded', async () => {
        const secret = randomBytes(8).toString('hex');
        const paths = (i: number) => [
          `/api/v2/users/svc%7C${secret}${i}`,
          `/api/v2/users-by-email?email=${secret}${i}%40example.com`,
          `/${secret}${i}/x`,
          `/api/v2/event-streams/est_${secret}${i}`,
        ];
        const hosts = (i: number) => [server.domain, `${secret}${i}.example`, `${secret}${i}`, `[::1]:${i + 1}`];
        const round = async (i: number) => {
          for (const path of paths(i))
            for (const host of hosts(i)) await api({ path, headers: { host } }, i % 2 ? server.adminToken : null);
        };
        await round(0);
        const first = await scrape(metricsPort);
        for (let i = 1; i < 6; i++) await round(i);
        const later = await scrape(metricsPort);
        for (const label of labelValues(later.samples)) {
          assert.ok(!label.includes(secret), `a label carries a request's id or host: ${label}`);
          assert.ok(!label.includes(server.tenant.id) || label === server.tenant.id, label);
          assert.ok(!label.includes(server.domain), `a label carries the tenant's host: ${label}`);
        }
        assert.ok(!later.text.includes(secret));
        // Five more rounds of new ids and hosts add no series (a rate-limit refusal may add its status once).
        const tenantry = (s: Samples) => [...s.keys()].filter((k) => k.startsWith('tenantry_http_requests_total'));
        assert.ok(
          tenantry(later.samples).length <= tenantry(first.samples).length + 4,
          `${tenantry(first.samples).length} series grew to ${tenantry(later.samples).length}`,
        );
        assert.ok(later.samples.size < 2000, `${later.samples.size} series`);
      });

      it('counts webhook deliveries by outcome, and the backlog of due deliveries', async () => {
        const stream = async (name: string, url: string) => {
          const created = await api({
            method: 'POST',
            path: '/api/v2/event-streams',
            body: {
              name,
              subscriptions: [{ event_type: 'user.created' }],
              destination: {
                type: 'webhook',
                configuration: {
                  webhook_endpoint: url,
                  webhook_authorization: { method: 'bearer', token: 'metrics-token' },
                },
              },
            },
          });
          assert.equal(created.status, 201, created.body);
          return JSON.parse(created.body).id as string;
        };
        const { samples: before } = await scrape(metricsPort);
        const streams = [await stream('metrics-ok', delivered.url), await stream('metrics-down', failing.url)];
        const user = await api({
          method: 'POST',
          path: '/api/v2/users',
          body: {
            connection: 'Username-Password-Authentication',
            email: `metrics-${Date.now()}@example.com`,
            password: 'correct horse battery',
          },
        });
        assert.equal(user.status, 201, user.body);
        // delivered: 500 then 204; failing: 500 twice (one retry in the schedule), then failed.
        const moved = await eventually('the deliveries to be recorded', async () => {
          const { samples } = await scrape(metricsPort);
          const delta = (outcome: string) =>
            value(samples, `tenantry_webhook_deliveries_total{outcome="${outcome}"}`) -
            value(before, `tenantry_webhook_deliveries_total{outcome="${outcome}"}`);
          const counts = { delivered: delta('delivered'), retry: delta('retry'), failed: delta('failed') };
          return counts.delivered + counts.failed >= 2 ? counts : undefined;
        });
        assert.deepEqual(moved, { delivered: 1, retry: 2, failed: 1 });
        // The claims that took them (test/modules/event-streams/delivery/worker.test.ts counts them exactly).
        const claimed = (await scrape(metricsPort)).samples;
        const claims = (found: string) => `tenantry_webhook_delivery_claims_total{found="${found}"}`;
        assert.ok(value(claimed, claims('some')) - value(before, claims('some')) >= 1);
        assert.ok(claimed.has(claims('none')), 'the polls that found nothing');
        assert.equal(delivered.requests.length, 2);
        assert.equal(failing.requests.length, 2);
        for (const id of streams) await api({ method: 'DELETE', path: `/api/v2/event-streams/${id}` });

        // A backlog: deliveries of a stream no worker can send yet, due for a minute.
        const stopped = await stream('metrics-backlog', failing.url);
        const db = server.services.database.db;
        await server.services.deliveryWorker!.stop();
        const dueAt = new Date(Date.now() - 60_000).toISOString();
        await db
          .insertInto('events')
          .values(
            [1, 2, 3].map((i) => ({
              id: `evt_metrics${i}${randomBytes(4).toString('hex')}`,
              tenant_id: server.tenant.id,
              type: 'user.created',
              time: dueAt,
              source: `urn:svc:${server.domain}`,
              data: '{}',
              purpose: null,
            })),
          )
          .execute();
        const events = await db.selectFrom('events').select('id').where('id', 'like', 'evt_metrics%').execute();
        await db
          .insertInto('deliveries')
          .values(
            events.map(({ id }) => ({
              stream_id: stopped,
              event_id: id,
              event_type: 'user.created',
              event_time: dueAt,
              status: 'pending' as const,
              attempt_count: 0,
              attempt_seq: 0,
              next_attempt_at: dueAt,
              claimed_until: null,
              updated_at: dueAt,
            })),
          )
          .execute();
        const { samples } = await scrape(metricsPort);
        assert.equal(value(samples, 'tenantry_webhook_backlog_due'), 3);
        const age = value(samples, 'tenantry_webhook_backlog_oldest_due_age_seconds');
        assert.ok(age >= 59 && age < 120, `oldest due for ${age} s`);
      });

      it('counts emails by outcome, and the mail backlog', async () => {
        const { samples: before } = await scrape(metricsPort);
        const user = await api({
          method: 'POST',
          path: '/api/v2/users',
          body: {
            connection: 'Username-Password-Authentication',
            email: `metrics-mail-${Date.now()}@example.com`,
            password: 'correct horse battery',
            verify_email: true,
          },
        });
        assert.equal(user.status, 201, user.body);
        const sent = await eventually('the verification email to be sent', async () => {
          const { samples } = await scrape(metricsPort);
          const moved =
            value(samples, 'tenantry_emails_total{outcome="sent"}') -
            value(before, 'tenantry_emails_total{outcome="sent"}');
          return moved > 0 ? moved : undefined;
        });
        assert.equal(sent, 1);
        const { samples } = await scrape(metricsPort);
        assert.equal(value(samples, 'tenantry_email_backlog{state="pending"}'), 0);
        assert.equal(value(samples, 'tenantry_email_backlog{state="due"}'), 0);
        assert.ok(samples.has('tenantry_email_backlog{state="pending"}'));
      });

      it('counts background custom-domain re-checks by outcome, without the hostname', async () => {
        const { samples: before } = await scrape(metricsPort);
        const hostname = `metrics-${randomBytes(4).toString('hex')}.recheck.test`;
        const created = await api({
          method: 'POST',
          path: '/api/v2/custom-domains',
          body: { domain: hostname, type: 'svc_managed_certs' },
        });
        assert.equal(created.status, 201, created.body);
        const rechecks = async (outcome: string) =>
          value((await scrape(metricsPort)).samples, `tenantry_custom_domain_rechecks_total{outcome="${outcome}"}`) -
          value(before, `tenantry_custom_domain_rechecks_total{outcome="${outcome}"}`);
        await eventually('a re-check finding nothing', async () =>
          (await rechecks('pending_verification')) >= 1 ? true : undefined,
        );
        dns.setCname(hostname, JSON.parse(created.body).verification.methods[0].record);
        await eventually('a re-check finding the record', async () =>
          (await rechecks('ready')) >= 1 ? true : undefined,
        );
        assert.equal(await rechecks('ready'), 1, 'a ready domain is not checked again');
        assert.equal(await rechecks('error'), 0);
        assert.ok(!(await scrape(metricsPort)).text.includes(hostname));
      });

      it('answers /health/ready 200 when ready, 503 without a migration, and 503 while draining, on both ports', async () => {
        for (const port of [apiPort, metricsPort]) {
          const ready = await call(port, { path: '/health/ready', headers: { host: 'anything.example' } });
          assert.equal(ready.status, 200, ready.body);
          assert.deepEqual(JSON.parse(ready.body), { status: 'ready' });
        }
        assert.equal((await call(metricsPort, { path: '/nothing' })).status, 404);
        assert.equal((await call(metricsPort, { method: 'POST', path: '/metrics' })).status, 405);
        // Draining is the last state a node is in: checked last.
        server.services.readiness.drain();
        for (const port of [apiPort, metricsPort]) {
          const draining = await call(port, { path: '/health/ready' });
          assert.equal(draining.status, 503);
          assert.deepEqual(JSON.parse(draining.body), { status: 'draining' });
        }
        // Liveness is another question: the process still answers.
        assert.equal((await call(apiPort, { path: '/health' })).status, 200);
      });
    });

    describe(`readiness before migrations, and no metrics without METRICS_PORT (${kind})`, () => {
      let server: TestServer;
      let port: number;
      before(async () => {
        server = await startTestServer(kind);
        await server.app.listen({ port: 0, host: '127.0.0.1' });
        port = (server.app.server.address() as AddressInfo).port;
      });
      after(() => server.close());

      it('keeps nothing', () => {
        assert.equal(server.metricsPort, undefined);
        assert.equal(server.services.metrics.enabled, false);
      });

      it('answers database_unavailable while the database cannot be reached', async () => {
        const { database, logger } = server.services;
        // A second connection to the same database, closed: every probe through it fails.
        const closed = openDatabase({
          databaseUrl: server.database.databaseUrl,
          dataDir: server.database.dataDir,
        });
        const readiness = new Readiness(closed, logger);
        assert.equal(await readiness.state(), 'ready');
        await closed.close();
        assert.equal(await readiness.state(), 'database_unavailable');
        assert.equal(await new Readiness(database, logger).state(), 'ready');
      });

      it('reads the backlogs at scrape time through their indexes', async () => {
        // The stores' own queries, captured as they run, then explained on the same database.
        const { database } = server.services;
        const queries: CompiledQuery[] = [];
        const log = (event: { query: CompiledQuery }) => void queries.push(event.query);
        const db =
          database.dialect === 'sqlite'
            ? new Kysely<Schema>({ dialect: new SqliteDialect({ database: database.sqlite! }), log })
            : new Kysely<Schema>({ dialect: new PostgresDialect({ pool: database.pool! }), log });
        const capturing: Database = { ...database, db };
        const at = new Date().toISOString();
        assert.deepEqual(await new DeliveryStore(capturing).dueBacklog(at), { due: 0, oldestDueAt: undefined });
        assert.deepEqual(await new OutboxStore(capturing).backlog(at), { pending: 0, due: 0 });
        assert.equal(queries.length, 2);
        const plans: string[] = [];
        if (database.dialect === 'sqlite') {
          for (const query of queries)
            plans.push(
              database
                .sqlite!.prepare(`EXPLAIN QUERY PLAN ${query.sql}`)
                .all(...(query.parameters as unknown[]))
                .map((row) => (row as { detail: string }).detail)
                .join('\n'),
            );
        } else {
          const client = await database.pool!.connect();
          try {
            // Empty tables: without this the planner reads them whole, which says nothing about a big backlog.
            await client.query('SET enable_seqscan = off');
            for (const query of queries) {
              const { rows } = await client.query(`EXPLAIN ${query.sql}`, query.parameters as unknown[]);
              plans.push(rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n'));
            }
            await client.query('RESET enable_seqscan');
          } finally {
            client.release();
          }
        }
        // Either index of pending deliveries: on empty tables PostgreSQL may cost the partial one
        // (deliveries_pending, every pending delivery) as low as the due range of deliveries_due.
        assert.match(plans[0]!, /deliveries_due|deliveries_pending/, plans[0]);
        assert.match(plans[1]!, /email_outbox_due/, plans[1]);
        for (const plan of plans)
          assert.doesNotMatch(plan, /\bSCAN (deliveries|email_outbox)\b(?! USING)|Seq Scan/, plan);
      });

      it('answers 503 until every migration has run', async () => {
        const db = server.services.database.db;
        const last = await db
          .selectFrom('tenantry_migrations' as never)
          .select(sql<string>`max(name)`.as('name'))
          .executeTakeFirstOrThrow();
        const name = (last as { name: string }).name;
        const row = await sql<{
          name: string;
          timestamp: string;
        }>`select name, timestamp from tenantry_migrations where name = ${name}`.execute(db);
        await sql`delete from tenantry_migrations where name = ${name}`.execute(db);
        const pending = await call(port, { path: '/health/ready' });
        assert.equal(pending.status, 503);
        assert.deepEqual(JSON.parse(pending.body), { status: 'migrations_pending' });
        const { timestamp } = row.rows[0]!;
        await sql`insert into tenantry_migrations (name, timestamp) values (${name}, ${timestamp})`.execute(db);
        const ready = await call(port, { path: '/health/ready' });
        assert.equal(ready.status, 200, ready.body);
      });
    });
  }),
);

/** The TCP ports process `pid` listens on, from /proc (Linux): its socket inodes in the LISTEN state. */
function listeningPorts(pid: number): number[] {
  const inodes = new Set(
    fs
      .readdirSync(`/proc/${pid}/fd`)
      .map((fd) => {
        try {
          return /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
        } catch {
          return undefined;
        }
      })
      .filter((inode): inode is string => inode !== undefined),
  );
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of fs.readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[3] === '0A' && inodes.has(fields[9]!)) ports.push(parseInt(fields[1]!.split(':')[1]!, 16));
    }
  }
  return ports.sort((a, b) => a - b);
}

describe('the server process opens the metrics port only when told', () => {
  let database: TestDatabase;
  before(async () => {
    database = await createTestDatabase('sqlite');
  });
  after(() => database.drop());

  it('listens on PORT alone without METRICS_PORT, and on both with it', async () => {
    const plain = await startServerProcess(database);
    try {
      const port = Number(new URL(plain.base).port);
      assert.deepEqual(listeningPorts(plain.pid), [port]);
      assert.equal((await call(port, { path: '/metrics' })).status, 404);
    } finally {
      await plain.stop();
    }
    const metricsPort = await freePort();
    const measured = await startServerProcess(database, { METRICS_PORT: String(metricsPort) });
    try {
      const port = Number(new URL(measured.base).port);
      assert.deepEqual(
        listeningPorts(measured.pid),
        [port, metricsPort].sort((a, b) => a - b),
      );
      const { samples } = await scrape(metricsPort);
      assert.ok(samples.has('nodejs_eventloop_lag_seconds'));
      assert.equal((await call(metricsPort, { path: '/health/ready' })).status, 200);

      // A request in flight (its body half sent) holds the shutdown open: meanwhile the node says it is draining.
      const body = JSON.stringify({ grant_type: 'client_credentials' });
      const socket = net.connect(port, '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(
        `POST /oauth/token HTTP/1.1\r\nHost: process.test\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
      );
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      const closed = new Promise((resolve) => socket.once('close', resolve));
      await sleep(200);
      process.kill(measured.pid, 'SIGTERM');
      const draining = await eventually('the node to drain', async () => {
        const ready = await call(metricsPort, { path: '/health/ready' });
        return ready.status === 503 ? ready.body : undefined;
      });
      assert.deepEqual(JSON.parse(draining), { status: 'draining' });
      socket.end(body.slice(5));
      assert.equal(await measured.exited, 0);
      await closed;
      assert.match(answer, /^HTTP\/1\.1 [24]\d\d /, 'the request in flight was answered');
    } finally {
      await measured.kill();
    }
  });
});
