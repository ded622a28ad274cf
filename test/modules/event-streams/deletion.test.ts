import assert from 'node:assert/strict';
import type { Writable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { bootstrap } from '../../../src/bootstrap.ts';
import { loadConfig } from '../../../src/config.ts';
import type { Database } from '../../../src/db/database.ts';
import { newId } from '../../../src/ids.ts';
import { AttemptLog } from '../../../src/modules/event-streams/attempt-log.ts';
import { exportSeed } from '../../../src/seed/export.ts';
import { createServices, type Services } from '../../../src/services.ts';
import { createTestDatabase, eachDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { jobTotals, logLines, type LogLine } from '../../helpers/log-lines.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.ts';

/**
 * DELETE /api/v2/event-streams/{id}: the stream is gone at once from every read, and its rows are
 * removed afterwards in chunks by background work that survives a restart.
 */

const CHUNK_ROWS = 7;
const T0 = '2026-03-01T10:00:00.000Z';
const NOT_FOUND = { statusCode: 404, error: 'Not Found', message: 'The requested stream does not exist.' };

const webhook = (url: string) => ({
  type: 'webhook',
  configuration: { webhook_endpoint: url, webhook_authorization: { method: 'bearer', token: 'deletion-token' } },
});

/**
 * `deliveries` failed deliveries of the stream, each with `attempts` failed attempts, written as the
 * delivery worker leaves them (and one event each, of the stream's tenant).
 */
async function fill(database: Database, tenantId: string, streamId: string, deliveries: number, attempts: number) {
  const db = database.db;
  for (let i = 0; i < deliveries; i++) {
    const event = newId.event();
    await db
      .insertInto('events')
      .values({
        id: event,
        tenant_id: tenantId,
        type: 'user.created',
        time: T0,
        source: 'urn:test',
        data: '{}',
        purpose: null,
      })
      .execute();
    await db
      .insertInto('deliveries')
      .values({
        stream_id: streamId,
        event_id: event,
        event_type: 'user.created',
        event_time: T0,
        status: 'failed',
        attempt_count: attempts,
        attempt_seq: attempts,
        next_attempt_at: T0,
        claimed_until: null,
        updated_at: T0,
      })
      .execute();
    for (let seq = 1; seq <= attempts; seq++) {
      await db
        .insertInto('delivery_attempts')
        .values({
          stream_id: streamId,
          event_id: event,
          seq,
          status: 'failed',
          timestamp: T0,
          error_message: 'HTTP 500',
          duration: 3,
        })
        .execute();
    }
  }
}

/** `minutes` per-minute counts of the stream, as its recorded attempts leave them (one row a minute). */
async function fillCounts(database: Database, streamId: string, minutes: number) {
  const rows = Array.from({ length: minutes }, (_, i) => ({
    stream_id: streamId,
    minute: new Date(Date.parse(T0) + i * 60_000).toISOString().slice(0, 16),
    delivered: 1,
    failed: 2,
  }));
  await database.db.insertInto('delivery_counts').values(rows).execute();
}

const countsOf = async (database: Database, streamId: string) =>
  Number(
    (
      await database.db
        .selectFrom('delivery_counts')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('stream_id', '=', streamId)
        .executeTakeFirstOrThrow()
    ).n,
  );

/** The stream's rows in every table that hangs off it, and whether its own row is still there. */
async function rowsOf(database: Database, streamId: string) {
  const count = async (table: 'deliveries' | 'delivery_attempts') =>
    Number(
      (
        await database.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('stream_id', '=', streamId)
          .executeTakeFirstOrThrow()
      ).n,
    );
  const stream = await database.db
    .selectFrom('event_streams')
    .select(['status', 'name'])
    .where('id', '=', streamId)
    .executeTakeFirst();
  return { deliveries: await count('deliveries'), attempts: await count('delivery_attempts'), stream };
}

describe('deleting an event stream', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`DELETE …/event-streams/{id} (${kind})`, () => {
      let server: TestServer;
      let receiver: WebhookReceiver;
      const logs = logLines();

      before(async () => {
        receiver = await startWebhookReceiver();
        server = await startTestServer(
          kind,
          {
            LOG_LEVEL: 'info',
            DELIVERY_ALLOW_HTTP: 'true',
            DELIVERY_POLL_MS: '50',
            EVENT_STREAMS_MAX: '3',
            EVENT_STREAM_DELETION_CHUNK_ROWS: String(CHUNK_ROWS),
          },
          { logStream: logs.stream },
        );
      });
      after(async () => {
        await server.close();
        await receiver.close();
      });

      const createStream = async (name: string, token?: string) => {
        const created = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          token,
          payload: { name, subscriptions: [{ event_type: 'user.created' }], destination: webhook(receiver.url) },
        });
        assert.equal(created.statusCode, 201, created.body);
        return created.json().id as string;
      };
      const deleteStream = (id: string, token?: string) =>
        server.request({ method: 'DELETE', url: `/api/v2/event-streams/${id}`, token });
      const listStreams = async () => {
        const listed = await server.request({ url: '/api/v2/event-streams?take=100' });
        assert.equal(listed.statusCode, 200);
        return (listed.json() as { eventStreams: Array<{ id: string; name?: string }> }).eventStreams;
      };
      const deletionWorker = () => server.services.streamDeletionWorker!;
      const deletedLine = (id: string) =>
        eventually(`the deletion of ${id} logged`, async () =>
          logs.lines.find((line) => line.msg === 'event stream deleted' && line.event_stream_id === id),
        );

      it('is gone at once from every read, its name and its place under the limit free for a new stream', async () => {
        // The removal waits: what is checked here is the deletion's mark alone.
        await deletionWorker().pause();
        try {
          const doomed = await createStream('doomed');
          const kept = await createStream('kept');
          await createStream('third');
          await fill(server.services.database, server.tenant.id, doomed, 5, 2);
          const eventId = (await server.services.database.db
            .selectFrom('deliveries')
            .select('event_id')
            .where('stream_id', '=', doomed)
            .executeTakeFirstOrThrow())!.event_id;
          const full = await server.request({
            method: 'POST',
            url: '/api/v2/event-streams',
            payload: { name: 'fourth', destination: webhook(receiver.url) },
          });
          assert.equal(full.statusCode, 409, 'three streams is the limit');
          const stats = await server.request({ url: `/api/v2/event-streams/${doomed}/stats` });
          assert.equal(stats.statusCode, 200, stats.body);

          const signing = await server.request({
            method: 'POST',
            url: `/api/v2/event-streams/${doomed}/signing-secrets`,
            payload: {},
          });
          assert.equal(signing.statusCode, 201, signing.body);
          const deleted = await deleteStream(doomed);
          assert.equal(deleted.statusCode, 204);
          assert.equal(deleted.body, '');

          const base = `/api/v2/event-streams/${doomed}`;
          const reads: Array<{ method?: 'GET' | 'POST' | 'PATCH' | 'DELETE'; url: string; payload?: object }> = [
            { url: base },
            { url: `${base}/deliveries` },
            { url: `${base}/deliveries/count` },
            { url: `${base}/deliveries/${eventId}` },
            { url: `${base}/stats` },
            { url: `${base}/attempts` },
            { url: `${base}/signing-secrets` },
            { method: 'POST', url: `${base}/redeliver`, payload: {} },
            { method: 'POST', url: `${base}/redeliver/${eventId}` },
            { method: 'POST', url: `${base}/test`, payload: { event_type: 'user.created' } },
            { method: 'POST', url: `${base}/signing-secrets`, payload: {} },
            { method: 'DELETE', url: `${base}/signing-secrets` },
            { method: 'PATCH', url: base, payload: { status: 'enabled' } },
            { method: 'DELETE', url: base },
          ];
          for (const read of reads) {
            const response = await server.request({
              method: read.method ?? 'GET',
              url: read.url,
              payload: read.payload,
            });
            assert.equal(response.statusCode, 404, `${read.method ?? 'GET'} ${read.url}: ${response.body}`);
            assert.deepEqual(response.json(), NOT_FOUND, `${read.method ?? 'GET'} ${read.url}`);
          }
          assert.ok(!(await listStreams()).some((s) => s.id === doomed));

          // Its name and its place under EVENT_STREAMS_MAX are free at once.
          const successor = await createStream('doomed');
          assert.notEqual(successor, doomed);
          const named = await listStreams();
          assert.deepEqual(
            named.filter((s) => s.name === 'doomed').map((s) => s.id),
            [successor],
          );
          const successorDeliveries = await server.request({ url: `/api/v2/event-streams/${successor}/deliveries` });
          assert.deepEqual(successorDeliveries.json(), { deliveries: [] }, 'none of the deleted stream’s deliveries');

          // The command line, the seed export and the metrics' backlog do not see it either.
          const log = new AttemptLog(server.services.database);
          assert.equal(await log.streamExists(doomed), false);
          assert.equal(await log.streamExists(doomed, server.tenant.id), false);
          assert.equal(await log.streamExists(kept, server.tenant.id), true);
          const tailed = await log.since('2000-01-01T00:00:00.000Z', { tenant: server.tenant.id });
          assert.ok(!tailed.some((line) => line.stream_id === doomed));
          const seed = await exportSeed(server.services, server.tenant.id, { withSecrets: false });
          assert.deepEqual(seed.tenants[0]!.event_streams!.map((s) => s.name).sort(), ['doomed', 'kept', 'third']);
          await server.services.database.db
            .updateTable('deliveries')
            .set({ status: 'pending' })
            .where('stream_id', '=', doomed)
            .execute();
          assert.equal((await server.services.eventStreams.dueBacklog()).due, 0);

          // Still there, unseen, until the background work removes it.
          const left = await rowsOf(server.services.database, doomed);
          assert.deepEqual(left, { deliveries: 5, attempts: 10, stream: { status: 'deleting', name: null } });
          // Its sealed webhook secret and signing secrets went with the DELETE, not with the removal.
          assert.deepEqual(
            await server.services.database.db
              .selectFrom('event_streams')
              .select(['secret', 'signing_secrets'])
              .where('id', '=', doomed)
              .executeTakeFirst(),
            { secret: null, signing_secrets: null },
          );
          deletionWorker().resume();
          await deletedLine(doomed);
          assert.deepEqual(await rowsOf(server.services.database, doomed), {
            deliveries: 0,
            attempts: 0,
            stream: undefined,
          });
          for (const id of [kept, successor]) assert.equal((await deleteStream(id)).statusCode, 204);
          const third = named.find((s) => s.name === 'third')!.id;
          assert.equal((await deleteStream(third)).statusCode, 204);
        } finally {
          deletionWorker().resume();
        }
      });

      it('sends none of its pending deliveries, while another stream’s go', async () => {
        const doomed = await createStream('pending-doomed');
        const control = await createStream('pending-control');
        const worker = server.services.deliveryWorker!;
        await worker.pause();
        await deletionWorker().pause();
        try {
          const user = await server.request({
            method: 'POST',
            url: '/api/v2/users',
            payload: {
              connection: 'Username-Password-Authentication',
              email: 'pending@example.com',
              password: 'correct horse battery',
            },
          });
          assert.equal(user.statusCode, 201, user.body);
          const queued = await rowsOf(server.services.database, doomed);
          assert.equal(queued.deliveries, 1, 'a delivery waits for the stream');
          assert.equal((await deleteStream(doomed)).statusCode, 204);
          worker.resume();
          const [arrived] = await receiver.waitFor((r) => r.some((q) => q.json().a0stream === control));
          assert.ok(arrived);
          // Claims go on every DELIVERY_POLL_MS (50 ms): give the worker many of them.
          await new Promise((resolve) => setTimeout(resolve, 500));
          assert.deepEqual(
            receiver.requests.filter((r) => r.json().a0stream === doomed).map((r) => r.json().id),
            [],
            'nothing was sent to the deleted stream',
          );
          const waiting = await server.services.database.db
            .selectFrom('deliveries')
            .select(['status', 'claimed_until'])
            .where('stream_id', '=', doomed)
            .execute();
          assert.deepEqual(waiting, [{ status: 'pending', claimed_until: null }], 'the claim passed it by');
        } finally {
          worker.resume();
          deletionWorker().resume();
        }
        await deletedLine(doomed);
        assert.equal((await rowsOf(server.services.database, doomed)).deliveries, 0);
        assert.equal((await deleteStream(control)).statusCode, 204);
      });

      it('removes its rows in chunks of EVENT_STREAM_DELETION_CHUNK_ROWS, leaving other streams and tenants alone', async () => {
        const other = await server.addTenant(`deletion-other-${kind}`, `deletion-other-${kind}.test`);
        const otherCreated = await server.app.inject({
          method: 'POST',
          url: '/api/v2/event-streams',
          headers: { host: `deletion-other-${kind}.test`, authorization: `Bearer ${other.token}` },
          payload: { name: 'doomed', destination: webhook(receiver.url) },
        });
        assert.equal(otherCreated.statusCode, 201, otherCreated.body);
        const otherStream = otherCreated.json().id as string;
        const doomed = await createStream('doomed');
        const sibling = await createStream('sibling');
        await fill(server.services.database, other.tenant.id, otherStream, 4, 3);
        await fill(server.services.database, server.tenant.id, sibling, 3, 2);
        // 12 minutes' counts, 23 deliveries and 69 attempts: 104 rows, 14 full chunks of 7 and one of 6
        // that removes the stream row.
        await fill(server.services.database, server.tenant.id, doomed, 23, 3);
        await fillCounts(server.services.database, doomed, 12);
        await fillCounts(server.services.database, otherStream, 2);
        await fillCounts(server.services.database, sibling, 3);

        // Another tenant's stream is not this tenant's to delete: 404, nothing changes.
        const foreign = await deleteStream(otherStream);
        assert.equal(foreign.statusCode, 404);
        assert.deepEqual(foreign.json(), NOT_FOUND);
        assert.deepEqual(await rowsOf(server.services.database, otherStream), {
          deliveries: 4,
          attempts: 12,
          stream: { status: 'enabled', name: 'doomed' },
        });

        assert.equal((await deleteStream(doomed)).statusCode, 204);
        const done = await eventually(`the deletion of ${doomed} logged`, async () =>
          jobTotals(logs.lines, { name: 'event stream deletion', finished: 'event stream deleted', streamId: doomed }),
        );
        assert.equal(done.rows, 104);
        assert.equal(done.chunks, Math.floor(104 / CHUNK_ROWS) + 1);
        assert.equal(await countsOf(server.services.database, doomed), 0);
        assert.equal(await countsOf(server.services.database, otherStream), 2);
        assert.equal(await countsOf(server.services.database, sibling), 3);
        assert.equal((await deletedLine(doomed)).tenant_id, server.tenant.id);
        assert.deepEqual(await rowsOf(server.services.database, doomed), {
          deliveries: 0,
          attempts: 0,
          stream: undefined,
        });

        assert.deepEqual(await rowsOf(server.services.database, otherStream), {
          deliveries: 4,
          attempts: 12,
          stream: { status: 'enabled', name: 'doomed' },
        });
        assert.deepEqual(await rowsOf(server.services.database, sibling), {
          deliveries: 3,
          attempts: 6,
          stream: { status: 'enabled', name: 'sibling' },
        });
        const otherRead = await server.app.inject({
          url: `/api/v2/event-streams/${otherStream}`,
          headers: { host: `deletion-other-${kind}.test`, authorization: `Bearer ${other.token}` },
        });
        assert.equal(otherRead.statusCode, 200);
        assert.equal((await deleteStream(sibling)).statusCode, 204);
      });

      it('refuses as before: a malformed id is a 400, a token without delete:event_streams a 403', async () => {
        const id = await createStream('refusals');
        const malformed = await deleteStream('est_invalid');
        assert.equal(malformed.statusCode, 400);
        assert.equal(malformed.json().errorCode, 'invalid_uri');
        const { token } = await server.clientWithScopes(['read:event_streams']);
        const forbidden = await deleteStream(id, token);
        assert.equal(forbidden.statusCode, 403);
        assert.deepEqual(forbidden.json(), {
          statusCode: 403,
          error: 'Forbidden',
          message: 'Insufficient scope, expected any of: delete:event_streams',
          errorCode: 'insufficient_scope',
        });
        assert.equal((await server.request({ url: `/api/v2/event-streams/${id}` })).statusCode, 200);
        assert.equal((await deleteStream(id)).statusCode, 204);
      });

      it('logs a failed chunk through the server’s logger and tries again', async () => {
        const doomed = await createStream('refused');
        await fill(server.services.database, server.tenant.id, doomed, 3, 1);
        const db = server.services.database.db;
        if (kind === 'postgres') {
          await sql`CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'refused by the test'; END $$`.execute(db);
          await sql`CREATE TRIGGER refuse_delete BEFORE DELETE ON delivery_attempts FOR EACH ROW EXECUTE FUNCTION refuse_delete()`.execute(
            db,
          );
        } else {
          await sql`CREATE TRIGGER refuse_delete BEFORE DELETE ON delivery_attempts
            BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`.execute(db);
        }
        try {
          assert.equal((await deleteStream(doomed)).statusCode, 204);
          const failed = await eventually('the failure logged', async () =>
            logs.lines.find(
              (line) =>
                line.msg === 'event stream deletion failed; it is tried again' && line.event_stream_id === doomed,
            ),
          );
          assert.equal(failed.level, 50);
          assert.match(String((failed.err as { message: string }).message), /refused by the test/);
          assert.equal((await rowsOf(server.services.database, doomed)).attempts, 3, 'the chunk rolled back');
        } finally {
          await sql`DROP TRIGGER refuse_delete${sql.raw(kind === 'postgres' ? ' ON delivery_attempts' : '')}`.execute(
            db,
          );
        }
        await deletedLine(doomed);
        assert.deepEqual(await rowsOf(server.services.database, doomed), {
          deliveries: 0,
          attempts: 0,
          stream: undefined,
        });
      });

      it('a snapshot taken while a deletion waits restores it waiting, unseen, and it finishes', async () => {
        await deletionWorker().pause();
        const doomed = await createStream('snapshot');
        await fill(server.services.database, server.tenant.id, doomed, 4, 1);
        assert.equal((await deleteStream(doomed)).statusCode, 204);
        const snapshot = await server.services.snapshots.snapshot();
        // A restore pauses and resumes every worker, this one too.
        await server.services.snapshots.restore(snapshot);
        assert.equal((await server.request({ url: `/api/v2/event-streams/${doomed}` })).statusCode, 404);
        assert.ok(!(await listStreams()).some((s) => s.id === doomed));
        await deletedLine(doomed);
        assert.deepEqual(await rowsOf(server.services.database, doomed), {
          deliveries: 0,
          attempts: 0,
          stream: undefined,
        });
      });
    });

    describe(`a deletion interrupted by a stop (${kind})`, () => {
      let database: TestDatabase;
      const running: Services[] = [];
      before(async () => {
        database = await createTestDatabase(kind);
      });
      after(async () => {
        for (const services of running) await services.close();
        await database.drop();
      });

      const start = async (logStream: Writable) => {
        const config = loadConfig({
          DATA_DIR: database.dataDir,
          DATABASE_URL: database.databaseUrl,
          TENANT_DOMAIN: 'interrupted.test',
          LOG_LEVEL: 'info',
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_WORKER: 'false',
          EVENT_STREAM_DELETION_CHUNK_ROWS: '5',
        });
        const services = await createServices(config, { logStream });
        running.push(services);
        return services;
      };

      it('is finished by the next start on the same database', async () => {
        const first = logLines();
        const services = await start(first.stream);
        const { tenant } = await bootstrap(services);
        const stream = await services.eventStreams.streams.create(tenant.id, {
          name: 'interrupted',
          destination: webhook('http://127.0.0.1:9/hook') as never,
        });
        await fill(services.database, tenant.id, stream.id, 100, 2);
        await services.eventStreams.streams.delete(tenant.id, stream.id);
        // The node stops once the removal is under way: after its current chunk.
        while ((await rowsOf(services.database, stream.id)).attempts === 200) await nextTurn();
        await services.streamDeletionWorker!.stop();
        await services.close();
        const stopped = first.lines.find((line) => line.msg === 'event stream deletion paused: the node is stopping');
        assert.ok(stopped, 'the stop was logged');
        assert.equal(stopped.event_stream_id, stream.id);

        // What the first node removed: its last run's line, and those of the turns it handed on before
        // (a run lasts a turn of a second; on a slow machine the removal took more than one).
        const removedBy = (lines: LogLine[], last: string) =>
          lines
            .filter(
              (line) =>
                line.event_stream_id === stream.id &&
                (line.msg === last || line.msg === 'event stream deletion hands its turn on'),
            )
            .reduce((sum, line) => sum + Number(line.rows), 0);
        const removedFirst = removedBy(first.lines, 'event stream deletion paused: the node is stopping');
        assert.ok(removedFirst > 0 && removedFirst < 300, `stopped half-way: ${removedFirst} of 300 rows removed`);

        // The next start goes on at once (its rows are not read before it: it may have begun already).
        const second = logLines();
        const restarted = await start(second.stream);
        await eventually('the deletion finished after the restart', async () =>
          second.lines.find((line) => line.msg === 'event stream deleted' && line.event_stream_id === stream.id),
        );
        assert.equal(removedBy(second.lines, 'event stream deleted'), 300 - removedFirst, 'it removed the rest');
        assert.deepEqual(await rowsOf(restarted.database, stream.id), {
          deliveries: 0,
          attempts: 0,
          stream: undefined,
        });
      });
    });
  }),
);
