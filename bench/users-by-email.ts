/**
 * users-by-email: GET /api/v2/users-by-email for an existing user of a tenant holding 1,000,000 users,
 * at 50 connections, against a bare node:http server answering the same bytes; interleaved
 * bare, server, bare, server. Servers and load generator are separate processes. Over HTTP, then
 * HTTPS (both servers with the same self-signed certificate), each with a one-scope token (~600
 * characters) and with the admin token (every scope, ~8 KB); Tenantry at the default log level, its
 * lines written to a file. Each run reports both servers' CPU per request (/proc/<pid>/stat).
 */
import https from 'node:https';
import path from 'node:path';
import {
  comparisonRows,
  fmt,
  HOST,
  interleave,
  record,
  runChild,
  selfSignedCertificate,
  serverEnv,
  spawnBare,
  spawnServer,
  table,
  tempDir,
  verdict,
  type BenchContext,
  type RecordedResponse,
} from './lib.ts';

const USERS = Number(process.env.BENCH_USERS ?? 1_000_000);
/** The server's log level: the default, as deployed, unless BENCH_LOG_LEVEL says otherwise (`silent`). */
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'info';
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

  const tls = selfSignedCertificate(path.dirname(dataDir));
  const summary: Array<Array<string | number>> = [];
  try {
    for (const scheme of ['http', 'https'] as const) {
      // The server at the default log level, its lines going to a file as an operator's would.
      const logFile = path.join(path.dirname(dataDir), `server-${scheme}.log`);
      const server = await spawnServer(
        dataDir,
        {
          LOG_LEVEL: LOG_LEVEL,
          ...(scheme === 'https' ? { TLS_CERT_FILE: tls.cert, TLS_KEY_FILE: tls.key } : {}),
        },
        logFile,
      );
      let bare: Awaited<ReturnType<typeof spawnBare>> | undefined;
      try {
        const email = `user${Math.floor(USERS / 2)}@bench.example`;
        const url = `/api/v2/users-by-email?email=${encodeURIComponent(email)}`;
        // The recording is made over plain HTTP on a twin of the exchange: the bytes are the same.
        const recorded = await recordOver(scheme, server.port, url, server.token);
        const body = JSON.parse(Buffer.from(recorded.bodyBase64, 'base64').toString('utf8')) as Array<{
          email?: string;
        }>;
        if (recorded.status !== 200 || body.length !== 1 || body[0]?.email !== email) {
          throw new Error(`unexpected answer to ${url}: ${recorded.status} ${JSON.stringify(body).slice(0, 200)}`);
        }
        process.stdout.write(
          `  ${scheme}: response ${recorded.status}, ${Buffer.from(recorded.bodyBase64, 'base64').length} bytes, headers ${Object.keys(recorded.headers).join(', ')}\n`,
        );
        const rssBefore = server.rss();
        bare = await spawnBare(recorded, path.dirname(dataDir), scheme === 'https' ? tls : undefined);
        const tokens = [
          { name: 'read:users token', token: server.ready.readerToken as string },
          { name: 'admin token', token: server.token },
        ];
        for (const { name, token } of tokens) {
          process.stdout.write(`  ${scheme}, ${name} (${token.length} characters), log level ${LOG_LEVEL}\n`);
          const results = await interleave(
            [
              { name: 'bare node:http', child: Object.assign(bare, { port: bare.ready.port as number }) },
              { name: 'tenantry', child: server },
            ],
            2,
            {
              path: url,
              headers: { authorization: `Bearer ${token}` },
              https: scheme === 'https',
              connections: 50,
              durationSeconds: 10,
              warmupSeconds: 2,
              maxRequests: 2_000_000,
            },
          );
          const { header, rows, ratio, cpuRatio, baseline, measured, logBytesPerRequest } = comparisonRows(
            results,
            'bare node:http',
            'tenantry',
          );
          const title = `users-by-email over ${scheme.toUpperCase()}, ${name} (${token.length} characters), log level ${LOG_LEVEL}`;
          table(`${title} — ${fmt.int(USERS)} users, 50 connections, 10 s per run after 2 s warm-up`, header, rows);
          const ratioTarget = scheme === 'https' ? 0.85 : 0.7;
          summary.push([
            scheme.toUpperCase(),
            `${name} (${token.length} ch)`,
            fmt.int(baseline.reqPerSec),
            fmt.int(measured.reqPerSec),
            `${fmt.ratio(ratio)} (≥ ${ratioTarget}: ${verdict(ratio >= ratioTarget)})`,
            fmt.int(baseline.cpuUsPerRequest),
            fmt.int(measured.cpuUsPerRequest),
            `${fmt.ratio(cpuRatio)} (≤ 2: ${verdict(cpuRatio <= 2)})`,
            `${fmt.ms(measured.p99)} (≤ 5 ms: ${verdict(measured.p99 <= 5)})`,
            Number.isFinite(logBytesPerRequest) ? fmt.int(logBytesPerRequest) : '—',
          ]);
        }
        const rssAfter = server.rss();
        process.stdout.write(
          `  ${scheme}: server RSS ${fmt.mb(rssBefore)} before load, ${fmt.mb(rssAfter)} after — target < 300 MB: ${verdict(rssAfter < 300 * 1024 * 1024)}\n`,
        );
      } finally {
        await bare?.stop();
        await server.stop();
      }
    }
    table(
      `users-by-email — summary (means of 2 rounds; CPU from /proc/<pid>/stat over each measured run)`,
      [
        'scheme',
        'token',
        'bare req/s',
        'tenantry req/s',
        'req/s ratio',
        'bare CPU µs/req',
        'tenantry CPU µs/req',
        'CPU ratio',
        'tenantry p99',
        'log bytes/req',
      ],
      summary,
    );
  } finally {
    remove();
  }
}

/** One exchange with the server, over its own scheme (fetch checks certificates: node:https for HTTPS). */
async function recordOver(
  scheme: 'http' | 'https',
  port: number,
  url: string,
  token: string,
): Promise<RecordedResponse> {
  if (scheme === 'http') return record(port, url, { headers: { authorization: `Bearer ${token}` } });
  return new Promise((resolve, reject) => {
    https
      .get(
        { host: HOST, port, path: url, headers: { authorization: `Bearer ${token}` }, rejectUnauthorized: false },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const headers: Record<string, string> = {};
            for (const [name, value] of Object.entries(res.headers))
              if (
                !['date', 'connection', 'keep-alive', 'transfer-encoding'].includes(name) &&
                typeof value === 'string'
              )
                headers[name] = value;
            resolve({ status: res.statusCode ?? 0, headers, bodyBase64: Buffer.concat(chunks).toString('base64') });
          });
        },
      )
      .on('error', reject);
  });
}
