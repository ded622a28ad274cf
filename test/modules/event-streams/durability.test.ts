import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { DEFAULT_TENANT_ID } from '../../../src/bootstrap.ts';
import { ConfigError, loadConfig } from '../../../src/config.ts';
import { openDatabase, type Database } from '../../../src/db/database.ts';
import { createTestDatabase, eachDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { api, processToken, startServerProcess, type ServerProcess } from '../../helpers/server-process.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import {
  startWebhookReceiver,
  waitUntil,
  type ReceivedRequest,
  type WebhookReceiver,
} from '../../helpers/webhook-receiver.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const webhook = (url: string) => ({
  type: 'webhook',
  configuration: { webhook_endpoint: url, webhook_authorization: { method: 'bearer', token: 'durability-token' } },
});

/** Runs `count` tasks, `parallel` at a time. */
async function burst(count: number, parallel: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

describe('delivery lease configuration', () => {
  it('refuses a lease not longer than the delivery timeout', () => {
    assert.throws(
      () => loadConfig({ DELIVERY_TIMEOUT_MS: '10000', DELIVERY_LEASE_MS: '10000' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message === 'DELIVERY_LEASE_MS (10000) must be greater than DELIVERY_TIMEOUT_MS (10000)',
    );
    // Against the default timeout (10 s).
    assert.throws(() => loadConfig({ DELIVERY_LEASE_MS: '5000' }), ConfigError);
    assert.throws(() => loadConfig({ DELIVERY_TIMEOUT_MS: '120000' }), ConfigError);
    const accepted = loadConfig({ DELIVERY_TIMEOUT_MS: '1000', DELIVERY_LEASE_MS: '1001' });
    assert.equal(accepted.deliveryLeaseMs, 1001);
    assert.equal(accepted.deliveryTimeoutMs, 1000);
  });

  it('the server does not start with such a lease: one line on stderr, exit code 2', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-lease-'));
    try {
      const child = spawn(process.execPath, ['bin/tenantry.mjs', 'serve'], {
        env: {
          ...process.env,
          DATA_DIR: dataDir,
          DATABASE_URL: '',
          PORT: '0',
          DELIVERY_TIMEOUT_MS: '5000',
          DELIVERY_LEASE_MS: '4000',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      assert.equal(code, 2);
      assert.equal(stderr, 'tenantry: DELIVERY_LEASE_MS (4000) must be greater than DELIVERY_TIMEOUT_MS (5000)\n');
      assert.deepEqual(fs.readdirSync(dataDir), [], 'nothing was created');
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('event delivery across failures', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`event delivery across a SIGKILL (${kind})`, () => {
      let database: TestDatabase;
      let receiver: WebhookReceiver;
      let server: ServerProcess | undefined;
      let db: Database | undefined;
      before(async () => {
        database = await createTestDatabase(kind);
        receiver = await startWebhookReceiver();
      });
      after(async () => {
        await server?.kill();
        await db?.close();
        await receiver.close();
        await database.drop();
      });

      it('delivers user.created for every user that committed, and re-claims the leases the killed process held', async () => {
        const env = {
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_TIMEOUT_MS: '8000',
          DELIVERY_LEASE_MS: '10000',
          DELIVERY_POLL_MS: '50',
          DELIVERY_RETRY_SCHEDULE_MS: '100,200,400',
        };
        server = await startServerProcess(database, env);
        const token = await processToken(server);
        const stream = await api(server, token, 'POST', '/event-streams', {
          name: 'crash',
          subscriptions: [{ event_type: 'user.created' }],
          destination: webhook(receiver.url),
        });
        assert.equal(stream.status, 201, JSON.stringify(stream.body));

        // The endpoint answers after a pause, so sends are in flight throughout the burst. Once enough
        // users exist it stops answering, and the first send it holds triggers the SIGKILL: the process
        // dies with that send (and whatever else it had claimed) unanswered.
        const KILL_AFTER = 80;
        const created = new Set<string>();
        const held = new Set<string>();
        let holding = false;
        let killed: Promise<void> | undefined;
        const victim = server;
        receiver.beforeAnswer(async (request) => {
          if (!holding) return sleep(10);
          held.add(request.json().id);
          killed ??= victim.kill();
          return new Promise<void>(() => undefined);
        });
        const unexpected: string[] = [];
        let refused = 0;
        await burst(200, 8, async (i) => {
          try {
            const response = await api(victim, token, 'POST', '/users', {
              connection: 'Username-Password-Authentication',
              email: `crash-${i}@example.com`,
              password: 'correct horse battery',
            });
            if (response.status === 201) created.add(response.body.user_id);
            else unexpected.push(`${response.status} ${JSON.stringify(response.body)}`);
          } catch {
            refused++; // the connection died with the process
          }
          if (created.size >= KILL_AFTER) holding = true;
        });
        await waitUntil(
          () => killed !== undefined,
          60_000,
          () => 'a send held after the burst',
        );
        await killed;
        assert.deepEqual(unexpected, [], 'every answer before the kill was a 201');
        assert.ok(
          created.size >= KILL_AFTER && refused > 0,
          `killed mid-burst (${created.size} created, ${refused} cut off)`,
        );
        assert.ok(held.size >= 1);

        // What the dead process left: the deliveries it was sending are pending, under its lease.
        db = openDatabase({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
        // In flight at the kill: claimed and not finished (a finished or handed-back claim has no lease).
        const leased = await db.db
          .selectFrom('deliveries')
          .select(['event_id', 'claimed_until'])
          .where('stream_id', '=', stream.body.id)
          .where('claimed_until', 'is not', null)
          .execute();
        const leaseOf = new Map(leased.map((row) => [row.event_id, row.claimed_until!]));
        for (const id of held) assert.ok(leaseOf.has(id), `the send held at the kill (${id}) is still leased`);

        receiver.beforeAnswer(undefined);
        const restartedAt = Date.now();
        server = await startServerProcess(database, env);

        // Every user that committed: each 201, and each user in the database (a request cut off by the
        // kill may have committed without its answer arriving).
        const stored = new Set(
          (await db.db.selectFrom('users').select('user_id').where('tenant_id', '=', DEFAULT_TENANT_ID).execute()).map(
            (u) => u.user_id,
          ),
        );
        for (const id of created) assert.ok(stored.has(id), `${id} answered 201 and is stored`);
        const deliveredUsers = () =>
          new Set(
            receiver.requests
              .map((r) => r.json())
              .filter((e) => e.type === 'user.created')
              .map((e) => e.data.object.user_id as string),
          );
        await waitUntil(
          () => [...stored].every((id) => deliveredUsers().has(id)),
          120_000,
          () => {
            const got = deliveredUsers();
            return `user.created of ${[...stored].filter((id) => !got.has(id)).length} of ${stored.size} users still undelivered`;
          },
        );
        let undelivered: unknown[] = [];
        await waitUntil(
          async () =>
            (undelivered = await db!.db
              .selectFrom('deliveries')
              .selectAll()
              .where('status', '!=', 'delivered')
              .execute()).length === 0,
          60_000,
          () => `every delivery marked delivered; not yet: ${JSON.stringify(undelivered)}`,
        );

        // One event per stored user, none for a user that was not stored (the outbox commits with the change).
        const events = await db.db
          .selectFrom('events')
          .select(['id', 'data'])
          .where('type', '=', 'user.created')
          .execute();
        assert.deepEqual(events.map((e) => JSON.parse(e.data).object.user_id).sort(), [...stored].sort());

        // The leased sends went again, and only once their lease had run out; nothing else went twice.
        const sends = new Map<string, ReceivedRequest[]>();
        for (const request of receiver.requests)
          sends.set(request.json().id, [...(sends.get(request.json().id) ?? []), request]);
        for (const id of held) {
          const again = sends.get(id)!.filter((r) => r.at >= restartedAt);
          assert.ok(again.length >= 1, `${id} was sent again after the restart`);
          assert.ok(again[0]!.at >= Date.parse(leaseOf.get(id)!), `${id} waited for its lease to expire`);
        }
        for (const [id, requests] of sends)
          if (requests.length > 1)
            assert.ok(leaseOf.has(id), `${id} went ${requests.length} times without having been in flight at the kill`);

        await server.stop();
        server = undefined;
      });
    });

    describe(`a slow or dead endpoint does not hold up other streams (${kind})`, () => {
      let server: TestServer;
      before(async () => {
        server = await startTestServer(kind, {
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_CONCURRENCY: '6',
          DELIVERY_PER_STREAM_CONCURRENCY: '2',
          // Nothing times out during the test: a stuck send keeps its slot for as long as the endpoint hangs.
          DELIVERY_TIMEOUT_MS: '120000',
          DELIVERY_LEASE_MS: '240000',
          DELIVERY_POLL_MS: '20',
          DELIVERY_RETRY_SCHEDULE_MS: '50,100,200',
        });
      });
      after(() => server.close());

      it('the healthy stream gets every event while a hanging and a silent endpoint hold their slots', async () => {
        // Answers nothing until released.
        const hanging = await startHangingEndpoint();
        // Accepts connections, reads the requests, never answers.
        const silent = await startSilentEndpoint();
        const fast = await startWebhookReceiver();
        try {
          const create = async (name: string, url: string) => {
            const response = await server.request({
              method: 'POST',
              url: '/api/v2/event-streams',
              payload: { name, subscriptions: [{ event_type: 'user.created' }], destination: webhook(url) },
            });
            assert.equal(response.statusCode, 201, response.body);
            return response.json().id as string;
          };
          const hangingId = await create('hanging', hanging.url);
          const silentId = await create('silent', silent.url);
          const fastId = await create('fast', fast.url);
          const USERS = 30;
          for (let i = 0; i < USERS; i++) {
            const response = await server.request({
              method: 'POST',
              url: '/api/v2/users',
              payload: {
                connection: 'Username-Password-Authentication',
                email: `slow-${i}@example.com`,
                password: 'correct horse battery',
              },
            });
            assert.equal(response.statusCode, 201, response.body);
          }

          // Each slow stream takes the two slots it may have (of six), and keeps them: nothing answers, nothing times out.
          await waitUntil(
            () => hanging.open() === 2 && silent.open() === 2,
            60_000,
            () => `hanging ${hanging.open()}, silent ${silent.open()} open`,
          );
          await fast.waitFor((r) => new Set(r.map((x) => x.json().id)).size === USERS, 120_000);
          const deliveries = (streamId: string) =>
            server.services.database.db
              .selectFrom('deliveries')
              .select(['event_id', 'status', 'attempt_count'])
              .where('stream_id', '=', streamId)
              .execute();
          await waitUntil(
            async () => (await deliveries(fastId)).every((d) => d.status === 'delivered'),
            30_000,
            () => 'fast deliveries recorded',
          );
          for (const streamId of [hangingId, silentId]) {
            const rows = await deliveries(streamId);
            assert.equal(rows.length, USERS);
            assert.ok(
              rows.every((d) => d.status === 'pending' && d.attempt_count === 0),
              'the slow streams are stuck on their first sends',
            );
          }
          assert.equal(hanging.maxOpen(), 2, 'never more than the per-stream limit at the hanging endpoint');
          assert.equal(silent.maxOpen(), 2, 'never more than the per-stream limit at the silent endpoint');
          assert.equal(fast.requests.length, USERS, 'each event reached the healthy endpoint once');

          // The hanging endpoint recovers: its backlog drains.
          hanging.release();
          await waitUntil(
            async () => (await deliveries(hangingId)).every((d) => d.status === 'delivered'),
            120_000,
            () => 'hanging stream drained',
          );
          assert.equal(new Set(hanging.received()).size, USERS);
        } finally {
          hanging.release();
          await silent.close();
          await hanging.close();
          await fast.close();
        }
      });
    });

    describe(`a send that times out is retried, then failed (${kind})`, () => {
      let server: TestServer;
      before(async () => {
        server = await startTestServer(kind, {
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_TIMEOUT_MS: '300',
          DELIVERY_LEASE_MS: '30000',
          DELIVERY_POLL_MS: '20',
          DELIVERY_RETRY_SCHEDULE_MS: '50,50,50',
        });
      });
      after(() => server.close());

      it('records each timed-out attempt as failed with a timeout error', async () => {
        const silent = await startSilentEndpoint();
        try {
          const created = await server.request({
            method: 'POST',
            url: '/api/v2/event-streams',
            payload: {
              name: 'timeouts',
              subscriptions: [{ event_type: 'user.created' }],
              destination: webhook(silent.url),
            },
          });
          const streamId = created.json().id as string;
          assert.equal(
            (
              await server.request({
                method: 'POST',
                url: '/api/v2/users',
                payload: {
                  connection: 'Username-Password-Authentication',
                  email: 'timeout@example.com',
                  password: 'correct horse battery',
                },
              })
            ).statusCode,
            201,
          );
          const row = () =>
            server.services.database.db
              .selectFrom('deliveries')
              .selectAll()
              .where('stream_id', '=', streamId)
              .executeTakeFirst();
          await waitUntil(
            async () => (await row())?.status === 'failed',
            60_000,
            () => 'the delivery failed',
          );
          const listed = (await server.request({ url: `/api/v2/event-streams/${streamId}/deliveries` })).json();
          assert.equal(listed.deliveries.length, 1);
          assert.equal(listed.deliveries[0].attempts.length, 4);
          for (const attempt of listed.deliveries[0].attempts) {
            assert.equal(attempt.status, 'failed');
            assert.match(attempt.error_message, /timeout/);
          }
          assert.equal(silent.requests(), 4, 'one request per attempt');
          assert.equal(silent.maxOpen(), 1, 'one attempt at a time');
        } finally {
          await silent.close();
        }
      });
    });

    describe(
      `two nodes on one PostgreSQL database (${kind})`,
      { skip: kind === 'sqlite' && 'SQLite is single-node' },
      () => {
        let database: TestDatabase;
        let receiver: WebhookReceiver;
        const nodes: ServerProcess[] = [];
        before(async () => {
          database = await createTestDatabase(kind);
          receiver = await startWebhookReceiver({ keep: false });
        });
        after(async () => {
          for (const node of nodes) await node.kill();
          await receiver.close();
          await database.drop();
        });

        it('delivers every event exactly once, sent by both nodes', async () => {
          const env = {
            DELIVERY_ALLOW_HTTP: 'true',
            DELIVERY_TIMEOUT_MS: '30000',
            DELIVERY_LEASE_MS: '60000',
            DELIVERY_POLL_MS: '50',
          };
          nodes.push(await startServerProcess(database, env));
          nodes.push(await startServerProcess(database, env));
          const pids = nodes.map((n) => n.pid);
          const tokens = await Promise.all(nodes.map((n) => processToken(n)));
          const stream = await api(nodes[0]!, tokens[0]!, 'POST', '/event-streams', {
            name: 'two-nodes',
            subscriptions: [{ event_type: 'user.created' }],
            destination: webhook(receiver.url),
          });
          assert.equal(stream.status, 201);

          // Which node sent each request, from the owner of the connection's sending socket. Answers are held
          // until both nodes have sent something: a node's held sends fill its per-stream slots (4), so the
          // other node has to claim the rest.
          const counts = new Map<string, number>();
          const senderOfPort = new Map<number, number | undefined>();
          const sentBy = new Map<number, number>();
          let bothSeen!: () => void;
          const both = new Promise<void>((resolve) => (bothSeen = resolve));
          receiver.beforeAnswer(async (request) => {
            const id = request.json().id as string;
            counts.set(id, (counts.get(id) ?? 0) + 1);
            if (!senderOfPort.has(request.remotePort))
              senderOfPort.set(
                request.remotePort,
                socketOwner(request.remotePort, Number(new URL(receiver.url).port), pids),
              );
            const pid = senderOfPort.get(request.remotePort);
            if (pid !== undefined) sentBy.set(pid, (sentBy.get(pid) ?? 0) + 1);
            if (sentBy.size === 2) bothSeen();
            await Promise.race([both, sleep(20_000)]);
          });

          const USERS = 200;
          await burst(USERS, 8, async (i) => {
            const n = i % 2;
            const response = await api(nodes[n]!, tokens[n]!, 'POST', '/users', {
              connection: 'Username-Password-Authentication',
              email: `node-${i}@example.com`,
              password: 'correct horse battery',
            });
            assert.equal(response.status, 201, JSON.stringify(response.body));
          });
          const db = openDatabase({ databaseUrl: database.databaseUrl, dataDir: database.dataDir });
          try {
            const eventIds = (
              await db.db.selectFrom('deliveries').select('event_id').where('stream_id', '=', stream.body.id).execute()
            ).map((d) => d.event_id);
            assert.equal(eventIds.length, USERS);
            await waitUntil(
              () => eventIds.every((id) => counts.has(id)),
              120_000,
              () => `${counts.size} of ${USERS} events received`,
            );
            await waitUntil(
              async () =>
                (await db.db.selectFrom('deliveries').select('event_id').where('status', '!=', 'delivered').execute())
                  .length === 0,
              60_000,
              () => 'all marked delivered',
            );
            assert.deepEqual([...counts.keys()].sort(), [...eventIds].sort());
            assert.deepEqual(
              [...counts].filter(([, n]) => n > 1),
              [],
              'no event arrived twice',
            );
            assert.deepEqual(
              [...sentBy.keys()].sort(),
              [...pids].sort(),
              `both nodes sent (${JSON.stringify([...sentBy])})`,
            );
          } finally {
            await db.close();
          }
        });
      },
    );

    describe(
      `PostgreSQL ending a node's connections (${kind})`,
      { skip: kind === 'sqlite' && 'PostgreSQL only' },
      () => {
        let database: TestDatabase;
        let receiver: WebhookReceiver;
        let server: ServerProcess | undefined;
        before(async () => {
          database = await createTestDatabase(kind);
          receiver = await startWebhookReceiver();
        });
        after(async () => {
          await server?.kill();
          await receiver.close();
          await database.drop();
        });

        it('the node stays up, serves and delivers again (as after a database restart or failover)', async () => {
          server = await startServerProcess(database, { DELIVERY_ALLOW_HTTP: 'true', DELIVERY_POLL_MS: '50' });
          let exitCode: number | null | undefined;
          void server.exited.then((code) => (exitCode = code));
          const token = await processToken(server);
          const stream = await api(server, token, 'POST', '/event-streams', {
            name: 'reconnect',
            subscriptions: [{ event_type: 'user.created' }],
            destination: webhook(receiver.url),
          });
          assert.equal(stream.status, 201);
          const createUser = (email: string) =>
            api(server!, token, 'POST', '/users', {
              connection: 'Username-Password-Authentication',
              email,
              password: 'correct horse battery',
            });
          assert.equal((await createUser('before-terminate@example.com')).status, 201);
          await receiver.waitFor((r) => r.length === 1, 30_000);

          // Every connection of the node, the pooled ones and the worker's LISTEN one, ended by the server.
          const admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
          await admin.connect();
          try {
            const ended = await admin.query(
              'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1',
              [new URL(database.databaseUrl!).pathname.slice(1)],
            );
            assert.ok(ended.rowCount! >= 1);
          } finally {
            await admin.end();
          }
          // A request racing the termination may meet a dying connection; the pool replaces it.
          await waitUntil(
            async () =>
              exitCode !== undefined ||
              (await api(server!, token, 'GET', '/event-streams').catch(() => ({ status: 0 }))).status === 200,
            30_000,
            () => 'served again',
          );
          assert.equal(exitCode, undefined, 'the node is still running');
          const later = await createUser('after-terminate@example.com');
          assert.equal(later.status, 201, JSON.stringify(later.body));
          const [, second] = await receiver.waitFor((r) => r.length === 2, 60_000);
          assert.equal(second!.json().data.object.user_id, later.body.user_id);
          await server.stop();
          server = undefined;
        });
      },
    );
  }),
);

/** The process (among `pids`) owning the local TCP socket 127.0.0.1:`port` connected to `peerPort`: Linux /proc. */
function socketOwner(port: number, peerPort: number, pids: number[]): number | undefined {
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(4, '0');
  const line = fs
    .readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .find((f) => f[1]?.endsWith(`:${hex(port)}`) && f[2]?.endsWith(`:${hex(peerPort)}`));
  const inode = line?.[9];
  if (inode === undefined) return undefined;
  for (const pid of pids) {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      try {
        if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`) return pid;
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

/** An HTTP endpoint that reads each request and answers none until released (then answers 204 to all). */
async function startHangingEndpoint() {
  const waiting: http.ServerResponse[] = [];
  const received: string[] = [];
  let released = false;
  let open = 0;
  let maxOpen = 0;
  const server = http.createServer((req, res) => {
    open++;
    maxOpen = Math.max(maxOpen, open);
    res.on('close', () => open--);
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      received.push(JSON.parse(body).id);
      if (released) res.writeHead(204).end();
      else waiting.push(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hook`,
    open: () => open,
    maxOpen: () => maxOpen,
    received: () => received,
    release() {
      released = true;
      for (const res of waiting.splice(0)) res.writeHead(204).end();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A TCP endpoint that accepts connections and reads the requests, but never answers a byte. Counts the
 * requests, and the connections holding one (idle connections a client opens ahead do not count).
 */
async function startSilentEndpoint() {
  const waiting = new Set<net.Socket>();
  const sockets = new Set<net.Socket>();
  let requests = 0;
  let maxOpen = 0;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (chunk: Buffer) => {
      if (!chunk.toString('latin1').startsWith('POST ')) return;
      requests++;
      waiting.add(socket);
      maxOpen = Math.max(maxOpen, waiting.size);
    });
    socket.on('close', () => {
      sockets.delete(socket);
      waiting.delete(socket);
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hook`,
    open: () => waiting.size,
    maxOpen: () => maxOpen,
    requests: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
