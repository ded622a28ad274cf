/**
 * growth: users-by-email as the tenant grows, at 10,000, 1,000,000 and 10,000,000 users
 * (BENCH_GROWTH_SIZES), on one SQLite database grown between the runs. Each run: the server (with npm
 * start's flags, at the default log level, lines to a file) answering a read:users token at 50
 * connections, 2 s warm-up then 10 s bounded by a request cap, the emails asked for spread over the
 * whole table (1,000 of them, three in four existing), so the index is read across its depth rather
 * than one cached path. The target: req/s and p99 of every size within 15% of each other.
 */
import path from 'node:path';
import autocannon from 'autocannon';
import {
  fmt,
  readCpuMs,
  runChild,
  serverEnv,
  spawnServer,
  table,
  tempDir,
  TENANT_DOMAIN,
  verdict,
  type BenchContext,
} from './lib.ts';

const SIZES = (process.env.BENCH_GROWTH_SIZES ?? '10000,1000000,10000000').split(',').map(Number);
const SECONDS = 10;
const MAX_REQUESTS = 1_000_000;

export async function run(_context: BenchContext): Promise<void> {
  const work = tempDir('growth');
  const dataDir = path.join(work.dir, 'data');
  const rows: Array<Array<string | number>> = [];
  const figures: Array<{ reqPerSec: number; p99: number }> = [];
  try {
    let users = 0;
    for (const size of SIZES) {
      const started = performance.now();
      const seeded = await runChild(
        'seed.ts',
        ['generate', String(size - users), '5000', String(users)],
        serverEnv(dataDir),
      );
      users = size;
      process.stdout.write(
        `  grown to ${fmt.int(users)} users (+${fmt.int(seeded.users as number)} in ${fmt.s(performance.now() - started)})\n`,
      );
      const logFile = path.join(work.dir, `server-${size}.log`);
      const server = await spawnServer(dataDir, { LOG_LEVEL: 'info' }, logFile);
      try {
        const token = server.ready.readerToken as string;
        const requests = Array.from({ length: 1000 }, (_, i) => {
          const email =
            i % 4 === 3 ? `nobody${i}@bench.example` : `user${Math.floor((i * (size - 1)) / 999)}@bench.example`;
          return {
            method: 'GET',
            path: `/api/v2/users-by-email?email=${encodeURIComponent(email)}`,
            headers: { authorization: `Bearer ${token}`, host: TENANT_DOMAIN },
          };
        });
        const base = `http://127.0.0.1:${server.port}`;
        await autocannon({ url: base, connections: 50, duration: 2, requests });
        const cpuBefore = readCpuMs(server.pid);
        const result = await autocannon({
          url: base,
          connections: 50,
          duration: SECONDS,
          maxOverallRequests: MAX_REQUESTS,
          requests,
          timeout: 10,
        });
        const cpuUs = ((readCpuMs(server.pid) - cpuBefore) * 1000) / result.requests.total;
        if (result.non2xx > 0 || result.errors > 0)
          throw new Error(`${result.non2xx} non-2xx, ${result.errors} errors`);
        const reqPerSec = result.requests.total / result.duration;
        figures.push({ reqPerSec, p99: result.latency.p99 });
        rows.push([
          fmt.int(size),
          fmt.int(reqPerSec),
          `${result.latency.p50} ms`,
          `${result.latency.p99} ms`,
          fmt.int(cpuUs),
          fmt.mb(server.rss()),
        ]);
      } finally {
        await server.stop();
      }
    }
    table(
      'growth: users-by-email, 50 connections, emails spread over the table, read:users token, `info`',
      ['users', 'req/s', 'p50', 'p99', 'server CPU µs/request', 'server RSS after'],
      rows,
    );
    const rates = figures.map((f) => f.reqPerSec);
    const spread = Math.max(...rates) / Math.min(...rates) - 1;
    const p99s = figures.map((f) => f.p99);
    const p99Spread = Math.max(...p99s) / Math.min(...p99s) - 1;
    process.stdout.write(
      `\n  req/s spread ${(spread * 100).toFixed(0)}% (target ≤ 15%: ${verdict(spread <= 0.15)}), p99 spread ${(p99Spread * 100).toFixed(0)}% (${verdict(p99Spread <= 0.15)})\n`,
    );
  } finally {
    work.remove();
  }
}
