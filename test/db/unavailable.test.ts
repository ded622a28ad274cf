import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { databaseUnavailable } from '../../src/db/unavailable.ts';
import { databaseKinds } from '../helpers/databases.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { waitUntil } from '../helpers/webhook-receiver.ts';

const USER = { connection: 'Username-Password-Authentication', password: 'correct horse battery' };
const SEGMENT_RULES = [{ match: { country: ['US'] } }];
/** The test database's backends but the admin's own: the server's pooled connections. */
const OTHER_BACKENDS = 'datname = current_database() AND pid <> pg_backend_pid()';

describe('database conditions named', () => {
  const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });
  it('maps each condition to its errorCode, and leaves real faults alone', () => {
    const cases: Array<[Error, string | undefined]> = [
      [coded('SQLITE_FULL'), 'insufficient_storage'],
      [coded('SQLITE_READONLY'), 'database_read_only'],
      [coded('SQLITE_READONLY_DBMOVED'), 'database_read_only'],
      [coded('SQLITE_IOERR_WRITE'), 'database_io_error'],
      [coded('SQLITE_BUSY'), 'database_busy'],
      [coded('SQLITE_CONSTRAINT_UNIQUE'), undefined],
      [coded('SQLITE_ERROR'), undefined],
      [coded('57P01'), 'database_unavailable'],
      [coded('57P02'), 'database_unavailable'],
      [coded('57P03'), 'database_unavailable'],
      [coded('08006'), 'database_unavailable'],
      [coded('08003'), 'database_unavailable'],
      [coded('ECONNREFUSED'), 'database_unavailable'],
      [coded('ECONNRESET'), 'database_unavailable'],
      [coded('53100'), 'insufficient_storage'],
      [coded('25006'), 'database_read_only'],
      [coded('40P01'), 'database_busy'],
      [coded('40001'), 'database_busy'],
      [coded('23505'), undefined],
      [coded('42P01'), undefined],
      [new Error('Connection terminated unexpectedly'), 'database_unavailable'],
      [new Error('Client has encountered a connection error and is not queryable'), 'database_unavailable'],
      [new Error('cannot rollback - no transaction is active'), undefined],
      [new TypeError('x is undefined'), undefined],
    ];
    for (const [error, errorCode] of cases) {
      assert.equal(
        databaseUnavailable(error)?.errorCode,
        errorCode,
        (error as { code?: string }).code ?? error.message,
      );
    }
  });
});

/** A fresh tmpfs of `size` at a new directory, or why none can be had here. */
function mountTmpfs(size: string): { dir: string } | { skip: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
    return { dir };
  } catch (error) {
    fs.rmdirSync(dir);
    const reason = String((error as { stderr?: Buffer }).stderr ?? error).trim();
    return { skip: `mounting a tmpfs is not permitted here (${reason}); run as root to test a full disk` };
  }
}

describe('a full disk under SQLite', () => {
  const mounted = mountTmpfs('8m');
  const skip = 'skip' in mounted ? mounted.skip : false;
  let server: TestServer;
  let dir: string;
  const logs: string[] = [];
  before(async () => {
    if (skip) return;
    dir = (mounted as { dir: string }).dir;
    const logStream = new PassThrough();
    logStream.on('data', (chunk: Buffer) => logs.push(...chunk.toString().split('\n').filter(Boolean)));
    // No background work: what is under test is what requests meet.
    const env = {
      DATA_DIR: path.join(dir, 'data'),
      LOG_LEVEL: 'error',
      DELIVERY_WORKER: 'false',
      MAIL_WORKER: 'false',
    };
    server = await startTestServer('sqlite', env, { logStream });
  });
  const createSegment = (name: string) =>
    server.request({
      method: 'POST',
      url: '/api/v2/experimentation/segments',
      payload: { name, rules: SEGMENT_RULES },
    });
  after(async () => {
    if (skip) return;
    await server.close();
    execFileSync('umount', [dir]);
    fs.rmdirSync(dir);
  });

  it(
    'refuses writes with 503 naming SQLITE_FULL, keeps serving reads, and writes again once space is freed',
    { skip },
    async () => {
      const before = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: { ...USER, email: 'before-full@example.com' },
      });
      assert.equal(before.statusCode, 201, before.body);

      // An empty write-ahead log must grow for the next write to land.
      server.services.database.sqlite!.pragma('wal_checkpoint(TRUNCATE)');
      const filler = path.join(dir, 'filler');
      assert.throws(() => fs.writeFileSync(filler, Buffer.alloc(16 * 1024 * 1024)), { code: 'ENOSPC' });

      const full = {
        statusCode: 503,
        error: 'Service Unavailable',
        message: 'The database is out of disk space; try again later.',
        errorCode: 'insufficient_storage',
      };
      const user = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: { ...USER, email: 'while-full@example.com' },
      });
      assert.equal(user.statusCode, 503, user.body);
      assert.deepEqual(user.json(), full);
      assert.equal(user.headers['retry-after'], '30');
      const segment = await createSegment('while full');
      assert.equal(segment.statusCode, 503, segment.body);
      assert.deepEqual(segment.json(), full);

      const logged = logs.map((line) => JSON.parse(line)).filter((line) => line.code === 'SQLITE_FULL');
      assert.equal(logged.length, 2, logs.join('\n'));
      for (const line of logged) {
        assert.equal(line.level, 50, 'at error level');
        assert.match(line.msg, /SQLITE_FULL/);
        assert.match(line.reqId, /./, 'through the request logger');
      }
      assert.ok(!logs.some((line) => /no transaction is active/.test(line)), 'not masked by a failed ROLLBACK');

      const read = await server.request({ url: '/api/v2/users-by-email?email=before-full@example.com' });
      assert.equal(read.statusCode, 200);
      assert.equal(read.json().length, 1);
      assert.deepEqual(
        (await server.request({ url: '/api/v2/users-by-email?email=while-full@example.com' })).json(),
        [],
        'nothing written',
      );
      assert.equal((await server.request({ url: '/api/v2/experimentation/segments' })).statusCode, 200);

      fs.rmSync(filler);
      const after = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: { ...USER, email: 'while-full@example.com' },
      });
      assert.equal(after.statusCode, 201, after.body);
      const segmentAfter = await createSegment('while full');
      assert.equal(segmentAfter.statusCode, 201, segmentAfter.body);
    },
  );
});

for (const kind of databaseKinds()) {
  describe(
    `PostgreSQL ending the server's connections (${kind})`,
    { skip: kind === 'sqlite' && 'PostgreSQL only' },
    () => {
      let server: TestServer;
      let admin: pg.Client;
      const logs: string[] = [];
      before(async () => {
        if (kind === 'sqlite') return;
        const logStream = new PassThrough();
        logStream.on('data', (chunk: Buffer) => logs.push(...chunk.toString().split('\n').filter(Boolean)));
        server = await startTestServer(
          kind,
          { LOG_LEVEL: 'error', DELIVERY_WORKER: 'false', MAIL_WORKER: 'false' },
          { logStream },
        );
        admin = new pg.Client({ connectionString: server.database.databaseUrl });
        await admin.connect();
      });
      after(async () => {
        if (kind === 'sqlite') return;
        await admin.end();
        await server.close();
      });

      /** Ends every backend of the test database but the admin's own. */
      // pg_terminate_backend only signals: each backend ends a moment later. Requests meant to meet fresh
      // connections wait until the ended ones are gone, or one sent meanwhile on a connection about to end
      // would fail for a reason the test did not set up. (Outside a transaction: one sees a fixed snapshot.)
      let ended: number[] = [];
      const terminateServerConnections = async () => {
        const result = await admin.query(
          `SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE ${OTHER_BACKENDS}`,
        );
        ended = result.rows.map((row: { pid: number }) => row.pid);
        return result.rowCount;
      };
      const endedBackendsGone = () =>
        waitUntil(
          async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1)', [ended])).rowCount === 0,
          10_000,
          () => `the ended backends ${ended.join(', ')} to exit`,
        );
      const createUser = (email: string) =>
        server.request({ method: 'POST', url: '/api/v2/users', payload: { ...USER, email } });
      const lookUp = () => server.request({ url: '/api/v2/users-by-email?email=idle@example.com' });

      it('requests meeting pooled connections that were ended answer as before, or 503, never 500', async () => {
        const answers: number[] = [];
        for (let round = 0; round < 3; round++) {
          // Several at once, so that the pool's idle connections are all lent out, some before it heard they ended.
          // From the second round on, the pool may still hold a connection the last round ended that it has
          // not heard of yet: a warm-up request meeting it answers 503, like the burst's, and is sent again.
          let warm = await Promise.all(Array.from({ length: 8 }, () => lookUp()));
          for (let i = 0; i < 10 && warm.some((r) => r.statusCode === 503); i++) {
            warm = await Promise.all(Array.from({ length: 8 }, () => lookUp()));
          }
          assert.deepEqual(
            warm.map((r) => r.statusCode),
            Array(8).fill(200),
            warm.map((r) => r.body).join('\n'),
          );
          assert.ok((await terminateServerConnections())! >= 1);
          const burst = await Promise.all(
            Array.from({ length: 8 }, (_, i) =>
              i % 2 === 0 ? createUser(`idle-${round}-${i}@example.com`) : lookUp(),
            ),
          );
          for (const response of burst) {
            answers.push(response.statusCode);
            if (response.statusCode === 503) assert.equal(response.json().errorCode, 'database_unavailable');
          }
        }
        assert.ok(
          answers.every((status) => status === 201 || status === 200 || status === 503),
          answers.join(','),
        );
        // A connection ended while idle is dropped once the pool hears of it; on a loaded machine one request
        // may still meet it (503, as above). The pool then serves again within a few requests.
        let after = await lookUp();
        for (let i = 0; i < 10 && after.statusCode === 503; i++) after = await lookUp();
        assert.equal(after.statusCode, 200, 'the pool replaced its connections');
      });

      it('a statement running when its connection is ended answers 503 with Retry-After, and is not applied', async () => {
        logs.length = 0;
        await admin.query('BEGIN');
        await admin.query('LOCK TABLE users IN ACCESS EXCLUSIVE MODE');
        const pending = createUser('in-flight@example.com');
        await waitUntil(
          async () => {
            // Inside the admin's transaction, pg_stat_activity is read once and kept until it ends: a
            // first look taken before the request reached the lock would be seen again at every look.
            await admin.query('SELECT pg_stat_clear_snapshot()');
            const waiting = await admin.query(
              `SELECT 1 FROM pg_stat_activity WHERE ${OTHER_BACKENDS} AND wait_event_type = 'Lock'`,
            );
            return waiting.rowCount! > 0;
          },
          10_000,
          () => 'the request to wait on the lock',
        );
        await terminateServerConnections();
        await admin.query('ROLLBACK');
        const response = await pending;
        assert.equal(response.statusCode, 503, response.body);
        assert.deepEqual(response.json(), {
          statusCode: 503,
          error: 'Service Unavailable',
          message: 'The database cannot be reached or its connection was lost; try again later.',
          errorCode: 'database_unavailable',
        });
        assert.equal(response.headers['retry-after'], '1');
        // The request's own lines: a background worker's poll may meet an ended connection too, and says so itself.
        const logged = logs.map((line) => JSON.parse(line)).filter((line) => line.reqId !== undefined);
        assert.deepEqual(
          logged.map((line) => [line.level, line.code]),
          [[50, '57P01']],
          `named by PostgreSQL's own code: ${logs.join('\n')}`,
        );
        assert.match(logged[0].msg, /terminating connection due to administrator command/);

        const users = await admin.query(`SELECT count(*)::int AS n FROM users WHERE email = 'in-flight@example.com'`);
        assert.equal(users.rows[0].n, 0, 'not applied, nor retried behind the client');
        await endedBackendsGone();
        const again = await createUser('in-flight@example.com');
        assert.equal(again.statusCode, 201, again.body);
      });
    },
  );
}
