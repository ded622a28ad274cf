import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PassThrough } from 'node:stream';
import BetterSqlite3 from 'better-sqlite3';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../../../src/config.ts';
import { outcomeOf } from '../../../../src/modules/event-streams/delivery/outcome.ts';
import { claimDue } from '../../../../src/modules/event-streams/store/claim.ts';
import { recordOutcomes, type Outcome } from '../../../../src/modules/event-streams/store/outcomes.ts';
import { createServices, type Services } from '../../../../src/services.ts';
import { databaseKinds } from '../../../helpers/databases.ts';
import { insertDueDeliveries } from '../../../helpers/delivery-fixture.ts';
import { eventually } from '../../../helpers/eventually.ts';
import { startTestServer, type TestServer } from '../../../helpers/server.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../../../helpers/webhook-receiver.ts';

/** Longer than any test here: a delivery that arrives was not found by the poll. */
const NEVER_POLL = { DELIVERY_POLL_MS: '600000' };

const webhook = (url: string) => ({
  type: 'webhook',
  configuration: { webhook_endpoint: url, webhook_authorization: { method: 'bearer', token: 'worker-token' } },
});

/** A stream POSTing to `url`, created through the API; returns its id. */
async function createStream(server: TestServer, name: string, url: string): Promise<string> {
  const created = await server.request({
    method: 'POST',
    url: '/api/v2/event-streams',
    payload: { name, destination: webhook(url) },
  });
  assert.equal(created.statusCode, 201, created.body);
  return created.json().id as string;
}

for (const kind of databaseKinds()) {
  describe(`claiming and recording deliveries in batches (${kind})`, () => {
    let server: TestServer;
    before(async () => {
      // No worker: the test claims and records by itself.
      server = await startTestServer(kind, { DELIVERY_ALLOW_HTTP: 'true', DELIVERY_WORKER: 'false' });
    });
    after(() => server.close());

    const stream = (name: string) => createStream(server, name, 'http://127.0.0.1:9/hook');
    /** `count` due deliveries to `streamId`, written directly, one event each. */
    const queue = (streamId: string, count: number) =>
      insertDueDeliveries(server.services.database, {
        tenantId: server.tenant.id,
        streamId,
        source: `urn:svc:${server.domain}`,
        count,
      });
    const lease = (ms: number) => new Date(Date.now() + ms).toISOString();
    /** Every free slot open to every stream, and no stream held to one send by a run of failures. */
    const noReserve = { reserve: 0, breakerFailures: 1000 };

    it('gives each stream no more than its room under the cap, and never a delivery under a lease', async () => {
      const [a, b, c] = [await stream('claim-a'), await stream('claim-b'), await stream('claim-c')];
      await queue(a, 10);
      await queue(b, 10);
      await queue(c, 10);
      const db = server.services.database;
      // a has 3 in flight (room 1), c is full (left out), b is idle (room 4).
      const running = new Map([
        [a, 3],
        [c, 4],
      ]);
      const first = await claimDue(db, { leaseMs: 60_000 }, { limit: 20, perStream: 4, ...noReserve, running });
      const per = (rows: typeof first) =>
        Object.fromEntries([a, b, c].map((id) => [id, rows.filter((r) => r.stream_id === id).length]));
      assert.deepEqual(per(first), { [a]: 1, [b]: 4, [c]: 0 });
      for (const claim of first) {
        assert.equal(claim.type, 'user.created', 'the claim brings its event');
        assert.deepEqual(JSON.parse(claim.data), { object: { id: claim.event_id } });
        assert.equal(
          JSON.parse(claim.destination).configuration.webhook_endpoint,
          'http://127.0.0.1:9/hook',
          'and its stream',
        );
        assert.ok(claim.secret !== null);
      }

      // Nothing is in flight now: every stream has its full room, and what the first claim holds is not handed out again.
      const second = await claimDue(
        db,
        { leaseMs: 60_000 },
        { limit: 100, perStream: 4, ...noReserve, running: new Map() },
      );
      assert.deepEqual(per(second), { [a]: 4, [b]: 4, [c]: 4 });
      const held = new Set(first.map((r) => `${r.stream_id} ${r.event_id}`));
      assert.ok(
        second.every((r) => !held.has(`${r.stream_id} ${r.event_id}`)),
        'no delivery claimed twice while its lease runs',
      );

      // Two claims at once (PostgreSQL: two connections) share the rest without overlap.
      const [x, y] = await Promise.all(
        [1, 2].map(() =>
          claimDue(db, { leaseMs: 60_000 }, { limit: 50, perStream: 50, ...noReserve, running: new Map() }),
        ),
      );
      const keys = [...x!, ...y!].map((r) => `${r.stream_id} ${r.event_id}`);
      assert.equal(new Set(keys).size, keys.length);
      assert.equal(keys.length, 30 - first.length - second.length, 'together they claim every delivery left');

      // An expired lease makes a delivery due again.
      const expired = await claimDue(
        db,
        { at: lease(120_000), leaseMs: 60_000 },
        { limit: 100, perStream: 100, ...noReserve, running: new Map() },
      );
      assert.equal(expired.length, 30);
    });

    it('records an attempt only under the lease it was made with, many in one batch', async () => {
      const s = await stream('record');
      await queue(s, 3);
      const db = server.services.database;
      const claimed = await claimDue(
        db,
        { leaseMs: 60_000 },
        { limit: 3, perStream: 3, ...noReserve, running: new Map() },
      );
      assert.equal(claimed.length, 3);
      // The third was redelivered (or re-claimed elsewhere) meanwhile: its lease is not the one the attempt holds.
      await db.db
        .updateTable('deliveries')
        .set({ claimed_until: lease(90_000) })
        .where('stream_id', '=', s)
        .where('event_id', '=', claimed[2]!.event_id)
        .execute();
      const at = new Date().toISOString();
      const outcome = (i: number, delivered: boolean): Outcome => ({
        stream_id: s,
        event_id: claimed[i]!.event_id,
        lease: claimed[i]!.claimed_until,
        status: delivered ? 'delivered' : 'pending',
        attempt_count: 1,
        next_attempt_at: delivered ? at : lease(1000),
        at,
        seq: claimed[i]!.attempt_seq + 1,
        attempt_status: delivered ? 'delivered' : 'failed',
        error_message: delivered ? null : 'Unexpected status code 503 from POST http://127.0. ...',
        duration: 1.25,
        requeued_at: null,
      });
      assert.equal(await recordOutcomes(db, [outcome(0, true), outcome(1, false), outcome(2, true)]), 2);
      const rows = await db.db.selectFrom('deliveries').selectAll().where('stream_id', '=', s).execute();
      const row = (i: number) => rows.find((r) => r.event_id === claimed[i]!.event_id)!;
      assert.deepEqual(
        [row(0).status, row(0).attempt_count, row(0).attempt_seq, row(0).claimed_until],
        ['delivered', 1, 1, null],
      );
      assert.deepEqual(
        [row(1).status, row(1).attempt_count, row(1).attempt_seq, row(1).claimed_until],
        ['pending', 1, 1, null],
      );
      assert.deepEqual(
        [row(2).status, row(2).attempt_count, row(2).attempt_seq],
        ['pending', 0, 0],
        "not recorded: the lease is someone else's",
      );
      const attempts = await db.db
        .selectFrom('delivery_attempts')
        .selectAll()
        .where('stream_id', '=', s)
        .orderBy('event_id')
        .execute();
      assert.deepEqual(
        attempts.map((a) => [a.event_id, a.seq, a.status, a.error_message, Number(a.duration)]).sort(),
        [
          [claimed[0]!.event_id, 1, 'delivered', null, 1.25],
          [claimed[1]!.event_id, 1, 'failed', 'Unexpected status code 503 from POST http://127.0. ...', 1.25],
        ].sort(),
      );
      // Recording the same attempt again changes nothing: its lease is gone.
      assert.equal(await recordOutcomes(db, [outcome(0, true)]), 0);
    });

    it('records one attempt when a batch holds two of one delivery, the first made under a lease that ran out', async () => {
      // The recording failed for longer than the lease (the database was away): the same worker claimed
      // the delivery again and sent it again, and both outcomes wait in one batch.
      const s = await stream('twice');
      await queue(s, 1);
      const db = server.services.database;
      const limits = { limit: 1, perStream: 1, ...noReserve, running: new Map() };
      const [first] = await claimDue(db, { leaseMs: 1000 }, limits);
      const [again] = await claimDue(db, { at: lease(5000), leaseMs: 60_000 }, limits);
      assert.ok(first && again && first.event_id === again.event_id && first.claimed_until !== again.claimed_until);
      const sent = { kind: 'delivered', durationMs: 2 } as const;
      const settings = { deliveryRetryScheduleMs: [1000], deliveryRetryAfterMaxMs: 60_000 };
      const at = new Date().toISOString();
      assert.equal(
        await recordOutcomes(db, [outcomeOf(first, sent, settings, at), outcomeOf(again, sent, settings, at)]),
        1,
      );
      const attempts = await db.db
        .selectFrom('delivery_attempts')
        .select(['seq', 'status'])
        .where('stream_id', '=', s)
        .execute();
      assert.deepEqual(
        attempts.map((a) => [a.seq, a.status]),
        [[1, 'delivered']],
      );
      const row = await db.db.selectFrom('deliveries').selectAll().where('stream_id', '=', s).executeTakeFirstOrThrow();
      assert.deepEqual([row.status, row.attempt_seq, row.claimed_until], ['delivered', 1, null]);
    });
  });

  describe(`an attempt that cannot be recorded holds back no other (${kind})`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    const logs: string[] = [];
    before(async () => {
      receiver = await startWebhookReceiver();
      const logStream = new PassThrough();
      logStream.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
      server = await startTestServer(
        kind,
        {
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_POLL_MS: '50',
          DELIVERY_TIMEOUT_MS: '1000',
          DELIVERY_LEASE_MS: '3000',
          LOG_LEVEL: 'warn',
        },
        { logStream },
      );
    });
    after(async () => {
      await server.close();
      await receiver.close();
    });

    /** Inserting an attempt of `streamId` fails, as a bug or a constraint would make it (a real trigger). */
    const poison = async (streamId: string) => {
      const { sqlite, pool } = server.services.database;
      if (sqlite) {
        sqlite.exec(`CREATE TRIGGER poison BEFORE INSERT ON delivery_attempts WHEN NEW.stream_id = '${streamId}'
          BEGIN SELECT RAISE(ABORT, 'poisoned attempt'); END`);
      } else {
        await pool!.query(`CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          IF NEW.stream_id = '${streamId}' THEN RAISE EXCEPTION 'poisoned attempt'; END IF; RETURN NEW; END $$`);
        await pool!.query(
          'CREATE TRIGGER poison BEFORE INSERT ON delivery_attempts FOR EACH ROW EXECUTE FUNCTION poison()',
        );
      }
    };
    const cure = async () => {
      const { sqlite, pool } = server.services.database;
      if (sqlite) sqlite.exec('DROP TRIGGER poison');
      else await pool!.query('DROP TRIGGER poison ON delivery_attempts');
    };
    const delivery = (streamId: string) =>
      server.services.database.db
        .selectFrom('deliveries')
        .select(['status', 'attempt_seq', 'claimed_until'])
        .where('stream_id', '=', streamId)
        .executeTakeFirstOrThrow();
    const until = async (what: string, check: () => Promise<boolean>) => {
      const deadline = Date.now() + 20_000;
      while (!(await check())) {
        assert.ok(Date.now() < deadline, `waited too long for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const testEvent = async (streamId: string) => {
      const sent = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${streamId}/test`,
        payload: { event_type: 'user.created' },
      });
      assert.equal(sent.statusCode, 202, sent.body);
      return sent.json().id as string;
    };

    it('records the others one at a time, gives the attempt up once its lease ran out, and sends it again', async () => {
      const streams: string[] = [];
      for (const name of ['poisoned', 'healthy']) streams.push(await createStream(server, name, receiver.url));
      const [poisoned, healthy] = streams as [string, string];
      await poison(poisoned);

      // Both answers held until both requests arrived, then given together: the two attempts end in one
      // round and are recorded in one batch, which the poisoned one fails.
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      receiver.beforeAnswer(() => released);
      const stuck = await testEvent(poisoned);
      const passing = await testEvent(healthy);
      await receiver.waitFor((r) => r.length >= 2, 10_000);
      receiver.beforeAnswer(undefined);
      release();
      await until('the healthy delivery', async () => (await delivery(healthy)).status === 'delivered');
      // Recorded in the round that failed the batch: one at a time, the database found working.
      assert.match(logs.join(''), /recording the attempts together failed; they were recorded one at a time/);
      assert.match(logs.join(''), new RegExp(`recording the attempt of event ${stuck} to stream ${poisoned} failed`));
      const held = await delivery(poisoned);
      assert.deepEqual([held.status, held.attempt_seq], ['pending', 0]);
      assert.ok(held.claimed_until, 'the poisoned delivery is still under its lease');
      assert.equal(receiver.requests.filter((r) => r.json().id === passing).length, 1);

      // Once its lease ran out, the attempt is given up (logged) and the delivery sent again.
      await receiver.waitFor((r) => r.filter((request) => request.json().id === stuck).length >= 2, 15_000);
      const givenUp = `event ${stuck} to stream ${poisoned} could not be recorded and is given up`;
      await until('the attempt given up', async () => logs.join('').includes(givenUp));
      await cure();
      await until('the poisoned delivery, cured', async () => (await delivery(poisoned)).status === 'delivered');
      const attempts = await server.services.database.db
        .selectFrom('delivery_attempts')
        .select(['seq', 'status'])
        .where('stream_id', '=', poisoned)
        .orderBy('seq')
        .execute();
      // The attempts made under the poison are not recorded; the first recorded is seq 1.
      assert.deepEqual(attempts[0], { seq: 1, status: 'delivered' });
      assert.equal(attempts.length, 1);
      // Said when each attempt first failed and when the first was given up, not at every 50 ms round
      // of the three-second lease between (about 60 lines).
      const lines = logs
        .join('')
        .split('\n')
        .filter((line) => line.includes(`event ${stuck} to stream`));
      assert.ok(lines.length >= 2 && lines.length <= 4, `${lines.length} log lines about the attempts`);
      // No line of the log carries the stream's bearer token.
      assert.ok(!logs.join('').includes('worker-token'));
    });

    it('keeps every attempt through an outage of the database and records it once the database is back', async () => {
      const streamId = await createStream(server, 'outage', receiver.url);
      const { sqlite, pool } = server.services.database;
      // The outage begins once the attempt was sent, before its record: on SQLite another connection
      // holds the write lock (SQLITE_BUSY once busy_timeout has passed); on PostgreSQL every attempt's
      // insert fails with the code of a terminated connection. It ends half a second later.
      let ended!: Promise<void>;
      const from = logs.join('').length;
      receiver.beforeAnswer(async () => {
        receiver.beforeAnswer(undefined);
        let end: () => Promise<void>;
        if (sqlite) {
          const locker = new BetterSqlite3(sqlite.name);
          locker.exec('BEGIN IMMEDIATE');
          end = async () => {
            locker.exec('COMMIT');
            locker.close();
          };
        } else {
          await pool!.query(`CREATE FUNCTION outage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
            RAISE EXCEPTION 'terminating connection due to administrator command' USING ERRCODE = '57P01'; END $$`);
          await pool!.query(
            'CREATE TRIGGER outage BEFORE INSERT ON delivery_attempts FOR EACH ROW EXECUTE FUNCTION outage()',
          );
          end = async () => void (await pool!.query('DROP TRIGGER outage ON delivery_attempts'));
        }
        ended = new Promise((resolve, reject) => setTimeout(() => end().then(resolve, reject), 500));
      });
      const eventId = await testEvent(streamId);
      await receiver.waitFor((r) => r.some((request) => request.json().id === eventId), 10_000);
      await until('the outage to end', async () => ended !== undefined);
      await ended;
      await until('the delivery recorded', async () => (await delivery(streamId)).status === 'delivered');
      const during = logs.join('').slice(from);
      // The outage was met (the round's error), and no attempt was taken for at fault or given up.
      assert.match(during, sqlite ? /SQLITE_BUSY|database is locked/ : /terminating connection/);
      assert.doesNotMatch(during, /an attempt could not be recorded/);
      const attempts = await server.services.database.db
        .selectFrom('delivery_attempts')
        .select(['seq', 'status'])
        .where('stream_id', '=', streamId)
        .execute();
      assert.deepEqual(attempts, [{ seq: 1, status: 'delivered' }]);
      assert.equal(receiver.requests.filter((r) => r.json().id === eventId).length, 1, 'sent once');
    });
  });

  describe(`workers are woken by commits, not found by the poll (${kind})`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    before(async () => {
      receiver = await startWebhookReceiver();
      server = await startTestServer(kind, {
        DELIVERY_ALLOW_HTTP: 'true',
        DELIVERY_RETRY_SCHEDULE_MS: '50,50,50',
        ...NEVER_POLL,
      });
    });
    after(async () => {
      await server.close();
      await receiver.close();
    });

    it('delivers user changes, test events, redeliveries and retries while the poll never comes', async () => {
      const created = await server.request({
        method: 'POST',
        url: '/api/v2/event-streams',
        payload: { name: 'wake', subscriptions: [{ event_type: 'user.created' }], destination: webhook(receiver.url) },
      });
      assert.equal(created.statusCode, 201, created.body);
      const streamId = created.json().id as string;
      // Refused, then 503 (a retry the worker schedules for itself), then accepted.
      receiver.program([400, 503], 204);
      const user = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: {
          connection: 'Username-Password-Authentication',
          email: 'wake@example.com',
          password: 'correct horse battery',
        },
      });
      assert.equal(user.statusCode, 201, user.body);
      const [first] = await receiver.waitFor((r) => r.length >= 1, 30_000);
      const eventId = first!.json().id as string;
      const status = async () =>
        (
          await server.services.database.db
            .selectFrom('deliveries')
            .select('status')
            .where('stream_id', '=', streamId)
            .where('event_id', '=', eventId)
            .executeTakeFirstOrThrow()
        ).status;
      const waitFor = async (wanted: string) => {
        const deadline = Date.now() + 30_000;
        while ((await status()) !== wanted) {
          assert.ok(Date.now() < deadline, `delivery ${eventId} to become ${wanted}`);
          await new Promise((r) => setTimeout(r, 10));
        }
      };
      await waitFor('failed');

      const again = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${streamId}/redeliver/${eventId}`,
      });
      assert.equal(again.statusCode, 202);
      await receiver.waitFor((r) => r.length >= 3, 30_000);
      await waitFor('delivered');
      const attempts = await server.services.database.db
        .selectFrom('delivery_attempts')
        .select('status')
        .where('stream_id', '=', streamId)
        .where('event_id', '=', eventId)
        .orderBy('seq')
        .execute();
      assert.deepEqual(
        attempts.map((a) => a.status),
        ['failed', 'retrying', 'failed', 'delivered'],
      );

      const test = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${streamId}/test`,
        payload: { event_type: 'user.created' },
      });
      assert.equal(test.statusCode, 202);
      const requests = await receiver.waitFor((r) => r.length >= 4, 30_000);
      assert.equal(requests[3]!.json().id, test.json().id);
    });
  });

  describe(`after a claim that left slots free, the next waits for what may let it find more (${kind})`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    /** The answers the receiver holds back, in the order the requests came. */
    const held: Array<() => void> = [];
    before(async () => {
      receiver = await startWebhookReceiver();
      // Each request waits for the test to let it be answered: its send stays in flight until then.
      receiver.beforeAnswer(() => new Promise<void>((answer) => held.push(answer)));
      server = await startTestServer(kind, {
        DELIVERY_ALLOW_HTTP: 'true',
        DELIVERY_PER_STREAM_CONCURRENCY: '1',
        METRICS_PORT: '0',
        ...NEVER_POLL,
      });
    });
    after(async () => {
      receiver.beforeAnswer(undefined);
      for (const answer of held) answer();
      await server.close();
      await receiver.close();
    });

    /** The worker's claims so far, as /metrics shows them: those that took deliveries and those that found none. */
    const claims = async () => {
      const response = await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`);
      assert.equal(response.status, 200);
      const text = await response.text();
      const count = (found: string) =>
        Number(
          new RegExp(`^tenantry_webhook_delivery_claims_total\\{found="${found}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0,
        );
      return { some: count('some'), none: count('none') };
    };

    it('claims no more while the one send of a stream at its cap is in flight, and again once it finishes', async () => {
      const streamId = await createStream(server, 'shortfall', receiver.url);
      // The worker's first claims (at start; on PostgreSQL also once its LISTEN connection is up) found
      // nothing, and the poll is ten minutes away: from here on it claims only when woken.
      const start = await eventually('the first claims to be done', async () => {
        const first = await claims();
        await sleep(200);
        const later = await claims();
        return first.none >= 1 && later.none === first.none && later.some === first.some ? later : undefined;
      });
      assert.equal(start.some, 0);
      const since = async () => {
        const now = await claims();
        return { some: now.some - start.some, none: now.none - start.none };
      };

      // Three deliveries written without a wake-up, then a test event whose commit wakes the worker: four
      // due to a stream that takes one at a time.
      await insertDueDeliveries(server.services.database, {
        tenantId: server.tenant.id,
        streamId,
        source: `urn:svc:${server.domain}`,
        count: 3,
      });
      const test = await server.request({
        method: 'POST',
        url: `/api/v2/event-streams/${streamId}/test`,
        payload: { event_type: 'user.created' },
      });
      assert.equal(test.statusCode, 202, test.body);

      for (let sent = 1; sent <= 4; sent++) {
        await receiver.waitFor((r) => r.length >= sent, 10_000);
        // One claim took this delivery and left every other slot free. The stream is at its cap, so a claim
        // now would find nothing, and nothing may change that before this send finishes: none runs.
        const claimed = await since();
        assert.deepEqual(claimed, { some: sent, none: 0 }, `the claims up to send ${sent}`);
        await sleep(300);
        assert.deepEqual(await since(), claimed, `no claim while send ${sent} is in flight`);
        assert.equal(receiver.requests.length, sent, 'one send at a time to the stream');
        // Its answer: the send finishes, the stream has room again, and the next claim takes the next.
        held[sent - 1]!();
      }

      const ids = receiver.requests.map((r) => r.json().id as string);
      assert.equal(new Set(ids).size, 4);
      assert.ok(ids.includes(test.json().id));
      await eventually('every delivery recorded as delivered', async () => {
        const rows = await server.services.database.db
          .selectFrom('deliveries')
          .select('status')
          .where('stream_id', '=', streamId)
          .execute();
        return rows.length === 4 && rows.every((row) => row.status === 'delivered') ? true : undefined;
      });
      // The last send finishing let one more claim run; with nothing left it found none, and it is the last.
      await eventually('the claim after the last send', async () => ((await since()).none === 1 ? true : undefined));
      await sleep(300);
      assert.deepEqual(await since(), { some: 4, none: 1 });
    });
  });

  describe(
    `a commit on one node wakes the worker of another (${kind})`,
    { skip: kind === 'sqlite' && 'SQLite is single-node' },
    () => {
      let api: TestServer;
      let worker: Services;
      let receiver: WebhookReceiver;
      before(async () => {
        receiver = await startWebhookReceiver();
        // The node taking the requests has no worker; the other one only works (and would poll in ten minutes).
        api = await startTestServer(kind, { DELIVERY_ALLOW_HTTP: 'true', DELIVERY_WORKER: 'false' });
        worker = await createServices(
          loadConfig({
            DATA_DIR: api.database.dataDir,
            DATABASE_URL: api.database.databaseUrl,
            LOG_LEVEL: 'silent',
            DELIVERY_ALLOW_HTTP: 'true',
            ...NEVER_POLL,
          }),
        );
      });
      after(async () => {
        await worker.close();
        await api.close();
        await receiver.close();
      });

      it('the other node sends the event of every user the first one creates', async () => {
        const created = await api.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: {
            name: 'cross-node',
            subscriptions: [{ event_type: 'user.created' }],
            destination: webhook(receiver.url),
          },
        });
        assert.equal(created.statusCode, 201, created.body);
        const emails: string[] = [];
        for (let i = 0; i < 3; i++) {
          const email = `node-${i}@example.com`;
          assert.equal(
            (
              await api.request({
                method: 'POST',
                url: '/api/v2/users',
                payload: { connection: 'Username-Password-Authentication', email, password: 'correct horse battery' },
              })
            ).statusCode,
            201,
          );
          emails.push(email);
          // One at a time: each event is sent before the next user exists, so each commit woke the worker.
          await receiver.waitFor((r) => r.length >= i + 1, 30_000);
        }
        assert.deepEqual(
          receiver.requests.map((r) => r.json().data.object.email),
          emails,
        );
      });
    },
  );
}
