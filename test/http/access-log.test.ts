import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { bufferedStdout, createLogger, flushLogger } from '../../src/logger.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
// The tests may run compiled (test/run.mjs): the logger beside this file, in the same language.
const LOGGER_MODULE = fileURLToPath(
  new URL(`../../src/logger.${path.extname(import.meta.url).slice(1)}`, import.meta.url),
);

describe('the access log', () => {
  let server: TestServer;
  const lines: Array<Record<string, any>> = [];
  before(async () => {
    const logStream = new PassThrough();
    logStream.on('data', (chunk: Buffer) =>
      lines.push(
        ...chunk
          .toString()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l)),
      ),
    );
    server = await startTestServer('sqlite', { LOG_LEVEL: 'info' }, { logStream });
  });
  after(() => server.close());

  it('writes one line per request, when it completes, with what a request is traced by', async () => {
    const answer = await server.request({
      url: '/api/v2/users-by-email?email=a%40b.co',
      headers: { 'x-request-id': 'one-line-1', cookie: 'session=c00k1e-s3cr3t', 'user-agent': 'probe/1' },
    });
    assert.equal(answer.statusCode, 200, answer.body);
    const mine = lines.filter((l) => l.reqId === 'one-line-1');
    assert.equal(mine.length, 1, JSON.stringify(mine));
    const [line] = mine as [Record<string, any>];
    assert.equal(line.msg, 'request completed');
    assert.equal(line.level, 30);
    assert.equal(line.req.method, 'GET');
    assert.equal(line.req.url, '/api/v2/users-by-email?email=a%40b.co');
    assert.equal(line.req.route, '/api/v2/users-by-email');
    assert.equal(line.req.headers['user-agent'], 'probe/1');
    assert.equal(line.req.headers.authorization, '[redacted]');
    assert.equal(line.req.headers.cookie, '[redacted]');
    assert.equal(line.res.statusCode, 200);
    assert.equal(typeof line.responseTime, 'number');
    assert.equal(line.tenant, server.tenant.id);
    assert.ok(!JSON.stringify(lines).includes('c00k1e-s3cr3t'));
    assert.ok(!JSON.stringify(lines).includes(server.adminToken));
  });

  it('logs refusals and unknown routes the same way, without a route or, on a route of no tenant, a tenant', async () => {
    await server.request({
      url: '/api/v2/users-by-email?email=a%40b.co',
      token: null,
      headers: { 'x-request-id': 'one-line-2' },
    });
    await server.request({ url: '/api/v2/nowhere', headers: { 'x-request-id': 'one-line-3' } });
    await server.app.inject({ url: '/health', headers: { host: 'any.test', 'x-request-id': 'one-line-4' } });
    const byId = (id: string) => lines.filter((l) => l.reqId === id && l.msg === 'request completed');
    assert.equal(byId('one-line-2').length, 1);
    assert.equal(byId('one-line-2')[0]!.res.statusCode, 401);
    assert.equal(byId('one-line-2')[0]!.req.route, '/api/v2/users-by-email');
    assert.equal(byId('one-line-3')[0]!.res.statusCode, 404);
    assert.equal(byId('one-line-3')[0]!.req.route, undefined);
    assert.equal(byId('one-line-4')[0]!.res.statusCode, 200);
    assert.equal(byId('one-line-4')[0]!.tenant, undefined);
    assert.ok(!lines.some((l) => l.msg === 'incoming request'));
  });

  it("binds the request id to the request's own logger, which still redacts", async () => {
    const seen: Array<Record<string, any>> = [];
    const stream = new PassThrough();
    stream.on('data', (chunk: Buffer) => seen.push(JSON.parse(chunk.toString())));
    const logger = createLogger({ logLevel: 'info' }, { stream });
    const { requestLoggerFactory } = await import('../../src/http/access-log.ts');
    const child = requestLoggerFactory()(logger, { reqId: 'r-1' }, {}) as typeof logger;
    child.info({ body: { password: 'hunter2' } }, 'inside');
    await new Promise((r) => setImmediate(r));
    assert.equal(seen[0]!.reqId, 'r-1');
    assert.equal(seen[0]!.body.password, '[redacted]');
    assert.equal(seen[0]!.msg, 'inside');
  });
});

/** The `i` of each line in a log file, in the file's order. */
function writtenIds(file: string): unknown[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l).i);
}

/** A destination writing to a file of a temporary folder, opened, and a logger on it. */
async function fileLogger(dir: string) {
  const file = path.join(dir, 'out.log');
  const destination = bufferedStdout(file);
  await new Promise((r) => setTimeout(r, 50));
  return { file, destination, logger: createLogger({ logLevel: 'info' }, { stream: destination }) };
}

describe("the server's buffered log destination", () => {
  it('holds short lines until flushed, then writes them all, in order', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-log-'));
    try {
      const { file, logger } = await fileLogger(dir);
      for (let i = 0; i < 3; i++) logger.info({ i }, 'line');
      assert.equal(fs.readFileSync(file, 'utf8'), '', 'a few lines wait for more');
      await flushLogger(logger);
      assert.deepEqual(writtenIds(file), [0, 1, 2]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("writes a quiet server's lines unasked, on its periodic flush", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-log-'));
    try {
      const { file, logger } = await fileLogger(dir);
      logger.info({ i: 0 }, 'line');
      logger.info({ i: 1 }, 'line');
      // Read before any turn of the event loop: no timer, late or not, can have written them yet.
      assert.equal(fs.readFileSync(file, 'utf8'), '', 'two lines wait for more');
      // The flush runs every 250 ms. Waited for up to 2 s, so that a loaded machine's late timer is no
      // failure; with no periodic flush the lines would wait for a flush call that never comes.
      for (let i = 0; i < 40 && writtenIds(file).length < 2; i++) await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(writtenIds(file), [0, 1]);
      await flushLogger(logger);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes every waiting line, synchronously, right after a fatal one', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-log-'));
    try {
      const { file, logger } = await fileLogger(dir);
      logger.info({ i: 0 }, 'line');
      logger.info({ i: 1 }, 'line');
      logger.fatal({ i: 2 }, 'the end');
      // No turn of the event loop in between: nothing asynchronous can have written them.
      assert.deepEqual(writtenIds(file), [0, 1, 2]);
      await flushLogger(logger);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('drops lines quietly once its destination is ended, flushing without throwing', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-log-'));
    try {
      const { file, destination, logger } = await fileLogger(dir);
      logger.info({ i: 0 }, 'line');
      await flushLogger(logger);
      const closed = new Promise((resolve) => destination.destination.once('close', resolve));
      destination.destination.end();
      // Ended, not closed yet: sonic-boom throws at a write or a flush until it closes its descriptor,
      // and the periodic flush runs meanwhile.
      logger.info({ i: 1 }, 'line');
      assert.doesNotThrow(() => destination.flush());
      assert.doesNotThrow(() => destination.flushSync());
      await closed;
      logger.info({ i: 2 }, 'line');
      await new Promise((r) => setTimeout(r, 300));
      assert.doesNotThrow(() => destination.flush());
      assert.deepEqual(writtenIds(file), [0]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes the lines that wait when the process exits, by process.exit or an uncaught error', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-log-'));
    try {
      for (const [ending, expectedStatus] of [
        ['process.exit(0)', 0],
        ["throw new Error('boom')", 1],
      ] as const) {
        const file = path.join(dir, `${expectedStatus}.log`);
        // Lines waiting for more, none flushed: all must reach the file. (A chunk sonic-boom is writing
        // when the process exits is the thread pool's, which exit does not wait for: none here.)
        const script = `
          import { bufferedStdout, createLogger } from ${JSON.stringify(LOGGER_MODULE)};
          const logger = createLogger({ logLevel: 'info' }, { stream: bufferedStdout(${JSON.stringify(file)}) });
          setTimeout(() => {
            logger.info({ i: 0 }, 'line');
            logger.info({ i: 1 }, 'line');
            logger.info({ i: 2 }, 'line');
            ${ending};
          }, 50);
        `;
        let status = 0;
        try {
          execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
            cwd: ROOT,
            stdio: 'ignore',
          });
        } catch (error) {
          status = (error as { status: number }).status;
        }
        assert.equal(status, expectedStatus, ending);
        assert.deepEqual(writtenIds(file), [0, 1, 2], ending);
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('holds at most its byte bound while its reader does not read, dropping the rest and saying how much', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tenantry-log-'));
    const fifo = path.join(dir, 'stalled');
    execFileSync('mkfifo', [fifo]);
    // Opened for reading and writing, so it does not wait for a reader: nothing ever reads it, and once
    // the kernel's pipe buffer (64 KB) is full every write waits.
    const fd = fs.openSync(fifo, fs.constants.O_RDWR | fs.constants.O_NONBLOCK);
    let dropped = 0;
    let droppedLines = 0;
    const destination = bufferedStdout(fd, {
      maxBytes: 256 * 1024,
      onDrop: (bytes, lines) => {
        dropped += bytes;
        droppedLines += lines;
      },
    });
    try {
      const logger = createLogger({ logLevel: 'info' }, { stream: destination });
      const line = 'x'.repeat(1000);
      // 4 MB of lines: 16 times what may wait.
      for (let i = 0; i < 4000; i++) logger.info({ i, line }, 'flood');
      await new Promise((r) => setTimeout(r, 300));
      const waiting = (destination.destination as unknown as { _len: number })._len;
      assert.ok(waiting <= 256 * 1024, `${waiting} bytes wait`);
      assert.ok(dropped > 3 * 1024 * 1024, `${dropped} bytes dropped`);
      // Lines are dropped a chunk at a time; each of these is a little over 1,000 bytes.
      assert.ok(
        droppedLines * 1000 < dropped && dropped < droppedLines * 1200,
        `${droppedLines} lines in ${dropped} bytes dropped`,
      );
    } finally {
      // Read the pipe until what waits is written, then end the destination (it closes the descriptor).
      const sink = Buffer.alloc(64 * 1024);
      const state = destination.destination as unknown as {
        _len: number;
        _writing: boolean;
        once(event: 'close', listener: () => void): void;
        end(): void;
      };
      for (let i = 0; i < 200 && (state._len > 0 || state._writing); i++) {
        try {
          while (fs.readSync(fd, sink) > 0);
        } catch {
          // EAGAIN: read all there was for now.
        }
        await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise<void>((resolve) => {
        state.once('close', () => resolve());
        state.end();
      });
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
