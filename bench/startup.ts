/**
 * Start-up: the time from spawn to the first 200 on GET /health, and the resident memory once idle, of
 * the server run as `npm start` runs it (dist/, compiled by `npm run build`) and run on the sources
 * through tsx (`npm run dev`, what `npm start` ran before the build existed). The baseline, in the same
 * run: a bare node:http server answering 200, spawned and polled the same way. Rounds interleave the
 * three; each variant starts once on an empty DATA_DIR (migrations, the default tenant's signing key)
 * and once more on the same directory (a restart).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { buildDist } from '../scripts/compile.mjs';
import { freePort } from '../test/helpers/server-process.ts';
import { BENCH_DIR, fmt, mean, readRss, serverEnv, startFlags, table, tempDir, type BenchContext } from './lib.ts';

const ROUNDS = 5;
/** How long a started server is left alone before its memory is read. */
const IDLE_MS = 2_000;
const DEADLINE_MS = 30_000;
const project = path.dirname(BENCH_DIR);

const variants: Record<string, string[]> = {
  'bare node:http': [
    '-e',
    "require('node:http').createServer((q, s) => s.end('ok')).listen(Number(process.env.PORT), '127.0.0.1')",
  ],
  'sources (tsx)': ['--import', 'tsx', path.join(project, 'src/cli/run.ts'), 'serve'],
  'compiled (npm start)': [...startFlags(), path.join(project, 'bin/tenantry.mjs'), 'serve'],
};

/** Spawns, polls /health every 5 ms until a 200, waits idle, reads RSS, stops with SIGTERM. */
async function start(args: string[], dataDir: string): Promise<{ ms: number; rss: number }> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: project,
    env: { ...process.env, ...serverEnv(dataDir), PORT: String(port) },
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    for (;;) {
      if (performance.now() - started > DEADLINE_MS) throw new Error(`no 200 within ${DEADLINE_MS} ms`);
      if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode} before answering`);
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then(
        (response) => response.status === 200,
        () => false,
      );
      if (ok) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const ms = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    return { ms, rss: readRss(child.pid!) };
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

export async function run(_context: BenchContext): Promise<void> {
  await buildDist(project);
  const figures = new Map<string, { first: number[]; restart: number[]; rss: number[] }>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, args] of Object.entries(variants)) {
      const data = tempDir('startup');
      try {
        const first = await start(args, data.dir);
        const restart = await start(args, data.dir);
        const entry = figures.get(name) ?? { first: [], restart: [], rss: [] };
        entry.first.push(first.ms);
        entry.restart.push(restart.ms);
        entry.rss.push(restart.rss);
        figures.set(name, entry);
      } finally {
        data.remove();
      }
    }
  }
  const bare = figures.get('bare node:http')!;
  table(
    `start-up, means of ${ROUNDS} interleaved rounds (spawn → first 200 on /health; RSS after ${IDLE_MS / 1000} s idle)`,
    ['variant', 'first start (empty DATA_DIR)', 'restart', 'restart ÷ bare', 'idle RSS'],
    [...figures].map(([name, f]) => [
      name,
      fmt.ms(Math.round(mean(f.first))),
      fmt.ms(Math.round(mean(f.restart))),
      fmt.ratio(mean(f.restart) / mean(bare.restart)),
      fmt.mb(mean(f.rss)),
    ]),
  );
}
