import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, eachDatabase, type TestDatabase } from '../../helpers/databases.ts';
import { eventually } from '../../helpers/eventually.ts';
import { api, processToken, startServerProcess, type ServerProcess } from '../../helpers/server-process.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { pendingJob } from '../../../src/modules/users-imports/service.ts';

/** Large enough that the import is still under way when its node is killed. */
const USERS = 60_000;
const LEASE_MS = '1500';

const email = (i: number) => `user${i}@durable.example`;

async function uploadNdjson(server: ServerProcess, token: string, connectionId: string, lines: string) {
  const form = new FormData();
  form.append('users', new Blob([lines]), 'users.ndjson');
  form.append('connection_id', connectionId);
  const response = await fetch(`${server.base}/api/v2/jobs/users-imports`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, host: 'process.test' },
    body: form,
  });
  const body = (await response.json()) as { id: string };
  assert.equal(response.status, 201, JSON.stringify(body));
  return body.id;
}

describe('a users import whose node dies', { concurrency: true }, () => {
  eachDatabase((kind) => {
    let database: TestDatabase;
    before(async () => {
      database = await createTestDatabase(kind);
    });
    after(() => database.drop());

    it('is resumed by the next node from its last batch: every user imported once, none refused', async () => {
      const env = { USERS_IMPORT_LEASE_MS: LEASE_MS };
      const first = await startServerProcess(database, env);
      let second: ServerProcess | undefined;
      try {
        const token = await processToken(first);
        const connections = await api(first, token, 'GET', '/connections?strategy=auth0');
        const connectionId = connections.body[0].id as string;
        const lines = Array.from({ length: USERS }, (_, i) => JSON.stringify({ email: email(i), name: `User ${i}` }));
        const id = await uploadNdjson(first, token, connectionId, lines.join('\n'));

        // Killed once some batches committed and well before the end.
        const midway = await eventually(
          'the import under way',
          async () => {
            const job = (await api(first, token, 'GET', `/jobs/${id}`)).body;
            return job.status === 'processing' && job.percentage_done > 0 ? job : undefined;
          },
          60_000,
        );
        await first.kill();
        assert.ok(midway.percentage_done < 100, JSON.stringify(midway));

        second = await startServerProcess(database, env);
        const resumedToken = await processToken(second);
        const done = await eventually(
          'the import finished on the second node',
          async () => {
            const job = (await api(second!, resumedToken, 'GET', `/jobs/${id}`)).body;
            return job.status === 'completed' || job.status === 'failed' ? job : undefined;
          },
          120_000,
        );
        // A restart from the top would refuse the users the first node committed as duplicates.
        assert.deepEqual(done.summary, { failed: 0, updated: 0, inserted: USERS, total: USERS });
        assert.equal((await api(second, resumedToken, 'GET', `/jobs/${id}/errors`)).status, 204);
        for (const i of [0, Math.floor(USERS / 2), USERS - 1]) {
          const found = await api(second, resumedToken, 'GET', `/users-by-email?email=${email(i)}`);
          assert.equal(found.body.length, 1, email(i));
        }
      } finally {
        await first.kill().catch(() => undefined);
        await second?.stop();
      }
    });
  });
});

describe('a users import that cannot finish', () => {
  for (const kind of ['sqlite'] as const) {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(kind, { USERS_IMPORT_LEASE_MS: '1000' });
    });
    after(() => server.close());

    /** A job row as an upload leaves it, with whatever the case needs changed. */
    async function job(changes: Record<string, unknown>): Promise<string> {
      const id = `job_${Math.random().toString(36).slice(2, 10).padEnd(16, '0').slice(0, 16)}`;
      const connection = (await server.services.connections.byName(
        server.tenant.id,
        'Username-Password-Authentication',
      ))!;
      const at = new Date().toISOString();
      const row = pendingJob({
        id,
        tenantId: server.tenant.id,
        connection,
        file: { format: 'ndjson', bytes: 30, records: 1 },
        fields: {},
        at,
      });
      await server.services.database.db
        .insertInto('users_imports')
        .values({ ...row, ...changes })
        .execute();
      server.services.usersImportWorker!.wake();
      return id;
    }

    async function failed(id: string) {
      return eventually(`job ${id} failed`, async () => {
        const response = await server.request({ method: 'GET', url: `/api/v2/jobs/${id}` });
        const body = response.json();
        return body.status === 'failed' ? body : body.status === 'completed' ? assert.fail('completed') : undefined;
      });
    }

    it('fails visibly, with why, when its stored file is not whole', async () => {
      const id = await job({});
      const body = await failed(id);
      assert.equal(body.status_details, 'The import failed: the stored users file holds 0 of its 30 bytes.');
      assert.deepEqual(body.summary, { failed: 0, updated: 0, inserted: 0, total: 1 });
      // The errors of a failed job are the job itself, as the original answers.
      const errors = await server.request({ method: 'GET', url: `/api/v2/jobs/${id}/errors` });
      assert.equal(errors.statusCode, 200);
      assert.deepEqual(errors.json(), body);
    });

    it('fails, rather than starting over forever, once its node stopped under it five times', async () => {
      const id = await job({ claims: 5, started_at: new Date().toISOString() });
      const body = await failed(id);
      assert.equal(body.status_details, 'The import stopped 5 times before it finished.');
    });
  }
});
