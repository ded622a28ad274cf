/**
 * access-log: what the access line costs a request, in this process: the `request completed` line of a
 * users-by-email request (700-character token, redacted) built by AccessLog, serialised by the logger
 * and written by the server's destination (bufferedStdout) to a file, as `npm start` writes stdout to
 * one. The lines come in turns of N (a server answering N connections in one turn of its event loop),
 * each turn followed by setImmediate, so the destination's asynchronous writes complete between turns
 * as they do under load; 1, 50 and 200 lines a turn, since a cost that grows with the lines waiting
 * behind a write grows with the request rate. CPU is the process's (every thread: the file writes run on
 * the thread pool). Baseline in the same run: `JSON.stringify` of the same line's object, kept in an
 * array cleared every turn, the least any JSON line costs. Every line written is counted in the file.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AccessLog } from '../src/http/access-log.ts';
import { bufferedStdout, createLogger, flushLogger } from '../src/logger.ts';
import { fmt, table, tempDir } from './lib.ts';

const LINES = Number(process.env.BENCH_LOG_LINES ?? 300_000);
const TURNS = [1, 50, 200];
const ROUNDS = 2;

const token = `Bearer ${'e'.repeat(36)}.${'p'.repeat(420)}.${'s'.repeat(342)}`.slice(0, 707);

/** A users-by-email request as Fastify hands it to the access log, the i-th of the run. */
function exchange(i: number): { request: FastifyRequest; reply: FastifyReply } {
  const request = {
    id: `req_${i.toString(36).padStart(20, '0')}`,
    method: 'GET',
    url: '/api/v2/users-by-email?email=user5000%40bench.example',
    is404: false,
    routeOptions: { url: '/api/v2/users-by-email' },
    headers: { host: '127.0.0.1:40000', authorization: token, 'user-agent': 'autocannon', accept: '*/*' },
    tenant: { id: 'ten_0123456789abcdef' },
  };
  const reply = { statusCode: 200, elapsedTime: 0.8 + (i % 100) / 1000 };
  return { request: request as unknown as FastifyRequest, reply: reply as unknown as FastifyReply };
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

interface Figures {
  cpuUsPerLine: number;
  wallUsPerLine: number;
}

async function measure(perTurn: number, line: (i: number) => void, endOfTurn: () => void): Promise<Figures> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < LINES; i++) {
    line(i);
    if (i % perTurn === perTurn - 1) {
      endOfTurn();
      await nextTurn();
    }
  }
  const used = process.cpuUsage(cpu);
  return {
    cpuUsPerLine: (used.user + used.system) / LINES,
    wallUsPerLine: ((performance.now() - started) * 1000) / LINES,
  };
}

export async function run(): Promise<void> {
  const work = tempDir('access-log');
  try {
    const rows: Array<Array<string | number>> = [];
    for (const perTurn of TURNS) {
      for (let round = 1; round <= ROUNDS; round++) {
        // Baseline: the line's object stringified, nothing written.
        let kept: string[] = [];
        const baseline = await measure(
          perTurn,
          (i) => {
            const { request, reply } = exchange(i);
            kept.push(
              JSON.stringify({
                reqId: request.id,
                req: { method: request.method, url: request.url, headers: request.headers },
                res: { statusCode: reply.statusCode },
                responseTime: reply.elapsedTime,
                tenant: request.tenant.id,
              }),
            );
          },
          () => (kept = []),
        );

        const file = path.join(work.dir, `access-${perTurn}-${round}.log`);
        const destination = bufferedStdout(file);
        const logger = createLogger({ logLevel: 'info' }, { stream: destination });
        const accessLog = new AccessLog(logger);
        await nextTurn();
        const logged = await measure(
          perTurn,
          (i) => {
            const { request, reply } = exchange(i);
            accessLog.requestCompleted(null, request, reply);
          },
          () => undefined,
        );
        await flushLogger(logger);
        const content = fs.readFileSync(file, 'utf8');
        const written = content.split('\n').filter(Boolean).length;
        if (written !== LINES) throw new Error(`${written} of ${LINES} access lines reached the file`);
        const bytesPerLine = Buffer.byteLength(content) / LINES;
        fs.rmSync(file);
        rows.push([
          perTurn,
          round,
          baseline.cpuUsPerLine.toFixed(2),
          logged.cpuUsPerLine.toFixed(2),
          logged.wallUsPerLine.toFixed(2),
          (logged.cpuUsPerLine / baseline.cpuUsPerLine).toFixed(2),
          Math.round(bytesPerLine),
        ]);
        process.stdout.write(
          `  ${perTurn} a turn, round ${round}: access line ${logged.cpuUsPerLine.toFixed(2)} µs CPU a request (JSON.stringify alone ${baseline.cpuUsPerLine.toFixed(2)} µs), ${fmt.int(written)} lines written, ${Math.round(bytesPerLine)} bytes each\n`,
        );
      }
    }
    table(
      `access-log — ${fmt.int(LINES)} lines per run, written to a file through bufferedStdout`,
      [
        'lines a turn',
        'round',
        'baseline: JSON.stringify µs/line',
        'access line CPU µs/request',
        'wall µs/request',
        'ratio',
        'bytes/line',
      ],
      rows,
    );
  } finally {
    work.remove();
  }
}
