/**
 * soak: the server as `npm start` runs it (bin/tenantry.mjs, compiled, with the start script's Node
 * flags) on a tenant of BENCH_USERS users (1,000,000 by default), under sustained load for
 * BENCH_SOAK_MINUTES (30), its resident memory read every second. The load mixes what fills the
 * server's caches and buffers: users-by-email hits and misses, 200 distinct tokens, unknown Host
 * headers of up to 2 KB, and log lines at `info` written to a file. Reported: idle memory before the
 * load, the peak during it, the peak of each 5-minute stretch after a 2-minute warm-up (growth shows as
 * a rising row), and idle memory BENCH_SOAK_IDLE_SECONDS (90 s) after it. Bounded: each 30-second round
 * stops at its time or its request cap, and the whole at its minutes.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import { buildDist } from '../scripts/compile.mjs';
import { freePort } from '../test/helpers/server-process.ts';
import {
  ADMIN_ID,
  ADMIN_SECRET,
  AUDIENCE,
  BENCH_DIR,
  fmt,
  HOST,
  readRss,
  runChild,
  serverEnv,
  startFlags,
  table,
  tempDir,
  TENANT_DOMAIN,
  verdict,
  type BenchContext,
} from './lib.ts';

const USERS = Number(process.env.BENCH_USERS ?? 1_000_000);
const MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 30);
const WARMUP_MINUTES = Math.min(2, MINUTES / 4);
const ROUND_SECONDS = 30;
/** Per round: far above what one 2-core machine serves in 30 s, so time is the bound that acts. */
const ROUND_MAX_REQUESTS = 3_000_000;
const TOKENS = 200;
/** Longer than TEMPLATE_RENDER_IDLE_MS (60 s): idle means the render threads started at boot have ended too. */
const IDLE_SECONDS = Number(process.env.BENCH_SOAK_IDLE_SECONDS ?? 90);
const MB = 1024 * 1024;
const project = path.dirname(BENCH_DIR);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function grant(base: string): Promise<string> {
  const response = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', host: TENANT_DOMAIN },
    body: JSON.stringify({
      grant_type: 'client_credentials',
      client_id: ADMIN_ID,
      client_secret: ADMIN_SECRET,
      audience: AUDIENCE,
    }),
  });
  if (response.status !== 200) throw new Error(`token request answered ${response.status}`);
  return ((await response.json()) as { access_token: string }).access_token;
}

export async function run(_context: BenchContext): Promise<void> {
  await buildDist(project);
  const work = tempDir('soak');
  const dataDir = path.join(work.dir, 'data');
  const logFile = path.join(work.dir, 'server.log');
  let child: ReturnType<typeof spawn> | undefined;
  try {
    process.stdout.write(`  seeding ${fmt.int(USERS)} users through insertMany\n`);
    await runChild('seed.ts', ['generate', String(USERS), '5000'], serverEnv(dataDir));
    const port = await freePort();
    const flags = startFlags();
    child = spawn(process.execPath, [...flags, path.join(project, 'bin/tenantry.mjs'), 'serve'], {
      cwd: project,
      env: { ...process.env, ...serverEnv(dataDir), PORT: String(port), LOG_LEVEL: 'info' },
      stdio: ['ignore', fs.openSync(logFile, 'w'), 'inherit'],
    });
    const pid = child.pid!;
    const base = `http://${HOST}:${port}`;
    for (let waited = 0; ; waited += 50) {
      if (waited > 60_000) throw new Error('the server did not answer within 60 s');
      if (
        await fetch(`${base}/health`).then(
          (r) => r.ok,
          () => false,
        )
      )
        break;
      await sleep(50);
    }
    process.stdout.write(`  serving on ${base} with ${flags.join(' ') || 'no Node flags'}; idle ${IDLE_SECONDS} s\n`);
    await sleep(IDLE_SECONDS * 1000);
    const idleBefore = readRss(pid);

    const tokens: string[] = [];
    for (let i = 0; i < TOKENS; i++) tokens.push(await grant(base));
    const requests = Array.from({ length: 1000 }, (_, i) => {
      const token = tokens[i % TOKENS]!;
      // Three in four find a user, one in four finds none; one in fifty names a host no tenant has.
      const email = i % 4 === 3 ? `nobody${i}@bench.example` : `user${(i * 7919) % USERS}@bench.example`;
      const host = i % 50 === 0 ? `${i}-${'h'.repeat(200 + ((i * 37) % 1800))}.unknown.example` : TENANT_DOMAIN;
      return {
        method: 'GET' as const,
        path: `/api/v2/users-by-email?email=${encodeURIComponent(email)}`,
        headers: { authorization: `Bearer ${token}`, host },
      };
    });

    const samples: Array<{ at: number; rss: number }> = [];
    const started = Date.now();
    const sampler = setInterval(() => samples.push({ at: (Date.now() - started) / 60_000, rss: readRss(pid) }), 1000);
    let served = 0;
    let failed = 0;
    try {
      while (Date.now() - started < MINUTES * 60_000) {
        const seconds = Math.min(ROUND_SECONDS, Math.ceil((MINUTES * 60_000 - (Date.now() - started)) / 1000));
        const result = await autocannon({
          url: base,
          connections: 50,
          duration: seconds,
          maxOverallRequests: ROUND_MAX_REQUESTS,
          requests,
          timeout: 10,
        });
        served += result.requests.total;
        failed += result.errors + result.timeouts;
      }
    } finally {
      clearInterval(sampler);
    }
    const minutes = (Date.now() - started) / 60_000;
    await sleep(IDLE_SECONDS * 1000);
    const idleAfter = readRss(pid);

    const peak = (from: number, to: number) =>
      Math.max(...samples.filter((s) => s.at >= from && s.at < to).map((s) => s.rss));
    const stretches: Array<Array<string | number>> = [];
    for (let from = WARMUP_MINUTES; from < minutes; from += 5) {
      const to = Math.min(from + 5, minutes);
      stretches.push([`${fmt.int(from)}–${fmt.int(to)} min`, fmt.int(peak(from, to) / MB)]);
    }
    const warmPeaks = stretches.map((row) => Number(String(row[1]).replace(/,/g, '')));
    const overall = Math.max(...samples.map((s) => s.rss));
    const growth = warmPeaks.length > 1 ? warmPeaks.at(-1)! - warmPeaks[0]! : 0;
    table('soak: peak resident memory per stretch after the warm-up (MB)', ['stretch', 'peak RSS'], stretches);
    table(
      `soak: ${fmt.int(USERS)} users, ${minutes.toFixed(1)} min, ${fmt.int(served)} requests (${fmt.int(served / (minutes * 60))}/s), ${failed} errors`,
      ['figure', 'MB', 'target', ''],
      [
        ['idle, before the load', fmt.int(idleBefore / MB), '≤ 100', verdict(idleBefore <= 100 * MB)],
        ['peak under load', fmt.int(overall / MB), '≤ 150', verdict(overall <= 150 * MB)],
        ['growth after the warm-up (last stretch − first)', fmt.int(growth), '≈ 0', verdict(growth <= 10)],
        [`idle, ${IDLE_SECONDS} s after the load`, fmt.int(idleAfter / MB), '≤ 100', verdict(idleAfter <= 100 * MB)],
      ],
    );
    process.stdout.write(`  log written: ${fmt.int(fs.statSync(logFile).size / MB)} MB\n`);
  } finally {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    work.remove();
  }
}
