/**
 * users-by-email: GET /api/v2/users-by-email for an existing user of a tenant holding 1,000,000 users,
 * at 50 connections, against a bare node:http server answering the same bytes; interleaved
 * bare, server, bare, server. Servers and load generator are separate processes.
 */
import path from 'node:path';
import {
  comparisonRows,
  fmt,
  interleave,
  record,
  runChild,
  serverEnv,
  spawnBare,
  spawnServer,
  table,
  tempDir,
  verdict,
  type BenchContext,
} from './lib.ts';

const USERS = Number(process.env.BENCH_USERS ?? 1_000_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 5000);

export async function run(context: BenchContext): Promise<void> {
  let dataDir: string;
  let remove: () => void;
  if (context.seeded && context.seeded.users === USERS) {
    ({ dataDir, remove } = context.seeded);
    context.seeded = undefined;
    process.stdout.write(`  serving the database the import benchmark filled (${fmt.int(USERS)} users)\n`);
  } else {
    const work = tempDir('users-by-email');
    dataDir = path.join(work.dir, 'data');
    remove = work.remove;
    process.stdout.write(`  seeding ${fmt.int(USERS)} users through insertMany (batches of ${BATCH})\n`);
    const seeded = await runChild('seed.ts', ['generate', String(USERS), String(BATCH)], serverEnv(dataDir));
    process.stdout.write(
      `  seeded ${fmt.int(seeded.users)} users in ${fmt.s(seeded.ms)}: ${fmt.int(seeded.usersPerSec)} users/s\n`,
    );
  }

  const server = await spawnServer(dataDir);
  let bare: Awaited<ReturnType<typeof spawnBare>> | undefined;
  try {
    const email = `user${Math.floor(USERS / 2)}@bench.example`;
    const url = `/api/v2/users-by-email?email=${encodeURIComponent(email)}`;
    const headers = { authorization: `Bearer ${server.token}` };
    const recorded = await record(server.port, url, { headers });
    const body = JSON.parse(Buffer.from(recorded.bodyBase64, 'base64').toString('utf8')) as Array<{ email?: string }>;
    if (recorded.status !== 200 || body.length !== 1 || body[0]?.email !== email) {
      throw new Error(`unexpected answer to ${url}: ${recorded.status} ${JSON.stringify(body).slice(0, 200)}`);
    }
    process.stdout.write(
      `  response: ${recorded.status}, ${Buffer.from(recorded.bodyBase64, 'base64').length} bytes, headers ${Object.keys(recorded.headers).join(', ')}\n`,
    );
    const rssBefore = server.rss();
    bare = await spawnBare(recorded, dataDir);
    const results = await interleave(
      [
        { name: 'bare node:http', child: Object.assign(bare, { port: bare.ready.port as number }) },
        { name: 'tenantry', child: server },
      ],
      2,
      { path: url, headers, connections: 50, durationSeconds: 10, warmupSeconds: 2, maxRequests: 2_000_000 },
    );
    const rssAfter = server.rss();
    const { header, rows, ratio, measured } = comparisonRows(results, 'bare node:http', 'tenantry');
    table(`users-by-email — ${fmt.int(USERS)} users, 50 connections, 10 s per run after 2 s warm-up`, header, rows);
    process.stdout.write(
      [
        '',
        `  ratio tenantry/bare (mean req/s): ${fmt.ratio(ratio)} — target ≥ 0.50: ${verdict(ratio >= 0.5)}`,
        `  tenantry p99 (mean of rounds): ${fmt.ms(measured.p99)} — target < 10 ms: ${verdict(measured.p99 < 10)}`,
        `  server RSS: ${fmt.mb(rssBefore)} before load, ${fmt.mb(rssAfter)} after — target < 300 MB: ${verdict(rssAfter < 300 * 1024 * 1024)}`,
        '',
      ].join('\n'),
    );
  } finally {
    await bare?.stop();
    await server.stop();
    remove();
  }
}
