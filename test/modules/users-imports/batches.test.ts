import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../../helpers/eventually.ts';
import { startTestServer, type TestServer } from '../../helpers/server.ts';
import { file, finished, upload } from '../../helpers/users-import.ts';

const DEFAULT = 'Username-Password-Authentication';

// Each batch is one transaction, validated and stored in one synchronous stretch on SQLite: its bounds
// are what keeps an import from holding every other tenant's requests.
describe('users-import batches', () => {
  let server: TestServer;
  let connectionId: string;
  const lines: Array<Record<string, unknown>> = [];
  before(async () => {
    const logStream = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n')) if (line !== '') lines.push(JSON.parse(line));
        done();
      },
    });
    server = await startTestServer(
      'sqlite',
      { LOG_LEVEL: 'info', DELIVERY_WORKER: 'false', DELIVERY_ALLOW_HTTP: 'true' },
      { logStream },
    );
    connectionId = (await server.services.connections.byName(server.tenant.id, DEFAULT))!.id;
  });
  after(() => server.close());

  /** Imports `users` to the end; the batches its run committed, from the completion's log line. */
  const importInBatches = async (users: unknown[]): Promise<number> => {
    const response = await upload(server, { users: file(users), connection_id: connectionId });
    assert.equal(response.statusCode, 201, response.body);
    const { id } = response.json() as { id: string };
    assert.equal(((await finished(server, id)) as { status: string }).status, 'completed');
    const completed = await eventually('the completion logged', async () =>
      lines.find((line) => line.msg === 'users import completed' && line.job_id === id),
    );
    return completed.batches as number;
  };
  let userCount = 0;
  const users = (count: number, extra: Record<string, unknown> = {}) =>
    Array.from({ length: count }, () => ({ email: `batch${userCount++}@example.com`, ...extra }));

  it('end at 1,000 records', async () => {
    assert.equal(await importInBatches(users(1_200)), 2);
  });

  it('end at 4 Mi characters of records, however few', async () => {
    // 900,000 characters a record (a record may be up to 1 MiB): the fifth passes 4 Mi, the sixth is a batch of its own.
    assert.equal(await importInBatches(users(6, { user_metadata: { blob: 'x'.repeat(900_000) } })), 2);
  });

  it('write at most 5,000 outbox rows: with 10 streams subscribed to user.created, 500 records', async () => {
    // Streams of other events make no delivery of an import: 5 of them do not shrink its batches.
    for (let i = 0; i < 15; i++) {
      const created = await server.request({
        method: 'POST',
        url: '/api/v2/event-streams',
        payload: {
          name: `batch-stream-${i}`,
          subscriptions: [{ event_type: i < 10 ? 'user.created' : 'user.deleted' }],
          destination: {
            type: 'webhook',
            configuration: {
              webhook_endpoint: 'http://127.0.0.1:9/hook',
              webhook_authorization: { method: 'bearer', token: 'secret-bearer-token' },
            },
          },
        },
      });
      assert.equal(created.statusCode, 201, created.body);
    }
    assert.equal(await importInBatches(users(1_200)), 3);
    const deliveries = await server.services.database.db
      .selectFrom('deliveries')
      .select(server.services.database.db.fn.countAll().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(deliveries.n), 12_000, 'every imported user has its delivery on every stream');
  });
});
