import assert from 'node:assert/strict';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startHttpsTestServer } from '../helpers/https.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/** REQUEST_TIMEOUT_MS here; Node checks every connection each quarter of it. */
const LIMIT_MS = 1000;
const ENV = { REQUEST_TIMEOUT_MS: String(LIMIT_MS) };

interface Setup {
  server: TestServer;
  connect(): net.Socket;
  logLines?: string[];
}

/** Everything the server sent on a connection until it closed it, and when that was. */
interface Exchange {
  text: string;
  closedAfterMs: number;
}

/**
 * Writes `pieces` one by one, `gapMs` apart, and reads until the server closes the connection (or
 * `readMs` passes, then the client closes it). The socket's own timer never runs out here (default
 * RESPONSE_STALL_TIMEOUT_MS, 30 s): only the request's is measured.
 */
async function exchange(client: net.Socket, pieces: string[], gapMs: number, readMs = 5000): Promise<Exchange> {
  const started = Date.now();
  const chunks: Buffer[] = [];
  let closed = false;
  const ended = new Promise<void>((resolve) => {
    client.on('data', (chunk: Buffer) => chunks.push(chunk));
    client.on('error', () => undefined);
    client.on('close', () => {
      closed = true;
      resolve();
    });
  });
  for (const piece of pieces) {
    if (closed) break;
    client.write(piece);
    await sleep(gapMs);
  }
  await Promise.race([ended, sleep(readMs)]);
  const closedAfterMs = Date.now() - started;
  client.destroy();
  return { text: Buffer.concat(chunks).toString(), closedAfterMs };
}

const refusedBody = (text: string) => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4));

const setups: Array<[string, () => Promise<Setup>]> = [
  [
    'HTTP',
    async () => {
      const logLines: string[] = [];
      const logStream = new PassThrough();
      logStream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString().split('\n').filter(Boolean)));
      const server = await startTestServer('sqlite', { LOG_LEVEL: 'info', ...ENV }, { logStream });
      await server.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = server.app.server.address() as net.AddressInfo;
      return { server, connect: () => net.connect(port, '127.0.0.1'), logLines };
    },
  ],
  [
    'HTTPS',
    async () => {
      const started = await startHttpsTestServer('sqlite', ENV);
      const { port } = started.server.app.server.address() as net.AddressInfo;
      return {
        server: started.server,
        connect: () => tls.connect({ port, host: '127.0.0.1', ca: started.caPem, servername: 'localhost' }),
      };
    },
  ],
];

for (const [name, start] of setups) {
  describe(`a request must arrive whole within REQUEST_TIMEOUT_MS (${name})`, () => {
    let setup: Setup;
    let server: TestServer;
    before(async () => {
      setup = await start();
      server = setup.server;
    });
    after(() => server.close());

    const headers = (method: string, path: string, extra = '') =>
      `${method} ${path} HTTP/1.1\r\nHost: ${server.domain}\r\nAuthorization: Bearer ${server.adminToken}\r\n${extra}`;

    it('refuses headers sent a line at a time past the limit: 408 request_timeout, the connection closed', async () => {
      const lines = Array.from({ length: 30 }, (_, i) => `X-Drip-${i}: ${i}\r\n`);
      const { text, closedAfterMs } = await exchange(setup.connect(), [headers('GET', '/api/v2/users'), ...lines], 100);
      assert.match(text, /^HTTP\/1\.1 408 Request Timeout\r\n/);
      assert.deepEqual(refusedBody(text), {
        statusCode: 408,
        error: 'Request Timeout',
        message: 'The request was not received in time.',
        errorCode: 'request_timeout',
      });
      assert.ok(closedAfterMs >= LIMIT_MS && closedAfterMs < LIMIT_MS * 2.5, `closed after ${closedAfterMs} ms`);
    });

    it('refuses a body sent a byte at a time past the limit, and creates nothing', async () => {
      const body = JSON.stringify({ name: 'drip', destination: { type: 'webhook', configuration: {} } });
      const { text, closedAfterMs } = await exchange(
        setup.connect(),
        [
          headers(
            'POST',
            '/api/v2/event-streams',
            `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
          ),
          ...body,
        ],
        100,
      );
      assert.match(text, /^HTTP\/1\.1 408 Request Timeout\r\n/);
      assert.equal(refusedBody(text).errorCode, 'request_timeout');
      assert.ok(closedAfterMs >= LIMIT_MS && closedAfterMs < LIMIT_MS * 2.5, `closed after ${closedAfterMs} ms`);
      const streams = await server.request({ method: 'GET', url: '/api/v2/event-streams' });
      assert.deepEqual(streams.json(), { eventStreams: [] });
      if (setup.logLines) {
        // The client's doing: no error (before, a "database unavailable" for Node's ECONNRESET), one info line.
        await sleep(100);
        const lines = setup.logLines.map((l) => JSON.parse(l));
        assert.deepEqual(
          lines.filter((l) => l.level >= 50),
          [],
        );
        const timedOut = lines.filter((l) => l.msg?.startsWith('request timed out: its body did not arrive'));
        assert.deepEqual(
          timedOut.map((l) => [l.method, l.route, l.tenant]),
          [['POST', '/api/v2/event-streams', 'default']],
        );
        assert.ok(!setup.logLines.join('\n').includes(server.adminToken));
      }
    });

    // The HTTP setup keeps the server's log lines.
    if (name === 'HTTP')
      it('logs a body its client stopped sending as aborted by the client, not as the database unavailable', async () => {
        const client = setup.connect();
        client.write(
          headers('POST', '/api/v2/event-streams', 'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na'),
        );
        await sleep(200);
        client.destroy();
        let lines: Array<Record<string, unknown>> = [];
        for (let waited = 0; waited < 2000; waited += 20) {
          lines = setup.logLines!.map((l) => JSON.parse(l));
          if (lines.some((l) => l.msg === 'request aborted: its connection closed before its body arrived')) break;
          await sleep(20);
        }
        const aborted = lines.filter((l) => l.msg === 'request aborted: its connection closed before its body arrived');
        assert.deepEqual(
          aborted.map((l) => [l.level, l.method, l.route]),
          [[30, 'POST', '/api/v2/event-streams']],
        );
        assert.deepEqual(
          lines.filter((l) => (l.level as number) >= 50),
          [],
        );
      });

    it('serves a request sent slowly but whole within the limit, and times each request of a kept-alive connection afresh', async () => {
      const request = headers('GET', '/api/v2/event-streams', '\r\n');
      const client = setup.connect();
      const chunks: Buffer[] = [];
      client.on('data', (chunk: Buffer) => chunks.push(chunk));
      const responses = () =>
        Buffer.concat(chunks)
          .toString()
          .match(/HTTP\/1\.1 \d+/g) ?? [];
      // Pieces over about half the limit.
      for (const piece of request.match(/[^]{1,40}/g)!) {
        client.write(piece);
        await sleep(LIMIT_MS / 2 / Math.ceil(request.length / 40));
      }
      for (let waited = 0; responses().length < 1 && waited < 3000; waited += 20) await sleep(20);
      assert.deepEqual(responses(), ['HTTP/1.1 200']);
      // Idle between requests for longer than the limit: that is keep-alive's to end, not this timer's.
      await sleep(LIMIT_MS * 2);
      assert.equal(client.destroyed, false);
      client.write(request);
      for (let waited = 0; responses().length < 2 && waited < 3000; waited += 20) await sleep(20);
      assert.deepEqual(responses(), ['HTTP/1.1 200', 'HTTP/1.1 200'], Buffer.concat(chunks).toString());
      client.destroy();
    });
  });
}
