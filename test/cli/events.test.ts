import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { eachDatabase } from '../helpers/databases.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { startWebhookReceiver, waitUntil, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

const root = path.resolve(import.meta.dirname, '../..');

interface Tail {
  child: ChildProcessWithoutNullStreams;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

describe('tenantry events tail', { concurrency: true }, () =>
  eachDatabase((kind) => {
    describe(`tenantry events tail (${kind})`, () => {
      let server: TestServer;
      let receiver: WebhookReceiver;
      let env: Record<string, string>;
      before(async () => {
        server = await startTestServer(kind, {
          DELIVERY_ALLOW_HTTP: 'true',
          DELIVERY_POLL_MS: '20',
          DELIVERY_RETRY_SCHEDULE_MS: '50',
        });
        receiver = await startWebhookReceiver();
        env = {
          PATH: process.env.PATH ?? '',
          DATA_DIR: server.database.dataDir,
          LOG_LEVEL: 'silent',
          ...(server.database.databaseUrl ? { DATABASE_URL: server.database.databaseUrl } : {}),
        };
      });
      after(async () => {
        await receiver.close();
        await server.close();
      });

      /** The CLI as a child process, reading the database the test server uses. */
      const startTail = async (...args: string[]): Promise<Tail> => {
        const child = spawn(process.execPath, [path.join(root, 'bin/tenantry.mjs'), 'events', 'tail', ...args], {
          cwd: root,
          env,
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (chunk: Buffer) => (stdout += chunk));
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk));
        const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
        return { child, stdout: () => stdout, stderr: () => stderr, exited };
      };
      const ready = (tail: Tail) =>
        waitUntil(
          () => tail.stderr().includes('Following delivery attempts'),
          20_000,
          () => `tail to start: ${tail.stderr()}`,
        );
      const createStream = async (name: string) => {
        const response = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: {
            name,
            subscriptions: [{ event_type: 'user.created' }],
            destination: {
              type: 'webhook',
              configuration: {
                webhook_endpoint: receiver.url,
                webhook_authorization: { method: 'bearer', token: 'tail-token' },
              },
            },
          },
        });
        assert.equal(response.statusCode, 201, response.body);
        return response.json().id as string;
      };
      const sendTest = async (streamId: string) => {
        const response = await server.request({
          method: 'POST',
          url: `/api/v2/event-streams/${streamId}/test`,
          payload: { event_type: 'user.updated' },
        });
        assert.equal(response.statusCode, 202, response.body);
        return response.json().id as string;
      };
      const deliveryStatus = async (streamId: string, eventId: string) =>
        (
          await server.services.database.db
            .selectFrom('deliveries')
            .select('status')
            .where('stream_id', '=', streamId)
            .where('event_id', '=', eventId)
            .executeTakeFirst()
        )?.status;

      it("prints one line per attempt as it happens, with the failure's error, until SIGTERM", async () => {
        const stream = await createStream('tail-all');
        const before = await sendTest(stream);
        await waitUntil(async () => (await deliveryStatus(stream, before)) === 'delivered');

        const tail = await startTail();
        try {
          await ready(tail);
          const delivered = await sendTest(stream);
          await waitUntil(
            () => tail.stdout().includes(delivered),
            20_000,
            () => `a line for ${delivered}: ${tail.stdout()}`,
          );
          receiver.program([400]);
          const rejected = await sendTest(stream);
          await waitUntil(
            () => tail.stdout().includes(rejected),
            20_000,
            () => `a line for ${rejected}: ${tail.stdout()}`,
          );

          const lines = tail
            .stdout()
            .trimEnd()
            .split('\n')
            .map((line) => line.split('\t'));
          assert.equal(lines.length, 2, `only attempts made since tail started: ${tail.stdout()}`);
          const [first, second] = lines as [string[], string[]];
          assert.equal(first.length, 6);
          assert.match(first[0]!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
          assert.deepEqual(first.slice(1, 5), [stream, delivered, 'user.updated', 'delivered']);
          assert.match(first[5]!, /^\d+ms$/);
          assert.deepEqual(second.slice(1, 5), [stream, rejected, 'user.updated', 'failed']);
          assert.match(second[5]!, /^\d+ms$/);
          assert.equal(second[6], `Unexpected status code 400 from POST ${receiver.url}`.slice(0, 50) + ' ...');
        } finally {
          tail.child.kill('SIGTERM');
        }
        assert.equal(await tail.exited, 0);
      });

      it("--stream shows one stream's attempts only; SIGINT stops it", async () => {
        const shown = await createStream('tail-shown');
        const hidden = await createStream('tail-hidden');
        const tail = await startTail('--stream', shown, '--tenant', server.tenant.id);
        try {
          await ready(tail);
          assert.match(tail.stderr(), new RegExp(`of tenant ${server.tenant.id}, stream ${shown}`));
          // The hidden stream's attempt comes first: had it been shown, its line would precede the other's.
          const hiddenEvent = await sendTest(hidden);
          await waitUntil(async () => (await deliveryStatus(hidden, hiddenEvent)) === 'delivered');
          const shownEvent = await sendTest(shown);
          await waitUntil(
            () => tail.stdout().includes(shownEvent),
            20_000,
            () => `a line for ${shownEvent}: ${tail.stdout()}`,
          );
          assert.ok(!tail.stdout().includes(hidden), 'no line of the other stream');
          assert.equal(tail.stdout().trimEnd().split('\n').length, 1);
        } finally {
          tail.child.kill('SIGINT');
        }
        assert.equal(await tail.exited, 0);
      });

      it('refuses an unknown tenant or stream with one line on stderr', async () => {
        for (const [args, message] of [
          [['--tenant', 'nope'], /^tenantry: no tenant "nope" \(see: tenantry tenants list\)\n$/],
          [['--stream', 'est_1111111111111111111111'], /^tenantry: no event stream "est_1111111111111111111111"\n$/],
          [['--since', 'x'], /^tenantry: events tail: Unknown option '--since'[^\n]*\n$/],
        ] as const) {
          const tail = await startTail(...args);
          assert.equal(await tail.exited, 2);
          assert.equal(tail.stdout(), '');
          assert.match(tail.stderr(), message);
        }
      });
    });
  }),
);
