/**
 * import-job: 1,000,000 generated users (NDJSON) imported through the API, as a team's script does it:
 * `POST /api/v2/jobs/users-imports` with the file streamed from disk, then `GET /jobs/{id}` until the
 * job completes. Reports the upload time, the import time, users per second and the server's peak RSS
 * (sampled every 100 ms from /proc), against a child merely reading and JSON.parse-ing the same file.
 */
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { writeNdjson, USERS } from './import.ts';
import { fmt, HOST, runChild, serverEnv, spawnServer, table, tempDir, verdict } from './lib.ts';

/** The job must end within this, or the benchmark stops (it is bounded in time like every load). */
const MAX_MS = 600_000;

export async function run(): Promise<void> {
  const work = tempDir('import-job');
  const file = path.join(work.dir, 'users.ndjson');
  const dataDir = path.join(work.dir, 'data');
  try {
    const bytes = await writeNdjson(file, USERS);
    process.stdout.write(`  wrote ${fmt.int(USERS)} users, ${fmt.mb(bytes)}\n`);
    const parse = await runChild('seed.ts', ['parse', file, '5000'], serverEnv(dataDir));
    const server = await spawnServer(dataDir);
    let peakRss = server.rss();
    const idleRss = peakRss;
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, server.rss())), 100);
    try {
      const base = `http://${HOST}:${server.port}/api/v2`;
      const headers = { authorization: `Bearer ${server.token}` };
      const connections = (await (await fetch(`${base}/connections?strategy=auth0`, { headers })).json()) as Array<{
        id: string;
      }>;
      const form = new FormData();
      form.append('users', await fs.openAsBlob(file), 'users.ndjson');
      form.append('connection_id', connections[0]!.id);
      const started = performance.now();
      const created = await fetch(`${base}/jobs/users-imports`, { method: 'POST', headers, body: form });
      const job = (await created.json()) as { id: string };
      if (created.status !== 201) throw new Error(`upload refused: ${created.status} ${JSON.stringify(job)}`);
      const uploadMs = performance.now() - started;
      const uploadRss = peakRss;
      let summary: { inserted: number; failed: number; total: number } | undefined;
      while (!summary) {
        if (performance.now() - started > MAX_MS) throw new Error(`the job did not end within ${MAX_MS} ms`);
        await sleep(200);
        const state = (await (await fetch(`${base}/jobs/${job.id}`, { headers })).json()) as {
          status: string;
          summary?: { inserted: number; failed: number; total: number };
          status_details?: string;
        };
        if (state.status === 'failed') throw new Error(`the job failed: ${state.status_details}`);
        if (state.status === 'completed') summary = state.summary;
      }
      const totalMs = performance.now() - started;
      const usersPerSec = (summary.inserted / totalMs) * 1000;
      table(
        `import-job — ${fmt.int(USERS)} users, NDJSON ${fmt.mb(bytes)}, through the API, SQLite`,
        ['variant', 'users', 'time', 'users/s', 'RSS'],
        [
          [
            'baseline: read + JSON.parse (child)',
            fmt.int(parse.users),
            fmt.s(parse.ms),
            fmt.int(parse.usersPerSec),
            fmt.mb(parse.rss),
          ],
          ['upload (201, file stored in chunks)', fmt.int(USERS), fmt.s(uploadMs), '', `peak ${fmt.mb(uploadRss)}`],
          [
            'upload + import to completed',
            fmt.int(summary.inserted),
            fmt.s(totalMs),
            fmt.int(usersPerSec),
            `peak ${fmt.mb(peakRss)} (idle ${fmt.mb(idleRss)})`,
          ],
        ],
      );
      process.stdout.write(
        `\n  ratio import/baseline (users/s): ${fmt.ratio(usersPerSec / parse.usersPerSec)}; failed ${summary.failed} of ${summary.total}\n`,
      );
      process.stdout.write(
        `  the file is not held in memory (peak RSS − idle < file size): ${verdict(peakRss - idleRss < bytes)} (${fmt.mb(peakRss - idleRss)} vs ${fmt.mb(bytes)})\n`,
      );
    } finally {
      clearInterval(sampler);
      await server.stop();
    }
  } finally {
    work.remove();
  }
}
