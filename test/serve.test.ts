import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { createTestDatabase, databaseKinds, type TestDatabase } from './helpers/databases.ts';
import { freePort } from './helpers/server-process.ts';

const CLIENT_ID = 'shutdown-admin';
const CLIENT_SECRET = 'shutdown-admin-secret-0123456789-abcdefghij';

for (const kind of databaseKinds()) {
  describe(`graceful shutdown on SIGTERM (${kind})`, () => {
    let database: TestDatabase;
    before(async () => {
      database = await createTestDatabase(kind);
    });
    after(() => database.drop());

    it('finishes the request in flight, refuses new connections, and exits 0', async () => {
      const port = await freePort();
      const child = spawn(process.execPath, ['bin/tenantry.mjs', 'serve'], {
        env: {
          ...process.env,
          PORT: String(port),
          DATA_DIR: database.dataDir,
          DATABASE_URL: database.databaseUrl ?? '',
          BOOTSTRAP_CLIENT_ID: CLIENT_ID,
          BOOTSTRAP_CLIENT_SECRET: CLIENT_SECRET,
          LOG_LEVEL: 'silent',
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('Tenantry serves') && resolve());
        child.on('exit', () => reject(new Error('server exited before it was ready')));
      });
      const base = `http://127.0.0.1:${port}`;
      const tokenResponse = await fetch(`${base}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          grant_type: 'client_credentials',
          client_id: CLIENT_ID,
          client_secret: CLIENT_SECRET,
          audience: `https://localhost:${port}/api/v2/`,
        }),
      });
      const { access_token: token } = (await tokenResponse.json()) as { access_token: string };

      // A request whose body is only half sent when SIGTERM arrives.
      const body = JSON.stringify({
        connection: 'Username-Password-Authentication',
        email: 'inflight@example.com',
        password: 'long-enough-password',
      });
      const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const request = http.request(
          `${base}/api/v2/users`,
          {
            method: 'POST',
            headers: {
              authorization: `Bearer ${token}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
          },
        );
        request.on('error', reject);
        request.write(body.slice(0, 20));
        setTimeout(() => {
          child.kill('SIGTERM');
          setTimeout(async () => {
            // The listener is closed by now: a new connection is refused.
            const refused = await fetch(`${base}/health`).then(
              () => false,
              () => true,
            );
            assert.equal(refused, true, 'new connections are refused while shutting down');
            request.end(body.slice(20));
          }, 300);
        }, 200);
      });
      const finished = await response;
      assert.equal(finished.status, 201, finished.body);
      assert.equal(JSON.parse(finished.body).email, 'inflight@example.com');
      assert.equal(await exited, 0);
    });
  });
}
