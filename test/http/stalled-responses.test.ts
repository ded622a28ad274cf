import assert from 'node:assert/strict';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { databaseKinds } from '../helpers/databases.ts';
import { startHttpsTestServer } from '../helpers/https.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { waitUntil } from '../helpers/webhook-receiver.ts';

const STALL_MS = 1000;
/** A user whose metadata makes its GET a 10 MB response: more than the loopback's kernel buffers take. */
const METADATA_CHARS = 10 * 1024 * 1024;
const ENV = {
  RESPONSE_STALL_TIMEOUT_MS: String(STALL_MS),
  BODY_LIMIT_BYTES: String(12 * 1024 * 1024),
  DELIVERY_ALLOW_HTTP: 'true',
};

interface Setup {
  server: TestServer;
  /** A client connection to the server, over its transport. */
  connect(port: number): net.Socket;
  /** The server's event for a connection ready to carry requests. */
  acceptedEvent: 'connection' | 'secureConnection';
  logLines?: string[];
}

const http = (kind: 'sqlite' | 'postgres') => async (): Promise<Setup> => {
  const logLines: string[] = [];
  const logStream = new PassThrough();
  logStream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString().split('\n').filter(Boolean)));
  const server = await startTestServer(kind, { LOG_LEVEL: 'info', ...ENV }, { logStream });
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  return { server, connect: (port) => net.connect(port, '127.0.0.1'), acceptedEvent: 'connection', logLines };
};

const https = async (): Promise<Setup> => {
  const started = await startHttpsTestServer('sqlite', ENV);
  return {
    server: started.server,
    connect: (port) => tls.connect({ port, host: '127.0.0.1', ca: started.caPem, servername: 'localhost' }),
    acceptedEvent: 'secureConnection',
  };
};

const setups: Array<[string, () => Promise<Setup>]> = [
  ...databaseKinds().map((kind): [string, () => Promise<Setup>] => [`${kind}, HTTP`, http(kind)]),
  ['sqlite, HTTPS', https],
];

for (const [name, start] of setups) {
  describe(`a response whose client stopped reading is let go (${name})`, () => {
    let setup: Setup;
    let server: TestServer;
    let port: number;
    let userId: string;
    /** The server's side of each connection, in the order they were accepted. */
    const accepted: net.Socket[] = [];
    before(async () => {
      setup = await start();
      server = setup.server;
      server.app.server.on(setup.acceptedEvent, (socket: net.Socket) => accepted.push(socket));
      port = (server.app.server.address() as net.AddressInfo).port;
      const created = await server.request({
        method: 'POST',
        url: '/api/v2/users',
        payload: {
          connection: 'Username-Password-Authentication',
          email: 'large@example.com',
          password: 'Correct-Horse-9',
          user_metadata: { blob: 'x'.repeat(METADATA_CHARS) },
        },
      });
      assert.equal(created.statusCode, 201, created.body.slice(0, 200));
      userId = created.json().user_id;
    });
    after(() => server.close());

    /** Opens a connection, asks for the large user and returns both sides of it once the server accepted it. */
    const open = async (extraHeaders = '') => {
      const before = accepted.length;
      const client = setup.connect(port);
      await new Promise((resolve, reject) => client.once('error', reject).once('ready', resolve));
      client.write(
        `GET /api/v2/users/${encodeURIComponent(userId)} HTTP/1.1\r\nHost: ${server.domain}\r\n` +
          `Authorization: Bearer ${server.adminToken}\r\n${extraHeaders}\r\n`,
      );
      await waitUntil(
        async () => accepted.length > before,
        2000,
        () => 'the server to accept the connection',
      );
      return { client, socket: accepted[before]! };
    };

    it('closes a connection whose client reads nothing, and says so in the log', async () => {
      const { client, socket } = await open();
      client.pause();
      client.on('error', () => undefined);
      let mostUnsent = 0;
      await waitUntil(
        async () => {
          mostUnsent = Math.max(mostUnsent, socket.writableLength);
          return socket.destroyed;
        },
        5000,
        () => `the stalled connection to be closed (${socket.writableLength} bytes unsent)`,
      );
      assert.ok(mostUnsent > 0, 'the server held unsent bytes before');
      if (setup.logLines) {
        const line = setup.logLines
          .map((l) => JSON.parse(l))
          .find((l) => l.msg?.startsWith('connection closed: its client'));
        assert.ok(line, setup.logLines.slice(-5).join('\n'));
        assert.equal(line.stallMs, STALL_MS);
        assert.ok(line.unsentBytes > 0);
        assert.ok(!JSON.stringify(line).includes(server.adminToken));
      }
      client.destroy();
    });

    it('keeps a connection whose client reads slowly, pausing shorter than the timeout', async () => {
      const { client } = await open('Connection: close\r\n');
      let received = 0;
      let sincePause = 0;
      const chunks: Buffer[] = [];
      client.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        received += chunk.length;
        sincePause += chunk.length;
        if (sincePause >= 1024 * 1024) {
          sincePause = 0;
          client.pause();
          // Over TLS, pauses long enough that a body written whole (not in pieces) is cut; over plain TCP,
          // where nothing is written in pieces, short ones: a loaded machine stretches every pause.
          setTimeout(() => client.resume(), STALL_MS * (setup.acceptedEvent === 'secureConnection' ? 0.5 : 0.25));
        }
      });
      const started = Date.now();
      await new Promise((resolve, reject) => client.on('end', resolve).on('error', reject));
      assert.ok(received > METADATA_CHARS, `read ${received} bytes`);
      // The whole body, as long as its Content-Length says, and the user it names (over TLS it was written
      // in pieces).
      const answer = Buffer.concat(chunks);
      const headEnd = answer.indexOf('\r\n\r\n');
      const head = answer.subarray(0, headEnd).toString('latin1');
      assert.match(head, /^HTTP\/1\.1 200 /);
      assert.doesNotMatch(head, /transfer-encoding/i);
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1]);
      assert.equal(answer.length - headEnd - 4, length);
      const user = JSON.parse(answer.subarray(headEnd + 4).toString('utf8'));
      assert.equal(user.user_id, userId);
      assert.equal(user.user_metadata.blob.length, METADATA_CHARS);
      assert.ok(Date.now() - started > STALL_MS, 'the read took longer than the timeout');
    });

    it('closes a connection that sends nothing, over TLS before its handshake too, once the timeout runs out', async () => {
      // A bare TCP connection on either transport: over HTTPS it never begins its TLS handshake, which
      // Node otherwise waits 120 s for (its handshakeTimeout), and a ClientHello a byte at a time as long.
      const client = net.connect(port, '127.0.0.1');
      await new Promise((resolve, reject) => client.once('error', reject).once('connect', resolve));
      const opened = Date.now();
      let closed = 0;
      client.on('error', () => undefined);
      client.once('close', () => (closed = Date.now()));
      if (name.includes('HTTPS')) client.write(Buffer.from([0x16])); // the first byte of a ClientHello
      await waitUntil(
        async () => closed > 0,
        STALL_MS * 4,
        () => 'the silent connection to be closed',
      );
      assert.ok(closed - opened >= STALL_MS * 0.9, `closed after ${closed - opened} ms, before the timeout`);
    });

    it("still closes a kept-alive connection once keep-alive's timeout runs out after its response", async () => {
      const keepAliveTimeout = server.app.server.keepAliveTimeout;
      // Shorter than the stall timeout, as Fastify's 72 s default is longer than the 30 s one.
      server.app.server.keepAliveTimeout = STALL_MS / 2;
      try {
        const before = accepted.length;
        const client = setup.connect(port);
        await new Promise((resolve, reject) => client.once('error', reject).once('ready', resolve));
        let received = '';
        client.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
        client.write(`GET /health HTTP/1.1\r\nHost: ${server.domain}\r\n\r\n`);
        await waitUntil(
          async () => received.includes('"status"'),
          2000,
          () => 'the response',
        );
        const socket = accepted[before]!;
        assert.match(received, /^HTTP\/1\.1 200 /);
        assert.match(received, /keep-alive/i);
        await waitUntil(
          async () => socket.destroyed,
          STALL_MS * 4,
          () => 'the idle kept-alive connection to be closed',
        );
        client.destroy();
      } finally {
        server.app.server.keepAliveTimeout = keepAliveTimeout;
      }
    });

    if (name.startsWith('postgres')) {
      it('keeps a connection whose handler waits on the database longer than the timeout', async () => {
        const stream = await server.request({
          method: 'POST',
          url: '/api/v2/event-streams',
          payload: {
            name: 'locked',
            subscriptions: [{ event_type: 'user.created' }],
            destination: {
              type: 'webhook',
              configuration: {
                webhook_endpoint: 'http://127.0.0.1:9/in',
                webhook_authorization: { method: 'bearer', token: 't0ken' },
              },
            },
          },
        });
        assert.equal(stream.statusCode, 201, stream.body);
        const id = stream.json().id as string;
        // POST /redeliver locks the stream's row first: held here, it waits 3 timeouts for it.
        const holder = await server.services.database.pool!.connect();
        try {
          await holder.query('BEGIN');
          await holder.query('SELECT id FROM event_streams WHERE id = $1 FOR UPDATE', [id]);
          const started = Date.now();
          const answer = fetch(`http://127.0.0.1:${port}/api/v2/event-streams/${id}/redeliver`, {
            method: 'POST',
            headers: {
              host: server.domain,
              authorization: `Bearer ${server.adminToken}`,
              'content-type': 'application/json',
            },
            body: JSON.stringify({ statuses: ['failed'] }),
          });
          await new Promise((resolve) => setTimeout(resolve, STALL_MS * 3));
          await holder.query('COMMIT');
          const response = await answer;
          assert.equal(response.status, 202, await response.text());
          assert.ok(Date.now() - started >= STALL_MS * 3);
        } finally {
          holder.release();
        }
      });
    }
  });
}
